"""Both tiers of a partition built by hand (no broker): the log's first segments moved to
a remote root in LocalTieredStorage's layout (or a path template) and listed in
``__remote_log_metadata``, the rest local. A transaction that begins in the remote tier
and is aborted in the local one; a tier gap; an object that is not a plain segment."""
from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafkalog.errors import DataLossError, UnsupportedFormatError
from spark_kafkalog.log import read_table

from .tiered_builder import TOPIC, build, tier


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
def test_both_tiers_read_as_one_log(tmp_path, isolation):
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    got = read_table(data, TOPIC, isolation_level=isolation, remote_storage=remote)
    assert got.equals(p.expected_table(isolation))
    values = got.column("value").to_pylist()
    assert (b"aborted-1" in values) == (isolation == "read_uncommitted")
    assert b"committed-1" in values and b"committed-2" in values
    # the local tier alone holds less than the log start promises: loud, naming the way
    with pytest.raises(DataLossError, match=r"offsets 0\.\..*remoteStorage"):
        read_table(data, TOPIC, isolation_level=isolation)
    local = read_table(data, TOPIC, isolation_level=isolation, fail_on_data_loss=False)
    assert local.column("offset")[0].as_py() >= bases[3]
    # a range inside the remote tier only, and one across the boundary
    part = read_table(data, TOPIC, isolation_level=isolation, remote_storage=remote,
                      starting_offsets={0: 12}, ending_offsets={0: bases[3] + 1})
    assert part.equals(p.expected_table(isolation, start=12, end=bases[3] + 1))


def test_a_path_template_layout(tmp_path):
    p, full, bases = build(tmp_path)
    template = "{topic_id}/{partition}/{segment_id}-{start_offset}{suffix}"
    data, remote = tier(tmp_path, p, full, bases, template=template)
    layout = "{topic_id}/{partition}/{segment_id}-{start_offset}{suffix}"
    got = read_table(data, TOPIC, remote_storage=remote, remote_layout=layout)
    assert got.equals(p.expected_table())
    with pytest.raises(DataLossError, match="missing from the remote store"):
        read_table(data, TOPIC, remote_storage=remote)       # the default layout


def test_a_segment_the_metadata_does_not_list_is_a_gap(tmp_path):
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases, listed=(0, 2))
    with pytest.raises(DataLossError, match=f"{TOPIC}-0: offsets {bases[1]}..{bases[2] - 1} "
                                            "were promised .* neither tier holds them"):
        read_table(data, TOPIC, remote_storage=remote)
    got = read_table(data, TOPIC, remote_storage=remote, fail_on_data_loss=False)
    offsets = got.column("offset").to_pylist()
    assert offsets[0] == 0 and not any(bases[1] <= o < bases[2] for o in offsets)


def test_an_object_a_plugin_transformed_is_refused(tmp_path):
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    seg = next(Path(remote).rglob(f"{bases[1]:020d}-*.log"))
    raw = seg.read_bytes()
    seg.write_bytes(b"\x28\xb5\x2f\xfd" + raw[4:])           # a zstd frame's magic, say
    with pytest.raises(UnsupportedFormatError, match="not a plain Kafka segment"):
        read_table(data, TOPIC, remote_storage=remote)

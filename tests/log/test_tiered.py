"""Both tiers of a partition built by hand (no broker): the log's first segments moved to
a remote root in LocalTieredStorage's layout (or a path template) and listed in
``__remote_log_metadata``, the rest local. A transaction that begins in the remote tier
and is aborted in the local one; a tier gap; an object that is not a plain segment."""
from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafkalog.errors import DataLossError, UnsupportedFormatError
from spark_kafkalog.format.remote_log_metadata import TOPIC as RLM
from spark_kafkalog.log import read_table
from spark_kafkalog.log.write.table import write_table
from tests.format import remote_log_metadata_builders as b

from .logbuilder import LogDirBuilder, rec, sample_records, segment_name

TOPIC = "orders"
TOPIC_ID = b.TOPIC_ID
SEG_IDS = ["AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBA", "CCCCCCCCCCCCCCCCCCCCCA"]
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def _build(tmp_path: Path):
    """Segments [0, 10) [10, 17) [17, ..) remote, the rest local; producer 7's
    transaction starts in the last remote segment and is aborted locally; producer 8's
    is committed across the boundary too."""
    full = tmp_path / "full"
    lb = LogDirBuilder(full)
    p = lb.partition(TOPIC, 0)
    p.log_start_offset = 0
    p.append(sample_records(10, b"a"))
    p.roll()
    p.append(sample_records(4, b"b"))
    p.append(sample_records(3, b"c"))
    p.roll()
    t7 = p.begin_txn(7)
    t8 = p.begin_txn(8)
    p.append([rec(b"k7", b"aborted-1")], txn=t7)
    p.append([rec(b"k8", b"committed-1")], txn=t8)
    p.append(sample_records(2, b"d"))
    p.roll()                                   # the local tier starts here
    p.append([rec(b"k7", b"aborted-2")], txn=t7)
    p.end_txn(t7, commit=False)
    p.append([rec(b"k8", b"committed-2")], txn=t8)
    p.end_txn(t8, commit=True)
    p.roll()
    p.append(sample_records(5, b"e"))
    p.high_watermark = p.log_end_offset
    lb.write()
    bases = [base for base, _ in p.segments]
    return p, full, bases


def _tier(tmp_path, p, full, bases, *, template=None, listed=(0, 1, 2)):
    """Copy ``full`` to a log dir without the first three segments, those in a remote
    root, and their metadata (copy started, then finished) in the log dir."""
    data, remote = tmp_path / "data", tmp_path / "remote"
    shutil.copytree(full, data)
    src = full / f"{TOPIC}-0"
    values = []
    for i in range(3):
        start, end = bases[i], bases[i + 1] - 1
        size = (src / segment_name(start, ".log")).stat().st_size
        has_txn = (src / segment_name(start, ".txnindex")).exists()
        for suffix in SUFFIXES:
            f = src / segment_name(start, suffix)
            (data / f"{TOPIC}-0" / f.name).unlink(missing_ok=True)
            if not f.exists():
                continue
            name = (template or "{topic}-{partition}-{topic_id}/{start_offset}-{segment_id}"
                    "{suffix}").format(topic=TOPIC, partition=0, topic_id=TOPIC_ID,
                                       segment_id=SEG_IDS[i], start_offset=f"{start:020d}",
                                       suffix=suffix)
            (remote / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, remote / name)
        if i in listed:
            kw = dict(topic=TOPIC, topic_id=TOPIC_ID, partition=0, segment=SEG_IDS[i])
            values.append(b.segment(start=start, end=end, size=size, txn_empty=not has_txn,
                                    **kw))
            values.append(b.update(state=1, **kw))
    write_table(str(data), RLM, pa.table({"value": pa.array(values, pa.binary())}),
                allow_internal_topic=True)
    return str(data), str(remote)


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
def test_both_tiers_read_as_one_log(tmp_path, isolation):
    p, full, bases = _build(tmp_path)
    data, remote = _tier(tmp_path, p, full, bases)
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
    p, full, bases = _build(tmp_path)
    template = "{topic_id}/{partition}/{segment_id}-{start_offset}{suffix}"
    data, remote = _tier(tmp_path, p, full, bases, template=template)
    layout = "{topic_id}/{partition}/{segment_id}-{start_offset}{suffix}"
    got = read_table(data, TOPIC, remote_storage=remote, remote_layout=layout)
    assert got.equals(p.expected_table())
    with pytest.raises(DataLossError, match="missing from the remote store"):
        read_table(data, TOPIC, remote_storage=remote)       # the default layout


def test_a_segment_the_metadata_does_not_list_is_a_gap(tmp_path):
    p, full, bases = _build(tmp_path)
    data, remote = _tier(tmp_path, p, full, bases, listed=(0, 2))
    with pytest.raises(DataLossError, match=f"{TOPIC}-0: offsets {bases[1]}..{bases[2] - 1} "
                                            "were promised .* neither tier holds them"):
        read_table(data, TOPIC, remote_storage=remote)
    got = read_table(data, TOPIC, remote_storage=remote, fail_on_data_loss=False)
    offsets = got.column("offset").to_pylist()
    assert offsets[0] == 0 and not any(bases[1] <= o < bases[2] for o in offsets)


def test_an_object_a_plugin_transformed_is_refused(tmp_path):
    p, full, bases = _build(tmp_path)
    data, remote = _tier(tmp_path, p, full, bases)
    seg = next(Path(remote).rglob(f"{bases[1]:020d}-*.log"))
    raw = seg.read_bytes()
    seg.write_bytes(b"\x28\xb5\x2f\xfd" + raw[4:])           # a zstd frame's magic, say
    with pytest.raises(UnsupportedFormatError, match="not a plain Kafka segment"):
        read_table(data, TOPIC, remote_storage=remote)

"""Both tiers of a partition built by hand (no broker): the log's first segments moved to
a remote root in LocalTieredStorage's layout (or a path template) and listed in
``__remote_log_metadata``, the rest local. A transaction that begins in the remote tier
and is aborted in the local one; a tier gap; an object that is not a plain segment; a read
holds the remote metadata it planned with (one state per read) while a new read sees the
metadata's change."""
from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafkalog.errors import DataLossError, InvalidOptionError, UnsupportedFormatError
from spark_kafkalog.format.remote_log_metadata import TOPIC as RLM
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.read import reader as log_reader
from spark_kafkalog.log.read.scan import ReadStats
from spark_kafkalog.log.write.table import write_table
from tests.format import remote_log_metadata_builders as rlm

from .tiered_builder import SEG_IDS, TOPIC, TOPIC_ID, build, tier

DELETE_SEGMENT_STARTED = 2           # Kafka's RemoteLogSegmentState id


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
    # the default layout: no object of the topic where it looks, so not data loss
    with pytest.raises(InvalidOptionError, match="holds no object of topic 'orders'"):
        read_table(data, TOPIC, remote_storage=remote)


def test_a_root_above_the_remote_tier_is_a_configuration_error(tmp_path, monkeypatch):
    """The broker's rsm.config.dir, one level above LocalTieredStorage's
    kafka-tiered-storage: refused before any read as the wrong root, naming it and the
    directory below it that holds the topic's segments (not data loss, which would steer
    the user to failOnDataLoss=false); a root that does not exist says so."""
    p, full, bases = build(tmp_path)
    rsm = tmp_path / "rsm"
    data, remote = tier(tmp_path, p, full, bases, remote=rsm / "kafka-tiered-storage")
    (rsm / "other").mkdir()
    reads = []
    real = log_reader.read_tiered
    monkeypatch.setattr(log_reader, "read_tiered",
                        lambda *a, **kw: reads.append(1) or real(*a, **kw))
    for fail in (True, False):
        with pytest.raises(InvalidOptionError) as e:
            read_table(data, TOPIC, remote_storage=str(rsm), fail_on_data_loss=fail)
        assert str(e.value).startswith(f"remote_storage: {rsm} holds no object of topic "
                                       "'orders' (__remote_log_metadata lists 3 remote "
                                       "segment(s) of it, the first at ")
        assert str(e.value).endswith(f"did you mean remote_storage "
                                     f"{rsm}/kafka-tiered-storage?")
    with pytest.raises(InvalidOptionError, match=f"{tmp_path}/nowhere does not exist"):
        read_table(data, TOPIC, remote_storage=str(tmp_path / "nowhere"))
    assert reads == []                                      # refused at planning
    assert read_table(data, TOPIC, remote_storage=remote).equals(p.expected_table())


def test_a_root_holding_some_of_the_topic_is_data_loss(tmp_path):
    """The first segment's objects gone, the others there: the root is right and the
    read is data loss (the check lists the directories only when the first is missing)."""
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    for f in Path(remote).rglob(f"{bases[0]:020d}-{SEG_IDS[0]}.*"):
        f.unlink()
    with pytest.raises(DataLossError, match=f"remote segment {SEG_IDS[0]} is missing"):
        read_table(data, TOPIC, remote_storage=remote)
    # a read that starts past the lost segment reads the rest
    got = read_table(data, TOPIC, remote_storage=remote, starting_offsets={0: bases[1]})
    assert got.equals(p.expected_table(start=bases[1]))


def test_a_segment_the_metadata_does_not_list_is_a_gap(tmp_path):
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases, listed=(0, 2))
    with pytest.raises(DataLossError, match=f"{TOPIC}-0: offsets {bases[1]}..{bases[2] - 1} "
                                            "were promised .* neither tier holds them"):
        read_table(data, TOPIC, remote_storage=remote)
    got = read_table(data, TOPIC, remote_storage=remote, fail_on_data_loss=False)
    offsets = got.column("offset").to_pylist()
    assert offsets[0] == 0 and not any(bases[1] <= o < bases[2] for o in offsets)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "data loss" in r.getMessage()]


def test_a_missing_remote_segment_warns_once_per_partition_and_is_in_stats(tmp_path, caplog):
    """failOnDataLoss=false over a remote tier that lost a segment's object and has a
    gap the metadata shows: the rows that are there, one warning for the partition that
    names it, the offsets and the missing segment, and both losses in the read's stats
    (as the local tier reports its own)."""
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases, listed=(0, 2))      # segment 1: a gap
    seg = next(Path(remote).rglob(f"{bases[2]:020d}-{SEG_IDS[2]}.log"))
    seg.unlink()                                                      # segment 2: lost
    with pytest.raises(DataLossError, match=f"offsets {bases[1]}..{bases[2] - 1}"):
        read_table(data, TOPIC, remote_storage=remote)
    stats = ReadStats()
    caplog.set_level(logging.WARNING)
    got = read_table(data, TOPIC, remote_storage=remote, fail_on_data_loss=False,
                     stats=stats)
    assert got.equals(pa.concat_tables([p.expected_table(end=bases[1]),
                                        p.expected_table(start=bases[3])]))
    (warning,) = _warnings(caplog)
    assert warning.startswith(f"data loss in {TOPIC}-0 ")
    assert f"offsets {bases[1]}..{bases[2] - 1}" in warning and "neither tier" in warning
    assert f"offsets {bases[2]}..{bases[3] - 1}" in warning and SEG_IDS[2] in warning
    assert str(seg) in warning
    assert [(x.topic, x.partition, x.kind, x.start, x.end) for x in stats.losses] == [
        (TOPIC, 0, "remote_gap", bases[1], bases[2]),
        (TOPIC, 0, "remote_missing", bases[2], bases[3])]
    # a read that does not reach the lost offsets warns of nothing
    caplog.clear()
    read_table(data, TOPIC, remote_storage=remote, fail_on_data_loss=False,
               starting_offsets={0: bases[3]})
    assert _warnings(caplog) == []


def test_a_local_gap_of_a_tiered_read_follows_fail_on_data_loss(tmp_path, caplog):
    """A local segment between two others gone, with the remote tier read too: the local
    tier's loss is data loss as it is without a remote tier (failOnDataLoss=false: the
    rest, one warning naming the offsets), not an error whatever the option says."""
    p, full, bases = build(tmp_path, more_local=1)
    data, remote = tier(tmp_path, p, full, bases)
    assert len(bases) == 6                         # 3 remote, 3 local segments
    for f in (Path(data) / f"{TOPIC}-0").glob(f"{bases[4]:020d}.*"):
        f.unlink()                                 # the middle local one
    with pytest.raises(DataLossError, match=f"offsets {bases[4]}..{bases[5] - 1}"):
        read_table(data, TOPIC, remote_storage=remote)
    caplog.set_level(logging.WARNING)
    got = read_table(data, TOPIC, remote_storage=remote, fail_on_data_loss=False)
    assert got.equals(pa.concat_tables([p.expected_table(end=bases[4]),
                                        p.expected_table(start=bases[5])]))
    (warning,) = _warnings(caplog)
    assert f"offsets {bases[4]}..{bases[5] - 1}" in warning


def test_an_object_a_plugin_transformed_is_refused(tmp_path):
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    seg = next(Path(remote).rglob(f"{bases[1]:020d}-*.log"))
    raw = seg.read_bytes()
    seg.write_bytes(b"\x28\xb5\x2f\xfd" + raw[4:])           # a zstd frame's magic, say
    with pytest.raises(UnsupportedFormatError, match="not a plain Kafka segment"):
        read_table(data, TOPIC, remote_storage=remote)


def mark(data: str, i: int, state: int = DELETE_SEGMENT_STARTED) -> None:
    """Append to ``__remote_log_metadata`` an update moving remote segment ``i`` (of
    :func:`tier`'s three) to ``state``, as the broker's retention does (its objects stay)."""
    value = rlm.update(state=state, topic=TOPIC, topic_id=TOPIC_ID, partition=0,
                       segment=SEG_IDS[i])
    write_table(data, RLM, pa.table({"value": pa.array([value], pa.binary())}),
                allow_internal_topic=True)


def states(data: str) -> dict[str, str]:
    rows = log_reader.load_remote_metadata(LogDirs(data)).segments().to_pylist()
    return {r["segment_id"]: r["state"] for r in rows}


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
@pytest.mark.parametrize("which", (0, 1))
def test_a_read_holds_the_remote_metadata_it_planned(tmp_path, monkeypatch, isolation,
                                                     which):
    """read_table loads ``__remote_log_metadata`` once, when it plans the tiers, and reads
    the segment set of that state: a segment whose deletion starts after planning (here
    between planning and the first remote read) is still read. The next read sees the
    change: the log start moves past a deleted first segment; a deleted middle one is a
    hole (data loss)."""
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    loads, tiered_reads = [], []
    load, read_tiered = log_reader.load_remote_metadata, log_reader.read_tiered

    def counted_load(*a, **kw):
        loads.append(1)
        return load(*a, **kw)

    def late_change(read_partition, logdirs, storage, part, plan, **kw):
        if not tiered_reads:
            assert [s.segment_id for s in plan.remote] == SEG_IDS     # what was planned
            mark(data, which)                  # the metadata changes after planning
        tiered_reads.append(plan)
        return read_tiered(read_partition, logdirs, storage, part, plan, **kw)

    monkeypatch.setattr(log_reader, "load_remote_metadata", counted_load)
    monkeypatch.setattr(log_reader, "read_tiered", late_change)
    got = read_table(data, TOPIC, isolation_level=isolation, remote_storage=remote)
    assert len(loads) == 1 and len(tiered_reads) == 1
    assert got.equals(p.expected_table(isolation))           # the planned state, whole
    monkeypatch.setattr(log_reader, "load_remote_metadata", load)
    monkeypatch.setattr(log_reader, "read_tiered", read_tiered)
    assert states(data)[SEG_IDS[which]] == "DELETE_SEGMENT_STARTED"
    if which == 0:
        again = read_table(data, TOPIC, isolation_level=isolation, remote_storage=remote)
        assert again.equals(p.expected_table(isolation, start=bases[1]))
    else:
        with pytest.raises(DataLossError, match=f"offsets {bases[1]}..{bases[2] - 1} were "
                                                "promised"):
            read_table(data, TOPIC, isolation_level=isolation, remote_storage=remote)


def test_planned_tiers_outlive_a_metadata_change(tmp_path):
    """The planning step itself: :func:`~spark_kafkalog.log.read.reader.tier_plans` is a
    value (the segment list of the state it loaded), read through
    :func:`~spark_kafkalog.log.read.tiered.read_tiered` after the metadata changed it reads
    what it planned; planning again gives the new segment set."""
    from spark_kafkalog.log.read.remote import RemoteStorage
    from spark_kafkalog.log.read.state import topic_states

    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    logdirs, storage = LogDirs(data), RemoteStorage(remote)

    def planned():
        _, parts, st = topic_states(logdirs, TOPIC, [0], timestamps=False)
        return parts[0], log_reader.tier_plans(logdirs, storage, TOPIC, parts, st)[0]

    part, before = planned()
    mark(data, 0)
    _, after = planned()
    assert [s.segment_id for s in before.remote] == SEG_IDS and before.log_start == 0
    assert [s.segment_id for s in after.remote] == SEG_IDS[1:]
    assert after.log_start == bases[1]
    rows = pa.Table.from_batches(list(log_reader.read_tiered(
        log_reader.read_partition, logdirs, storage, part, before, start_offset=0,
        end_offset=p.log_end_offset)), schema=p.expected_table().schema)
    assert rows.equals(p.expected_table())

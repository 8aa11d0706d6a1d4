"""A batch read with ``remoteStorage`` loads ``__remote_log_metadata`` once, on the
driver when it plans, and hands each task the planned segment set (``LogSlice.tier``): a
metadata change between planning and the tasks changes nothing the tasks read (they
agree with each other and with the plan), and a read planned after it sees the change.
The reader's ``partitions()`` and ``read()`` called directly (no Spark job), the slices
pickled as Spark ships them; both tiers built by hand (tests/log/tiered_builder.py)."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log.read import reader as log_reader
from spark_kafkalog.spark.datasource import KafkaLogDataSource
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.reader import KafkaLogReader
from tests.log.test_tiered import mark
from tests.log.tiered_builder import SEG_IDS, TOPIC, build, tier


def _reader(data, remote, isolation):
    return KafkaLogReader(parse_read_options({
        "path": data, "subscribe": TOPIC, "remoteStorage": remote, "includeHeaders": "true",
        "kafka.isolation.level": isolation, "maxPartitionBytes": "1k"}))


def _read(reader, parts, schema) -> pa.Table:
    shipped = [pickle.loads(pickle.dumps(s)) for s in parts]
    return pa.Table.from_batches([b for s in shipped for b in reader.read(s)], schema=schema)


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
def test_tasks_read_the_remote_segments_planning_saw(tmp_path, monkeypatch, isolation):
    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    expected = p.expected_table(isolation)
    reader = _reader(data, remote, isolation)
    parts = reader.partitions()
    remote_parts = [s for s in parts if s.tier is not None]
    assert len(remote_parts) > 1                          # several tasks on the remote tier
    plans = {id(s.tier) for s in remote_parts}
    assert len(plans) == 1                                 # one state, shared by every task
    assert [s.segment_id for s in remote_parts[0].tier.remote] == SEG_IDS
    assert parts[0].start_offset == 0

    mark(data, 0)                                          # DELETE_SEGMENT_STARTED after planning
    loads = []
    load = log_reader.load_remote_metadata
    monkeypatch.setattr(log_reader, "load_remote_metadata",
                        lambda *a, **kw: loads.append(1) or load(*a, **kw))
    got = _read(reader, parts, expected.schema)
    assert loads == []                                     # tasks never read the metadata
    assert got.equals(expected)                            # the planned segment set, whole

    again = _reader(data, remote, isolation)
    new_parts = again.partitions()
    assert len(loads) == 1                                 # a new plan loads it, once
    assert [s.segment_id for s in new_parts[0].tier.remote] == SEG_IDS[1:]
    assert new_parts[0].start_offset == bases[1]
    assert _read(again, new_parts, expected.schema).equals(
        p.expected_table(isolation, start=bases[1]))


def test_a_root_above_the_remote_tier_is_refused_at_planning(tmp_path):
    """remoteStorage set to the broker's rsm.config.dir (one level above
    kafka-tiered-storage): the batch reader's partitions() and the stream's first offsets
    refuse it as an option error naming the directory below that holds the segments,
    before any task runs (it used to fail in the tasks as data loss)."""
    p, full, bases = build(tmp_path)
    rsm = tmp_path / "rsm"
    data, _ = tier(tmp_path, p, full, bases, remote=rsm / "kafka-tiered-storage")
    wrong = (rf"remoteStorage: {rsm} holds no object of topic 'orders' .* that is not the "
             rf"root of its remote tier; did you mean remoteStorage {rsm}/kafka-tiered-storage\?")
    with pytest.raises(InvalidOptionError, match=wrong):
        _reader(data, str(rsm), "read_uncommitted").partitions()
    stream = KafkaLogDataSource({"path": data, "subscribe": TOPIC,
                                 "remoteStorage": str(rsm)}).streamReader(None)
    with pytest.raises(InvalidOptionError, match=wrong):
        stream.initialOffset()

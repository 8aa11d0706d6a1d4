"""The coordinator-record decoders (format/coordinator) against keys and values built by
hand from Kafka's schema facts (tests/format/coordinator_builders.py): every key type and
value version, tombstones, the latest state per key, as-of, record types not decoded,
and damaged bytes."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafkalog.errors import CoordinatorRecordError, KafkaLogError
from spark_kafkalog.format.coordinator import (
    GroupState,
    TransactionState,
    decode_subscription,
    offsets_text,
    transaction_log_text,
)
from tests.format import coordinator_builders as cb

T0 = 1_700_000_000_000


def records(pairs, partition=3, first_offset=10, timestamps=None):
    n = len(pairs)
    ts = timestamps or [T0 + i for i in range(n)]
    return pa.table({
        "key": pa.array([k for k, _v in pairs], pa.binary()),
        "value": pa.array([v for _k, v in pairs], pa.binary()),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
        "timestamp": pa.array([t * 1000 for t in ts], pa.timestamp("us", tz="UTC")),
    })


def pick(rows, names):
    return [{n: r[n] for n in names} for r in rows]


def test_every_offset_commit_version():
    recs = cb.commit_records()
    state = GroupState(latest=False).add_all(records([(k, v) for k, v, _ in recs])
                                             .to_batches())
    got = state.commits().to_pylist()
    names = list(recs[0][2])
    assert pick(got, names) == [e for _k, _v, e in recs]
    assert [r["record_offset"] for r in got] == list(range(10, 10 + len(recs)))
    assert {r["record_partition"] for r in got} == {3}
    assert state.other_records().num_rows == 0


def test_every_group_metadata_version_with_members():
    recs = cb.group_records()
    state = GroupState().add(records([(k, v) for k, v, _ in recs]))
    got = state.groups().to_pylist()
    names = list(recs[0][2])
    assert pick(got, names) == [e for _k, _v, e in recs]
    assert state.commits().num_rows == 0


def test_transaction_log_versions():
    recs = cb.txn_records()
    state = TransactionState().add(records([(k, v) for k, v, _ in recs]))
    names = list(recs[0][2])
    assert pick(state.transactions().to_pylist(), names) == [e for _k, _v, e in recs]


def test_latest_state_tombstones_and_as_of():
    key = cb.commit_key("g", "t", 0)
    other = cb.commit_key("g", "t", 1)
    gk = cb.group_key("g")
    member = cb._member(1, 3)
    pairs = [(key, cb.commit_value(3, 5, "", T0)),
             (other, cb.commit_value(3, 7, "", T0)),
             (gk, cb.group_value(3, "consumer", 1, "range", "m1", [member])),
             (key, cb.commit_value(3, 9, "", T0)),
             (other, None),                              # offset deleted
             (gk, None)]                                 # group deleted
    table = records(pairs)
    latest = GroupState().add(table)
    assert [(r["partition"], r["offset"]) for r in latest.commits().to_pylist()] == [(0, 9)]
    assert latest.groups().num_rows == 0
    # as of the third record: both offsets and the group still there
    before = GroupState(as_of=T0 + 2).add(table)
    assert sorted((r["partition"], r["offset"]) for r in before.commits().to_pylist()) == \
        [(0, 5), (1, 7)]
    assert [r["generation"] for r in before.groups().to_pylist()] == [1]
    every = GroupState(latest=False).add(table)
    assert [r["deleted"] for r in every.commits().to_pylist()] == [False, False, False, True]
    assert [r["value_version"] for r in every.groups().to_pylist()] == [3, None]


def test_other_record_types_are_counted_never_fail():
    pairs = [(cb.i16(3) + cb.string("kip848"), b"\x00\x01anything"),   # newer version
             (cb.i16(17) + cb.string("streams"), None),
             (cb.i16(99) + cb.string("future"), b"\x00\x00"),
             (cb.commit_key("g", "t", 0), cb.i16(9) + b"\x00" * 30),   # newer value version
             (cb.commit_key("g", "t", 0), cb.commit_value(2, 4, "", T0))]
    state = GroupState().add(records(pairs))
    other = {(r["record_type"], r["name"]): r["records"]
             for r in state.other_records().to_pylist()}
    assert other == {(3, "ConsumerGroupMetadataValue version 1 is unknown"): 1,
                     (99, "unknown type 99"): 1,
                     (1, "OffsetCommitValue version 9 is unknown"): 1}
    assert [r["offset"] for r in state.commits().to_pylist()] == [4]
    assert {(r["record_type"], r["name"]): r["records"]
            for r in state.record_types().to_pylist()} == {
        (1, "OffsetCommit"): 2, (3, "ConsumerGroupMetadata"): 1,
        (17, "StreamsGroupMetadata"): 1, (99, "unknown type 99"): 1}
    # the streams group's tombstone is a record of its own
    assert [(r["name"], r["group"], r["deleted"]) for r in
            GroupState(latest=False).add(records(pairs)).group_records().to_pylist()] == [
        ("StreamsGroupMetadata", "streams", True)]


@pytest.mark.parametrize("kind", ["commit", "group", "txn"])
def test_every_truncation_is_a_coordinator_error_naming_the_offset(kind):
    recs = {"commit": cb.commit_records, "group": cb.group_records,
            "txn": cb.txn_records}[kind]()
    cls = TransactionState if kind == "txn" else GroupState
    for key, value, _exp in recs:
        for cut in range(len(value)):
            with pytest.raises(CoordinatorRecordError) as info:
                cls().add(records([(key, value[:cut])], partition=7, first_offset=42))
            assert info.value.offset == 42
            assert "-7" in str(info.value) and "offset 42" in str(info.value)
        for cut in range(2, len(key)):
            with pytest.raises(CoordinatorRecordError):
                cls().add(records([(key[:cut], value)]))


def test_hostile_lengths_fail_cleanly():
    huge = cb.i16(1) + cb.string("p") + cb.i32(1) + cb.string("r") + cb.string("l") + \
        cb.i32(0x7FFFFFFF)
    with pytest.raises(CoordinatorRecordError, match="claims"):
        GroupState().add(records([(cb.group_key("g"), huge)]))
    bad_utf8 = cb.i16(1) + cb.i16(2) + b"\xff\xfe" + cb.string("t") + cb.i32(0)
    with pytest.raises(CoordinatorRecordError, match="UTF-8"):
        GroupState().add(records([(bad_utf8, cb.commit_value(1, 1, "", 1))]))
    with pytest.raises(CoordinatorRecordError, match="without a key"):
        GroupState().add(records([(None, b"x")]))
    assert issubclass(CoordinatorRecordError, KafkaLogError)


def test_consumer_protocol_newer_versions_read_as_v3():
    sub = cb.subscription(3, ["a"], owned=[("a", [1])], generation=4, rack="r")
    newer = cb.i16(5) + sub[2:] + b"future fields"
    assert decode_subscription(newer) == (5, decode_subscription(sub)[1])


def test_dump_text_for_tombstones_missing_keys_and_errors():
    key = cb.commit_key("g", "t", 0)
    assert offsets_text(key, None, 4) == (
        '{"type":"1","data":{"group":"g","topic":"t","partition":0}}', "<DELETE>")
    assert offsets_text(key, cb.commit_value(3, 1, "", 2)[:-1], 4)[0].startswith(
        "Error at offset 4, skipping.")
    assert offsets_text(cb.i16(99), b"", 5) == (
        "Unknown record type 99 at offset 5, skipping.", None)
    with pytest.raises(CoordinatorRecordError, match="missing key"):
        offsets_text(None, b"", 6)
    k, v = transaction_log_text(cb.txn_key("x"), None, 1)
    assert (k, v) == ('{"type":"0","data":{"transactionalId":"x"}}', "<DELETE>")

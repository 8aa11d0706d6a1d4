"""Kafka 4's group records (types 3..23 of ``__consumer_offsets``) against keys and values
built by hand from Kafka's schema facts (tests/format/group_builders.py): every type,
tagged fields present, absent and unknown, null markers, damaged bytes; the KIP-848
consumer groups folded into one row per group; every record as a row of JSON text.
(Kafka's own DumpLogSegments checks the text of the same records in tests/kafka.)"""
from __future__ import annotations

import json

import pytest

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.coordinator import (
    GROUP_RECORD_TYPES,
    GroupState,
    decode_group_key,
    decode_group_value,
    offsets_text,
)
from tests.format import coordinator_builders as cb
from tests.format import group_builders as gb
from tests.format.test_coordinator import records

RECORDS = gb.modern_records()
A = gb.uuid_text(gb.TOPIC_A)
B = gb.uuid_text(gb.TOPIC_B)


def test_every_record_type_decodes_to_its_schema_fields():
    seen = set()
    for key, value, exp_key, exp_value in RECORDS:
        rtype, k = decode_group_key(key)
        assert k == exp_key
        assert decode_group_value(rtype, value) == (0, exp_value)
        seen.add(rtype)
    assert seen == set(GROUP_RECORD_TYPES) - {0, 1, 2}


def test_dump_text_leaves_out_tagged_fields_at_their_default():
    texts = [offsets_text(k, v, 0) for k, v, _k, _v in RECORDS[:2]]
    assert texts == [
        ('{"type":"3","data":{"groupId":"cg"}}', '{"version":"0","data":{"epoch":5}}'),
        ('{"type":"3","data":{"groupId":"cg-hash"}}',
         '{"version":"0","data":{"epoch":6,"metadataHash":-1234567890123}}')]
    classic = next(v for k, v, ek, _v in RECORDS if ek.get("memberId") == "m-2"
                   and k[:2] == cb.i16(5))
    data = json.loads(offsets_text(cb.i16(5) + cb.string("cg") + cb.string("m-2"), classic,
                                   0)[1])["data"]
    assert data["classicMemberMetadata"]["supportedProtocols"][0] == {
        "name": "range", "metadata": "AANtZXRh"}                  # bytes: base64
    assert offsets_text(RECORDS[0][0], None, 3) == (
        '{"type":"3","data":{"groupId":"cg"}}', "<DELETE>")


def test_unknown_tags_are_skipped_known_ones_must_fill_their_size():
    value = gb.v0(cb.i32(5) + cb.tagged({0: cb.i64(9), 7: b"future"}))
    assert decode_group_value(3, value) == (0, {"epoch": 5, "metadataHash": 9})
    with pytest.raises(CoordinatorRecordError, match=r"metadataHash \(tag 0\) holds 9"):
        decode_group_value(3, gb.v0(cb.i32(5) + cb.tagged({0: cb.i64(9) + b"x"})))
    with pytest.raises(CoordinatorRecordError, match="metadataHash"):
        decode_group_value(3, gb.v0(cb.i32(5) + cb.tagged({0: cb.i32(9)})))


@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_every_truncation_names_the_record_and_offset(index):
    key, value, _k, _v = RECORDS[index]
    name = GROUP_RECORD_TYPES[int.from_bytes(key[:2], "big")]
    for cut in range(len(value)):
        with pytest.raises(CoordinatorRecordError) as info:
            GroupState().add(records([(key, value[:cut])], partition=7, first_offset=42))
        assert info.value.offset == 42
        text = str(info.value)
        assert "__consumer_offsets-7" in text and "offset 42" in text
        if cut >= 2:
            assert f"{name}Value v0" in text
    for cut in range(2, len(key)):
        with pytest.raises(CoordinatorRecordError, match=f"{name}Key"):
            GroupState().add(records([(key[:cut], value)]))


def test_hostile_counts_sizes_and_text():
    with pytest.raises(CoordinatorRecordError, match="topicPartitions claims"):
        decode_group_value(7, gb.v0(cb.uvarint(1 << 28)))
    with pytest.raises(CoordinatorRecordError, match="tag 0 needs 100 bytes"):
        decode_group_value(6, gb.v0(cb.i32(1) + cb.uvarint(1) + cb.uvarint(0)
                                    + cb.uvarint(100) + b"x"))
    with pytest.raises(CoordinatorRecordError, match="clientId is not valid UTF-8"):
        decode_group_value(10, gb.v0(gb.cstring(None) + cb.uvarint(3) + b"\xff\xfe"))
    with pytest.raises(CoordinatorRecordError, match="subscribedTopicNames.1. has length -1"):
        decode_group_value(10, gb.v0(gb.cstring(None) + gb.cstring("c") + gb.cstring("h")
                                     + cb.uvarint(3) + gb.cstring("t") + cb.uvarint(0)))
    with pytest.raises(CoordinatorRecordError, match="varint"):
        decode_group_value(16, gb.v0(b"\xff" * 6))


def rec(rtype, group="cg", **key):
    for k, v, ek, _v in RECORDS:
        if k[:2] == cb.i16(rtype) and ek == {"groupId": group, **key}:
            return k, v
    raise KeyError((rtype, group, key))


def test_consumer_groups_fold_members_assignments_and_tombstones():
    m1, m2 = {"memberId": "m-1"}, {"memberId": "m-2"}
    pairs = [rec(4), rec(5, **m1), rec(3), rec(7, **m1), rec(6), rec(8, **m1),
             rec(5, **m2), rec(8, **m2), rec(16, regularExpression="ord.*"),
             (rec(8, **m2)[0], None), (rec(5, **m2)[0], None),   # m-2 left
             rec(11, "sg"),                                      # a share group
             (rec(3)[0], gb.v0(cb.i32(7) + cb.tagged({0: cb.i64(3)})))]
    table = records(pairs, partition=2, first_offset=100)
    state = GroupState().add(table)
    [group] = state.consumer_groups().to_pylist()
    assert {k: group[k] for k in ("group", "group_epoch", "metadata_hash",
                                  "assignment_epoch", "assignment_timestamp",
                                  "record_partition", "record_offset")} == {
        "group": "cg", "group_epoch": 7, "metadata_hash": 3, "assignment_epoch": 5,
        "assignment_timestamp": 0, "record_partition": 2, "record_offset": 112}
    assert group["subscribed_regexes"] == [{
        "regular_expression": "ord.*", "topics": ["orders", "orders2"], "version": 7,
        "timestamp": 1_700_000_000_999}]
    [m] = group["members"]
    assert m == {
        "member_id": "m-1", "instance_id": None, "rack_id": None, "client_id": "client-1",
        "client_host": "/127.0.0.1", "subscribed_topic_names": ["orders", "ünï"],
        "subscribed_topic_regex": None, "rebalance_timeout_ms": 300000,
        "server_assignor": "uniform", "classic_protocols": None,
        "classic_session_timeout_ms": None, "member_epoch": 5, "previous_member_epoch": 4,
        "state": "STABLE",
        "assigned_partitions": [{"topic_id": A, "topic": "orders", "partitions": [0, 1]}],
        "partitions_pending_revocation": [{"topic_id": B, "topic": None,
                                           "partitions": [5]}],
        "target_partitions": [{"topic_id": A, "topic": "orders", "partitions": [0, 1]},
                              {"topic_id": B, "topic": None, "partitions": []}]}
    # as of the record that added m-2 (offset 106 at T0 + 6): both members, m-2 classic
    before = GroupState(as_of=1_700_000_000_006).add(table).consumer_groups().to_pylist()
    m2row = before[0]["members"][1]
    assert (m2row["member_id"], m2row["classic_protocols"], m2row["member_epoch"],
            before[0]["group_epoch"]) == ("m-2", ["range", "roundrobin"], None, 5)
    # every record: 13 rows; latest: one per live key (m-2's two keys deleted)
    every = GroupState(latest=False).add(table).group_records().to_pylist()
    assert [r["record_offset"] for r in every] == list(range(100, 113))
    assert [r["deleted"] for r in every].count(True) == 2
    latest = state.group_records().to_pylist()
    assert len(latest) == 9 - 2 + 1
    assert latest[-1]["name"] == "ConsumerGroupMetadata"
    assert json.loads(latest[-1]["value"]) == {"epoch": 7, "metadataHash": 3}
    assert json.loads(latest[-1]["key"]) == {"groupId": "cg"}
    share = next(r for r in latest if r["group"] == "sg")
    assert (share["name"], share["member_id"], share["key_version"]) == (
        "ShareGroupMetadata", None, 11)
    assert state.commits().num_rows == state.groups().num_rows == 0
    assert state.other_records().num_rows == 0


def test_a_group_whose_records_are_all_deleted_has_no_row():
    pairs = [rec(3), rec(5, memberId="m-1"), (rec(5, memberId="m-1")[0], None),
             (rec(3)[0], None)]
    state = GroupState().add(records(pairs))
    assert state.consumer_groups().num_rows == 0
    assert state.group_records().num_rows == 0


def test_damaged_bytes_decode_or_raise_a_coordinator_error():
    """Every byte of every value replaced by a few hostile ones: the decoder returns
    something or raises CoordinatorRecordError, nothing else."""
    for key, value, _k, _v in RECORDS:
        rtype = int.from_bytes(key[:2], "big")
        for pos in range(2, len(value)):
            for b in (0x00, 0x7F, 0x80, 0xFF):
                bad = value[:pos] + bytes([b]) + value[pos + 1:]
                try:
                    decode_group_value(rtype, bad)
                except CoordinatorRecordError:
                    pass

"""``__share_group_state`` records (the share coordinator's ShareSnapshot and ShareUpdate,
Kafka 4.4's ``share-coordinator`` ``common/message/*.json``) and Kafka's dump text of them.

A key is an ``int16`` record type (0 ShareSnapshot, 1 ShareUpdate), then, non-flexible,
``groupId string, topicId uuid, partition int32``. A value is an ``int16`` version (0),
then, flexible::

    ShareSnapshotValue => snapshotEpoch int32, stateEpoch int32, leaderEpoch int32,
                          startOffset int64, [tag 0] deliveryCompleteCount int32 (-1),
                          createTimestamp int64, writeTimestamp int64, stateBatches
    ShareUpdateValue   => snapshotEpoch int32, leaderEpoch int32, startOffset int64,
                          [tag 0] deliveryCompleteCount int32 (-1), stateBatches
    stateBatches       => [firstOffset int64, lastOffset int64, deliveryState int8,
                           deliveryCount int16]
"""
from __future__ import annotations

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.coordinator.protocol import Reader, uuid_text
from spark_kafkalog.format.coordinator.schemas import F, json_fields, read_struct
from spark_kafkalog.format.coordinator.text import coordinator_record_text

__all__ = ["SHARE_RECORDS", "decode_share_key", "decode_share_value", "share_group_state_text"]

_BATCHES = F("stateBatches", "[]struct", fields=(
    F("firstOffset", "int64"), F("lastOffset", "int64"), F("deliveryState", "int8"),
    F("deliveryCount", "int16")))
_COMPLETE = F("deliveryCompleteCount", "int32", tag=0, default=-1)

#: record type -> (name, value version -> fields)
SHARE_RECORDS = {
    0: ("ShareSnapshot", {0: (F("snapshotEpoch", "int32"), F("stateEpoch", "int32"),
                              F("leaderEpoch", "int32"), F("startOffset", "int64"), _COMPLETE,
                              F("createTimestamp", "int64"), F("writeTimestamp", "int64"),
                              _BATCHES)}),
    1: ("ShareUpdate", {0: (F("snapshotEpoch", "int32"), F("leaderEpoch", "int32"),
                            F("startOffset", "int64"), _COMPLETE, _BATCHES)}),
}


def decode_share_key(key: bytes) -> tuple[int, dict | None]:
    """``(record type, fields)``; fields None for a type this build does not know."""
    r = Reader(key, "__share_group_state key")
    rtype = r.int16("type")
    if rtype not in SHARE_RECORDS:
        return rtype, None
    r.what = f"{SHARE_RECORDS[rtype][0]}Key"
    return rtype, {"groupId": r.string("groupId"), "topicId": uuid_text(r.uuid("topicId")),
                   "partition": r.int32("partition")}


def decode_share_value(rtype: int, value: bytes) -> tuple[int, dict | None]:
    """``(version, fields)`` of a value of type ``rtype``; fields None for an unknown
    version."""
    name, versions = SHARE_RECORDS[rtype]
    r = Reader(value, f"{name}Value")
    version = r.int16("version")
    fields = versions.get(version)
    if fields is None:
        return version, None
    return version, read_struct(r, fields, "", True)


def _share_value_json(rtype: int, value: bytes) -> tuple[int, dict]:
    version, vdata = decode_share_value(rtype, value)
    if vdata is None:
        raise CoordinatorRecordError(f"Unknown value version {version}")
    return version, json_fields(SHARE_RECORDS[rtype][1][version], vdata)


def share_group_state_text(key: bytes | None, value: bytes | None, offset: int
                           ) -> tuple[str | None, str | None]:
    """``(key text, payload text)`` as Kafka's ``--share-group-state-decoder`` prints a
    record at ``offset``."""
    return coordinator_record_text("share group state", key, value, offset,
                                   decode_share_key, _share_value_json)

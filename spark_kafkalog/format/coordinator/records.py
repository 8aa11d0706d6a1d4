"""Keys and values of the coordinators' internal topics, decoded into Kafka's own field
names (camelCase, schema order, only the fields the version has).

A record key starts with ``int16`` = the record type (Kafka calls it the key version);
a value starts with ``int16`` = the value's schema version; a null value is a tombstone.

``__consumer_offsets`` (group coordinator)::

    type 0 LegacyOffsetCommitKey, 1 OffsetCommitKey =>
      group string, topic string, partition int32
    OffsetCommitValue v0..v4 (v4 flexible) =>
      offset int64
      leaderEpoch int32          v3+
      metadata string
      commitTimestamp int64
      expireTimestamp int64      v1 only
      [tag 0 topicId uuid]       v4+ tagged field
    type 2 GroupMetadataKey => group string
    GroupMetadataValue v0..v4 (v4 flexible) =>
      protocolType string, generation int32, protocol nullable string,
      leader nullable string, currentStateTimestamp int64 (v2+),
      members [memberId string, groupInstanceId nullable string (v3+), clientId string,
               clientHost string, rebalanceTimeout int32 (v1+), sessionTimeout int32,
               subscription bytes, assignment bytes]
    types 3..23: KIP-848 consumer, share and streams group records, read from the
    field tables of :mod:`.schemas` (keys: groupId [, memberId | regularExpression];
    values: version 0, flexible)

Members of a group whose protocolType is ``consumer`` carry the consumer protocol::

    ConsumerProtocolSubscription (int16 version, then, read as at most v3) =>
      topics [string], userData nullable bytes,
      ownedPartitions [topic string, partitions [int32]] v1+, generationId int32 v2+,
      rackId nullable string v3+
    ConsumerProtocolAssignment (int16 version, read as at most v3) =>
      assignedPartitions [topic string, partitions [int32]], userData nullable bytes

``__transaction_state`` (transaction coordinator)::

    type 0 TransactionLogKey => transactionalId string
    TransactionLogValue v0..v1 (v1 flexible) =>
      producerId int64, producerEpoch int16, transactionTimeoutMs int32,
      transactionStatus int8, transactionPartitions nullable [topic string,
      partitionIds [int32]], transactionLastUpdateTimestampMs int64,
      transactionStartTimestampMs int64,
      v1 tagged: 0 previousProducerId int64, 1 nextProducerId int64,
                 2 clientTransactionVersion int16, 3 nextProducerEpoch int16

Trailing bytes after the last field are ignored, as Kafka's readers do.
"""
from __future__ import annotations

import struct

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.coordinator import schemas
from spark_kafkalog.format.coordinator.protocol import Reader, uuid_text

__all__ = [
    "GROUP_RECORD_TYPES", "TRANSACTION_STATES", "decode_assignment", "decode_group_key",
    "decode_group_value", "decode_subscription", "decode_txn_key", "decode_txn_value",
    "LEGACY_OFFSET_COMMIT", "OFFSET_COMMIT", "GROUP_METADATA", "TRANSACTION_LOG",
    "OFFSET_COMMIT_VALUE_VERSIONS", "GROUP_METADATA_VALUE_VERSIONS",
    "TXN_VALUE_VERSIONS", "UnknownVersion",
]

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
TRANSACTION_LOG = 0

#: record type (key version) -> name, as Kafka 4's CoordinatorRecordType has them
GROUP_RECORD_TYPES = {
    0: "LegacyOffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata",
    3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
    10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression", 17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata", 20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember", 22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
OFFSET_COMMIT_VALUE_VERSIONS = range(0, 5)
GROUP_METADATA_VALUE_VERSIONS = range(0, 5)
TXN_VALUE_VERSIONS = range(0, 2)
#: the consumer protocol's highest known version; newer ones are read as this one
_CONSUMER_PROTOCOL_MAX = 3

#: TransactionLogValue.transactionStatus -> Kafka's TransactionState name
TRANSACTION_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                      4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead",
                      7: "PrepareEpochFence"}

_OFFSET_COMMIT_FLEXIBLE = 4
_GROUP_METADATA_FLEXIBLE = 4
_TXN_FLEXIBLE = 1
_TAG_TOPIC_ID = 0
_I16 = struct.Struct(">h")


class UnknownVersion(CoordinatorRecordError):
    """A record type or value version this build has no schema for (newer Kafka)."""


def _version(data: bytes, what: str) -> int:
    if len(data) < _I16.size:
        raise CoordinatorRecordError(f"{what} of {len(data)} bytes has no version")
    return _I16.unpack_from(data, 0)[0]


# ---- __consumer_offsets ---------------------------------------------------------------------

def decode_group_key(key: bytes) -> tuple[int, dict | None]:
    """``(record type, fields)`` of a ``__consumer_offsets`` key; fields is None for a
    record type this build has no schema for (newer Kafka)."""
    rtype = _version(key, "record key")
    if rtype in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        r = Reader(key, f"{GROUP_RECORD_TYPES[rtype]}Key", 2)
        return rtype, {"group": r.string("group"), "topic": r.string("topic"),
                       "partition": r.int32("partition")}
    if rtype == GROUP_METADATA:
        r = Reader(key, "GroupMetadataKey", 2)
        return rtype, {"group": r.string("group")}
    return rtype, schemas.decode_key(rtype, key)


def decode_group_value(rtype: int, value: bytes) -> tuple[int, dict]:
    """``(value version, fields)`` of the value of a record of type ``rtype``. Raises
    :class:`UnknownVersion` for a type or version this build has no schema for."""
    if rtype in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        version = _version(value, "OffsetCommitValue")
        if version not in OFFSET_COMMIT_VALUE_VERSIONS:
            raise UnknownVersion(f"OffsetCommitValue version {version} is unknown")
        return version, _offset_commit_value(Reader(value, f"OffsetCommitValue v{version}",
                                                    2), version)
    if rtype == GROUP_METADATA:
        version = _version(value, "GroupMetadataValue")
        if version not in GROUP_METADATA_VALUE_VERSIONS:
            raise UnknownVersion(f"GroupMetadataValue version {version} is unknown")
        return version, _group_metadata_value(Reader(value, f"GroupMetadataValue v{version}",
                                                     2), version)
    schema = schemas.SCHEMAS.get(rtype)
    if schema is None:
        raise UnknownVersion(f"record type {rtype} is not decoded")
    version = _version(value, f"{schema.name}Value")
    fields = schemas.decode_value(rtype, version, value)
    if fields is None:
        raise UnknownVersion(f"{schema.name}Value version {version} is unknown")
    return version, fields


_I32_I16 = struct.Struct(">ih")
_I64 = struct.Struct(">q")
_I64_I16 = struct.Struct(">qh")


def _offset_commit_classic(data: bytes, v: int) -> dict | None:
    """The non-flexible OffsetCommitValue (v0..v3, nearly every commit ever written)
    without a Reader; None when anything is off (the Reader then says what)."""
    try:
        if v >= 3:
            offset = _I64.unpack_from(data, 2)[0]
            epoch, n = _I32_I16.unpack_from(data, 10)
            pos = 16
        else:
            offset, n = _I64_I16.unpack_from(data, 2)
            epoch, pos = -1, 12
        if n < 0 or pos + n + 8 > len(data):
            return None
        meta = data[pos:pos + n].decode("utf-8")
        pos += n
        out = {"offset": offset}
        if v >= 3:
            out["leaderEpoch"] = epoch
        out["metadata"] = meta
        out["commitTimestamp"] = _I64.unpack_from(data, pos)[0]
        if v == 1:
            if pos + 16 > len(data):
                return None
            out["expireTimestamp"] = _I64.unpack_from(data, pos + 8)[0]
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def _offset_commit_value(r: Reader, v: int) -> dict:
    if v < _OFFSET_COMMIT_FLEXIBLE:
        fast = _offset_commit_classic(r.data, v)
        if fast is not None:
            return fast
    flex = v >= _OFFSET_COMMIT_FLEXIBLE
    out = {"offset": r.int64("offset")}
    if v >= 3:
        out["leaderEpoch"] = r.int32("leaderEpoch")
    out["metadata"] = r.string("metadata", flexible=flex)
    out["commitTimestamp"] = r.int64("commitTimestamp")
    if v == 1:
        out["expireTimestamp"] = r.int64("expireTimestamp")
    if flex:
        tags = r.tagged_fields()
        raw = tags.get(_TAG_TOPIC_ID)
        if raw is not None:
            if len(raw) != 16:
                raise r.fail(f"topicId tag holds {len(raw)} bytes, not 16")
            out["topicId"] = uuid_text(raw)
    return out


def _group_metadata_value(r: Reader, v: int) -> dict:
    flex = v >= _GROUP_METADATA_FLEXIBLE
    out = {"protocolType": r.string("protocolType", flexible=flex),
           "generation": r.int32("generation"),
           "protocol": r.string("protocol", flexible=flex, nullable=True),
           "leader": r.string("leader", flexible=flex, nullable=True)}
    if v >= 2:
        out["currentStateTimestamp"] = r.int64("currentStateTimestamp")
    members = []
    for _ in range(r.count("members", flexible=flex)):
        m = {"memberId": r.string("memberId", flexible=flex)}
        if v >= 3:
            m["groupInstanceId"] = r.string("groupInstanceId", flexible=flex, nullable=True)
        m["clientId"] = r.string("clientId", flexible=flex)
        m["clientHost"] = r.string("clientHost", flexible=flex)
        if v >= 1:
            m["rebalanceTimeout"] = r.int32("rebalanceTimeout")
        m["sessionTimeout"] = r.int32("sessionTimeout")
        m["subscription"] = r.bytes_("subscription", flexible=flex)
        m["assignment"] = r.bytes_("assignment", flexible=flex)
        if flex:
            r.tagged_fields("member tagged fields")
        members.append(m)
    out["members"] = members
    if flex:
        r.tagged_fields()
    return out


def _topic_partitions(r: Reader, name: str, partitions_name: str = "partitions") -> list:
    return [{"topic": r.string("topic"), partitions_name: r.int32_array(partitions_name)}
            for _ in range(r.count(name))]


def decode_subscription(data: bytes) -> tuple[int, dict]:
    """``(version, fields)`` of a consumer-protocol subscription (Kafka's
    ConsumerProtocolSubscription): a version above 3 is read as 3, as Kafka's consumer
    does. Raises CoordinatorRecordError on bytes that do not decode."""
    version = _version(data, "ConsumerProtocolSubscription")
    if version < 0:
        raise CoordinatorRecordError(f"ConsumerProtocolSubscription version {version}")
    v = min(version, _CONSUMER_PROTOCOL_MAX)
    r = Reader(data, f"ConsumerProtocolSubscription v{version}", 2)
    out = {"topics": [r.string("topics") for _ in range(r.count("topics"))],
           "userData": r.bytes_("userData", nullable=True)}
    if v >= 1:
        out["ownedPartitions"] = _topic_partitions(r, "ownedPartitions")
    if v >= 2:
        out["generationId"] = r.int32("generationId")
    if v >= 3:
        out["rackId"] = r.string("rackId", nullable=True)
    return version, out


def decode_assignment(data: bytes) -> tuple[int, dict]:
    """``(version, fields)`` of a consumer-protocol assignment (Kafka's
    ConsumerProtocolAssignment)."""
    version = _version(data, "ConsumerProtocolAssignment")
    if version < 0:
        raise CoordinatorRecordError(f"ConsumerProtocolAssignment version {version}")
    r = Reader(data, f"ConsumerProtocolAssignment v{version}", 2)
    return version, {"assignedPartitions": _topic_partitions(r, "assignedPartitions"),
                     "userData": r.bytes_("userData", nullable=True)}


# ---- __transaction_state --------------------------------------------------------------------

def decode_txn_key(key: bytes) -> tuple[int, dict | None]:
    """``(record type, fields)`` of a ``__transaction_state`` key (fields None for a type
    other than 0)."""
    rtype = _version(key, "record key")
    if rtype != TRANSACTION_LOG:
        return rtype, None
    return rtype, {"transactionalId": Reader(key, "TransactionLogKey", 2).string(
        "transactionalId")}


def decode_txn_value(value: bytes) -> tuple[int, dict]:
    """``(value version, fields)`` of a TransactionLogValue."""
    version = _version(value, "TransactionLogValue")
    if version not in TXN_VALUE_VERSIONS:
        raise UnknownVersion(f"TransactionLogValue version {version} is unknown")
    flex = version >= _TXN_FLEXIBLE
    r = Reader(value, f"TransactionLogValue v{version}", 2)
    out = {"producerId": r.int64("producerId")}
    tagged = {"previousProducerId": -1, "nextProducerId": -1, "nextProducerEpoch": -1}
    out["producerEpoch"] = r.int16("producerEpoch")
    out["transactionTimeoutMs"] = r.int32("transactionTimeoutMs")
    out["transactionStatus"] = r.int8("transactionStatus")
    n = r.count("transactionPartitions", flexible=flex, nullable=True)
    parts = None
    if n is not None:
        parts = []
        for _ in range(n):
            parts.append({"topic": r.string("topic", flexible=flex),
                          "partitionIds": r.int32_array("partitionIds", flexible=flex)})
            if flex:
                r.tagged_fields("partition tagged fields")
    out["transactionPartitions"] = parts
    out["transactionLastUpdateTimestampMs"] = r.int64("transactionLastUpdateTimestampMs")
    out["transactionStartTimestampMs"] = r.int64("transactionStartTimestampMs")
    client_version = 0
    if flex:
        for tag, raw in r.tagged_fields().items():
            fmt = {0: ">q", 1: ">q", 2: ">h", 3: ">h"}.get(tag)
            if fmt is None:
                continue                    # a tag newer than this build: ignored
            if len(raw) != struct.calcsize(fmt):
                raise r.fail(f"tag {tag} holds {len(raw)} bytes")
            (val,) = struct.unpack(fmt, raw)
            if tag == 2:
                client_version = val
            else:
                tagged[("previousProducerId", "nextProducerId", None,
                        "nextProducerEpoch")[tag]] = val
    out.update(tagged)
    out["clientTransactionVersion"] = client_version
    return version, out

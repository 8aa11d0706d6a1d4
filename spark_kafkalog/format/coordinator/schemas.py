"""Kafka 4's group records in ``__consumer_offsets`` (record types 3 and up: KIP-848
consumer groups, share groups, streams groups) as tables of fields, and one reader that
walks those tables with :class:`~.protocol.Reader`.

The tables restate Kafka's message JSON schemas (group-coordinator
``common/message/<Name>Key.json`` / ``<Name>Value.json``, as Kafka 4.3 has them): every
key is non-flexible (``int16`` type, then strings); every value exists in version 0 only,
flexible (compact strings/arrays, tagged fields at the end of every struct). A field::

    F(name, type, nullable=False, tag=None, default=None, fields=())

``name`` is Kafka's JSON name (camelCase, as its JSON converters print), ``type`` one of
bool int8 int16 int32 int64 uint16 uuid string bytes struct, with ``[]`` in front for an
array; ``fields`` the struct's (or array element's) fields; ``tag`` makes it a tagged
field, whose ``default`` it takes when absent (``()``: an empty list, ``{}``: the struct
with its fields at their defaults; Kafka 4.3 reads an absent nullable ``[]int32`` or
struct tag so, not as null, and its JSON converters print an explicit null). Tagged fields stay in declaration order in
the decoded dict (Kafka's JSON converters print them there) but are read from the tagged
section after the struct's other fields. A nullable tagged struct holds a varint marker
(0: null) before its fields; an untagged nullable struct an ``int8`` (-1: null).
Tags this build does not know are skipped, as Kafka's readers do.
"""
from __future__ import annotations

from typing import NamedTuple

from spark_kafkalog.format.coordinator.protocol import Reader, uuid_text

__all__ = ["F", "GroupRecordSchema", "SCHEMAS", "MEMBER_STATES", "decode_key",
           "decode_value", "json_data", "json_fields", "read_struct"]


class F(NamedTuple):
    name: str
    type: str
    nullable: bool = False
    tag: int | None = None
    default: object = None
    fields: tuple = ()


class GroupRecordSchema(NamedTuple):
    name: str                     # e.g. "ConsumerGroupMetadata" (+ "Key" / "Value")
    key: tuple                    # key field names (strings, non-flexible)
    values: dict                  # value version -> fields
    flexible_from: int = 0        # value versions >= this are flexible


#: ConsumerGroupCurrentMemberAssignmentValue.state (Kafka's MemberState)
MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS",
                 127: "UNKNOWN"}

_GROUP = ("groupId",)
_MEMBER = ("groupId", "memberId")
_KV = (F("key", "string"), F("value", "string"))

# ---- KIP-848 consumer groups ----------------------------------------------------------------

_CONSUMER_TOPIC_PARTITIONS = (
    F("topicId", "uuid"), F("partitions", "[]int32"),
    F("assignmentEpochs", "[]int32", nullable=True, tag=0, default=()))

_CONSUMER = {
    3: GroupRecordSchema("ConsumerGroupMetadata", _GROUP, {0: (
        F("epoch", "int32"),
        F("metadataHash", "int64", tag=0, default=0))}),
    4: GroupRecordSchema("ConsumerGroupPartitionMetadata", _GROUP, {0: (
        F("topics", "[]struct", fields=(
            F("topicId", "uuid"), F("topicName", "string"), F("numPartitions", "int32"),
            F("partitionMetadata", "[]struct", fields=(
                F("partition", "int32"), F("racks", "[]string"))))),)}),
    5: GroupRecordSchema("ConsumerGroupMemberMetadata", _MEMBER, {0: (
        F("instanceId", "string", nullable=True),
        F("rackId", "string", nullable=True),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("subscribedTopicNames", "[]string"),
        F("subscribedTopicRegex", "string", nullable=True),
        F("rebalanceTimeoutMs", "int32"),
        F("serverAssignor", "string", nullable=True),
        F("classicMemberMetadata", "struct", nullable=True, tag=0, default={}, fields=(
            F("sessionTimeoutMs", "int32"),
            F("supportedProtocols", "[]struct", fields=(
                F("name", "string"), F("metadata", "bytes"))))))}),
    6: GroupRecordSchema("ConsumerGroupTargetAssignmentMetadata", _GROUP, {0: (
        F("assignmentEpoch", "int32"),
        F("assignmentTimestamp", "int64", tag=0, default=0))}),
    7: GroupRecordSchema("ConsumerGroupTargetAssignmentMember", _MEMBER, {0: (
        F("topicPartitions", "[]struct", fields=(
            F("topicId", "uuid"), F("partitions", "[]int32"))),)}),
    8: GroupRecordSchema("ConsumerGroupCurrentMemberAssignment", _MEMBER, {0: (
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F("assignedPartitions", "[]struct", fields=_CONSUMER_TOPIC_PARTITIONS),
        F("partitionsPendingRevocation", "[]struct", fields=_CONSUMER_TOPIC_PARTITIONS))}),
    16: GroupRecordSchema("ConsumerGroupRegularExpression",
                          ("groupId", "regularExpression"), {0: (
                              F("topics", "[]string"),
                              F("version", "int64"),
                              F("timestamp", "int64"))}),
}

# ---- share groups ---------------------------------------------------------------------------

_SHARE_TOPIC_PARTITIONS = (F("topicId", "uuid"), F("partitions", "[]int32"))

_SHARE = {
    10: GroupRecordSchema("ShareGroupMemberMetadata", _MEMBER, {0: (
        F("rackId", "string", nullable=True),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("subscribedTopicNames", "[]string"))}),
    11: GroupRecordSchema("ShareGroupMetadata", _GROUP, {0: (
        F("epoch", "int32"), F("metadataHash", "int64"))}),
    12: GroupRecordSchema("ShareGroupTargetAssignmentMetadata", _GROUP, {0: (
        F("assignmentEpoch", "int32"),
        F("assignmentTimestamp", "int64", tag=0, default=0))}),
    13: GroupRecordSchema("ShareGroupTargetAssignmentMember", _MEMBER, {0: (
        F("topicPartitions", "[]struct", fields=_SHARE_TOPIC_PARTITIONS),)}),
    14: GroupRecordSchema("ShareGroupCurrentMemberAssignment", _MEMBER, {0: (
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F("assignedPartitions", "[]struct", fields=_SHARE_TOPIC_PARTITIONS))}),
    15: GroupRecordSchema("ShareGroupStatePartitionMetadata", _GROUP, {0: (
        F("initializingTopics", "[]struct", fields=(
            F("topicId", "uuid"), F("topicName", "string"), F("partitions", "[]int32"))),
        F("initializedTopics", "[]struct", fields=(
            F("topicId", "uuid"), F("topicName", "string"), F("partitions", "[]int32"))),
        F("deletingTopics", "[]struct", fields=(
            F("topicId", "uuid"), F("topicName", "string"))))}),
}

# ---- streams groups -------------------------------------------------------------------------
# (fields that match a consumer group record's are restated: each is its own Kafka schema)

_TASK_IDS = (F("subtopologyId", "string"), F("partitions", "[]int32"))
_TASK_IDS_EPOCHS = _TASK_IDS + (F("assignmentEpochs", "[]int32", nullable=True, tag=0,
                                   default=()),)
_TOPIC_INFO = (F("name", "string"), F("partitions", "int32"),
               F("replicationFactor", "int16"), F("topicConfigs", "[]struct", fields=_KV))

_STREAMS = {
    17: GroupRecordSchema("StreamsGroupMetadata", _GROUP, {0: (
        F("epoch", "int32"),
        F("metadataHash", "int64"),
        F("validatedTopologyEpoch", "int32", tag=0, default=-1),
        F("lastAssignmentConfigs", "[]struct", nullable=True, tag=1, default=(),
          fields=_KV))}),
    19: GroupRecordSchema("StreamsGroupMemberMetadata", _MEMBER, {0: (
        F("instanceId", "string", nullable=True),
        F("rackId", "string", nullable=True),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeoutMs", "int32"),
        F("topologyEpoch", "int32"),
        F("processId", "string"),
        F("userEndpoint", "struct", nullable=True,
          fields=(F("host", "string"), F("port", "uint16"))),
        F("clientTags", "[]struct", fields=_KV))}),
    20: GroupRecordSchema("StreamsGroupTargetAssignmentMetadata", _GROUP, {0: (
        F("assignmentEpoch", "int32"),
        F("assignmentTimestamp", "int64", tag=0, default=0))}),
    21: GroupRecordSchema("StreamsGroupTargetAssignmentMember", _MEMBER, {0: (
        F("activeTasks", "[]struct", fields=_TASK_IDS),
        F("standbyTasks", "[]struct", fields=_TASK_IDS),
        F("warmupTasks", "[]struct", fields=_TASK_IDS))}),
    22: GroupRecordSchema("StreamsGroupCurrentMemberAssignment", _MEMBER, {0: (
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F("activeTasks", "[]struct", fields=_TASK_IDS_EPOCHS),
        F("standbyTasks", "[]struct", fields=_TASK_IDS_EPOCHS),
        F("warmupTasks", "[]struct", fields=_TASK_IDS_EPOCHS),
        F("activeTasksPendingRevocation", "[]struct", fields=_TASK_IDS_EPOCHS),
        F("standbyTasksPendingRevocation", "[]struct", fields=_TASK_IDS_EPOCHS),
        F("warmupTasksPendingRevocation", "[]struct", fields=_TASK_IDS_EPOCHS))}),
    23: GroupRecordSchema("StreamsGroupTopology", _GROUP, {0: (
        F("epoch", "int32"),
        F("subtopologies", "[]struct", fields=(
            F("subtopologyId", "string"),
            F("sourceTopics", "[]string"),
            F("sourceTopicRegex", "[]string"),
            F("stateChangelogTopics", "[]struct", fields=_TOPIC_INFO),
            F("repartitionSinkTopics", "[]string"),
            F("repartitionSourceTopics", "[]struct", fields=_TOPIC_INFO),
            F("copartitionGroups", "[]struct", fields=(
                F("sourceTopics", "[]int16"),
                F("sourceTopicRegex", "[]int16"),
                F("repartitionSourceTopics", "[]int16"))))))}),
}

#: record type -> schema, for every type of Kafka 4 past the classic ones (0..2)
SCHEMAS: dict[int, GroupRecordSchema] = {**_CONSUMER, **_SHARE, **_STREAMS}

# ---- the reader -----------------------------------------------------------------------------

_SCALARS = {"bool": Reader.boolean, "int8": Reader.int8, "int16": Reader.int16, "int32": Reader.int32,
            "int64": Reader.int64, "uint16": Reader.uint16}


def _scalar(r: Reader, kind: str, path: str, flex: bool, nullable: bool):
    read = _SCALARS.get(kind)
    if read is not None:
        return read(r, path)
    if kind == "string":
        return r.string(path, flexible=flex, nullable=nullable)
    if kind == "uuid":
        return uuid_text(r.uuid(path))
    if kind == "bytes":
        return r.bytes_(path, flexible=flex, nullable=nullable)
    raise ValueError(f"no reader for field type {kind!r}")     # a bug in the tables


def _field(r: Reader, fd: F, path: str, flex: bool):
    if fd.type.startswith("[]"):
        n = r.count(path, flexible=flex, nullable=fd.nullable)
        if n is None:
            return None
        kind = fd.type[2:]
        if kind == "struct":
            return [read_struct(r, fd.fields, f"{path}[{i}]", flex) for i in range(n)]
        return [_scalar(r, kind, f"{path}[{i}]", flex, False) for i in range(n)]
    if fd.type == "struct":
        if fd.nullable:
            if fd.tag is not None:
                if r.uvarint(f"{path} (null marker)") == 0:
                    return None
            elif r.int8(f"{path} (null marker)") < 0:
                return None
        return read_struct(r, fd.fields, path, flex)
    return _scalar(r, fd.type, path, flex, fd.nullable)


_ZERO = {"bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "string": "",
         "bytes": b"", "uuid": uuid_text(bytes(16))}


def _absent(fd: F):
    """A tagged field's value when its tag is absent: ``()`` is an empty list, ``{}`` the
    struct with every field at its default (Kafka's ``new Struct()``)."""
    if fd.default == ():
        return []
    if isinstance(fd.default, dict):
        return {f.name: _absent(f) if f.tag is not None else
                [] if f.type.startswith("[]") else
                _absent(f._replace(default={})) if f.type == "struct" else _ZERO[f.type]
                for f in fd.fields}
    return fd.default


def read_struct(r: Reader, fields: tuple, path: str = "", flex: bool = True) -> dict:
    """The fields of one struct at ``r``'s position, then (flexible) its tagged fields."""
    out = {}
    tagged = {}
    prefix = f"{path}." if path else ""
    for fd in fields:
        if fd.tag is None:
            out[fd.name] = _field(r, fd, prefix + fd.name, flex)
        else:
            out[fd.name] = _absent(fd)
            tagged[fd.tag] = fd
    if not flex:
        return out
    for tag, size, end in r.tagged_spans(prefix):
        fd = tagged.get(tag)
        if fd is not None:
            sub = Reader(r.data[:end], r.what, r.pos)
            out[fd.name] = _field(sub, fd, prefix + fd.name, flex)
            if sub.pos != end:
                raise r.fail(f"{prefix}{fd.name} (tag {tag}) holds {size} bytes, its value "
                             f"{sub.pos - r.pos}")
    return out


def decode_key(rtype: int, key: bytes) -> dict | None:
    """The fields of a key of type ``rtype`` (None: not a type of :data:`SCHEMAS`)."""
    schema = SCHEMAS.get(rtype)
    if schema is None:
        return None
    r = Reader(key, f"{schema.name}Key", 2)
    return {name: r.string(name) for name in schema.key}


def decode_value(rtype: int, version: int, value: bytes) -> dict | None:
    """The fields of a value of type ``rtype`` at ``version`` (read past its ``int16``
    version); None for a version the tables do not have."""
    schema = SCHEMAS[rtype]
    fields = schema.values.get(version)
    if fields is None:
        return None
    r = Reader(value, f"{schema.name}Value v{version}", 2)
    return read_struct(r, fields, "", version >= schema.flexible_from)


def json_data(rtype: int, version: int, value: dict) -> dict:
    """``value`` as Kafka's JSON converter prints it: tagged fields only where they
    differ from their default (nested structs too)."""
    return _json(SCHEMAS[rtype].values[version], value)


def json_fields(fields: tuple, value: dict) -> dict:
    """``value`` (read with ``fields``) as Kafka's JSON converter prints it."""
    return _json(fields, value)


def _json(fields: tuple, value: dict) -> dict:
    out = {}
    for fd in fields:
        v = value[fd.name]
        if fd.tag is not None and v == _absent(fd):
            continue
        if fd.fields and v is not None:
            v = [_json(fd.fields, e) for e in v] if fd.type.startswith("[]") else \
                _json(fd.fields, v)
        out[fd.name] = v
    return out

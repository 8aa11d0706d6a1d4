"""Kafka 4's group records (types 3..23 of ``__consumer_offsets``) as Arrow tables.

A KIP-848 consumer group is spread over keyed records: the group's epoch
(ConsumerGroupMetadata), its target assignment epoch, one record per member for its
metadata, its target assignment and its current assignment, one per subscribed regular
expression. :class:`ModernGroups` keeps the newest value per key (a tombstone deletes
it) and folds them into one row per group (:meth:`consumer_groups`); every record of
every type 3..23 (share and streams groups included) is also a row of
:meth:`group_records`, its key and value as Kafka's JSON converters print them.
"""
from __future__ import annotations

import pyarrow as pa

from spark_kafkalog.format.coordinator.rows import ORIGIN, keep, origin, to_json
from spark_kafkalog.format.coordinator.schemas import MEMBER_STATES, SCHEMAS, json_data

__all__ = ["CONSUMER_GROUPS_SCHEMA", "GROUP_RECORDS_SCHEMA", "ModernGroups"]

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
_CONSUMER_TYPES = frozenset((3, 4, 5, 6, 7, 8, 16))

_STRINGS = pa.list_(pa.field("element", pa.string()))
#: partitions by topic id; ``topic`` is the name where this log says it (partition
#: metadata, share-group state, offset commits carrying a topic id), else null
TOPIC_ID_PARTITIONS = pa.list_(pa.field("element", pa.struct([
    pa.field("topic_id", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partitions", pa.list_(pa.field("element", pa.int32())))])))

#: not tables.MEMBER (a classic member's join/sync fields): a KIP-848 member's records
CONSUMER_MEMBER = pa.struct([
    pa.field("member_id", pa.string()),
    pa.field("instance_id", pa.string()),
    pa.field("rack_id", pa.string()),
    pa.field("client_id", pa.string()),
    pa.field("client_host", pa.string()),
    pa.field("subscribed_topic_names", _STRINGS),
    pa.field("subscribed_topic_regex", pa.string()),
    pa.field("rebalance_timeout_ms", pa.int32()),
    pa.field("server_assignor", pa.string()),
    # a member that joined with the classic protocol: its protocols (null otherwise)
    pa.field("classic_protocols", _STRINGS),
    pa.field("classic_session_timeout_ms", pa.int32()),
    pa.field("member_epoch", pa.int32()),            # ConsumerGroupCurrentMemberAssignment
    pa.field("previous_member_epoch", pa.int32()),
    pa.field("state", pa.string()),                  # Kafka's MemberState name
    pa.field("assigned_partitions", TOPIC_ID_PARTITIONS),
    pa.field("partitions_pending_revocation", TOPIC_ID_PARTITIONS),
    pa.field("target_partitions", TOPIC_ID_PARTITIONS),  # ...TargetAssignmentMember
])

CONSUMER_GROUPS_SCHEMA = pa.schema([
    pa.field("group", pa.string()),
    pa.field("group_epoch", pa.int32()),             # ConsumerGroupMetadata.epoch
    pa.field("metadata_hash", pa.int64()),
    pa.field("assignment_epoch", pa.int32()),        # ...TargetAssignmentMetadata
    pa.field("assignment_timestamp", pa.int64()),
    pa.field("subscribed_regexes", pa.list_(pa.field("element", pa.struct([
        pa.field("regular_expression", pa.string()),
        pa.field("topics", _STRINGS),
        pa.field("version", pa.int64()),
        pa.field("timestamp", pa.int64())])))),
    pa.field("members", pa.list_(pa.field("element", CONSUMER_MEMBER))),
    # the newest record of the group (tombstones included) that these rows reflect
    pa.field("record_partition", pa.int32()),
    pa.field("record_offset", pa.int64()),
    pa.field("record_timestamp", pa.int64()),
])

GROUP_RECORDS_SCHEMA = pa.schema([
    pa.field("name", pa.string()),                   # e.g. ConsumerGroupMemberMetadata
    pa.field("group", pa.string()),
    pa.field("member_id", pa.string()),              # null: the key has none
    pa.field("key", pa.string()),                    # the key's fields, JSON
    pa.field("value", pa.string()),                  # as kafka-dump-log prints it; null:
] + ORIGIN)                                          # a tombstone


class ModernGroups:
    """Records of types 3..23 in log order (:meth:`add`); ``latest``: the rows of
    :meth:`group_records` are the newest per key, else every record. The consumer-group
    fold always uses the newest value per key."""

    def __init__(self, latest: bool = True):
        self.latest = latest
        self._rows: dict | list = {} if latest else []
        # (type, key fields) -> decoded value, newest; only the consumer-group types
        self._values: dict[tuple, dict] = {}
        self._last: dict[str, tuple[int, int, int]] = {}
        self.topic_names: dict[str, str] = {}

    def add(self, rtype: int, key: dict, version: int | None, value: dict | None,
            part: int, off: int, ts: int) -> None:
        kid = (rtype, *key.values())
        row = origin(rtype, version, part, off, ts)
        row.update(name=SCHEMAS[rtype].name, group=key["groupId"],
                   member_id=key.get("memberId"), key=key, value=value)
        if not self.latest:             # every row is kept: its JSON text now (less to
            self._text(row)             # hold); latest: only for the rows that stay
        keep(self._rows, kid, row, self.latest)
        if value is not None:
            for t in value.get("topics", ()) if rtype == 4 else ():
                self.topic_names[t["topicId"]] = t["topicName"]
            if rtype == 15:
                for name in ("initializingTopics", "initializedTopics", "deletingTopics"):
                    for t in value[name]:
                        self.topic_names[t["topicId"]] = t["topicName"]
        if rtype not in _CONSUMER_TYPES:
            return
        self._last[key["groupId"]] = (part, off, ts)
        if value is None:
            self._values.pop(kid, None)
        else:
            self._values[kid] = value

    def group_records(self) -> pa.Table:
        if not self.latest:
            return pa.Table.from_pylist(self._rows, schema=GROUP_RECORDS_SCHEMA)
        return pa.Table.from_pylist([self._text(dict(r)) for r in self._rows.values()],
                                    schema=GROUP_RECORDS_SCHEMA)

    @staticmethod
    def _text(row: dict) -> dict:
        """``row`` with its key and value as JSON text, as Kafka's converters print."""
        value = row["value"]
        row["key"] = to_json(row["key"])
        row["value"] = None if value is None else to_json(json_data(
            row["key_version"], row["value_version"], value))
        return row

    def _tps(self, items) -> list[dict]:
        return [{"topic_id": t["topicId"], "topic": self.topic_names.get(t["topicId"]),
                 "partitions": t["partitions"]} for t in items]

    def consumer_groups(self) -> pa.Table:
        """One row per KIP-848 consumer group with any live record."""
        groups: dict[str, dict] = {}
        for (rtype, group, *rest), v in self._values.items():
            g = groups.setdefault(group, {
                "group": group, "group_epoch": None, "metadata_hash": None,
                "assignment_epoch": None, "assignment_timestamp": None,
                "subscribed_regexes": [], "members": {}})
            if rtype == CONSUMER_GROUP_METADATA:
                g.update(group_epoch=v["epoch"], metadata_hash=v["metadataHash"])
            elif rtype == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
                g.update(assignment_epoch=v["assignmentEpoch"],
                         assignment_timestamp=v["assignmentTimestamp"])
            elif rtype == CONSUMER_GROUP_REGULAR_EXPRESSION:
                g["subscribed_regexes"].append({
                    "regular_expression": rest[0], "topics": v["topics"],
                    "version": v["version"], "timestamp": v["timestamp"]})
            elif rtype != CONSUMER_GROUP_PARTITION_METADATA:
                self._member(g["members"].setdefault(rest[0], {"member_id": rest[0]}),
                             rtype, v)
        rows = []
        for name in sorted(groups):
            g = groups[name]
            g["members"] = [{f.name: m.get(f.name) for f in CONSUMER_MEMBER}
                            for _mid, m in sorted(g["members"].items())]
            g["subscribed_regexes"].sort(key=lambda r: r["regular_expression"])
            part, off, ts = self._last[name]
            g.update(record_partition=part, record_offset=off, record_timestamp=ts)
            rows.append(g)
        return pa.Table.from_pylist(rows, schema=CONSUMER_GROUPS_SCHEMA)

    def _member(self, m: dict, rtype: int, v: dict) -> None:
        if rtype == CONSUMER_GROUP_MEMBER_METADATA:
            classic = v["classicMemberMetadata"]
            m.update(instance_id=v["instanceId"], rack_id=v["rackId"],
                     client_id=v["clientId"], client_host=v["clientHost"],
                     subscribed_topic_names=v["subscribedTopicNames"],
                     subscribed_topic_regex=v["subscribedTopicRegex"],
                     rebalance_timeout_ms=v["rebalanceTimeoutMs"],
                     server_assignor=v["serverAssignor"])
            if classic is not None and classic["supportedProtocols"]:
                m.update(classic_protocols=[p["name"] for p in classic["supportedProtocols"]],
                         classic_session_timeout_ms=classic["sessionTimeoutMs"])
        elif rtype == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            m["target_partitions"] = self._tps(v["topicPartitions"])
        elif rtype == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            m.update(member_epoch=v["memberEpoch"],
                     previous_member_epoch=v["previousMemberEpoch"],
                     state=MEMBER_STATES.get(v["state"], f"Unknown({v['state']})"),
                     assigned_partitions=self._tps(v["assignedPartitions"]),
                     partitions_pending_revocation=self._tps(
                         v["partitionsPendingRevocation"]))

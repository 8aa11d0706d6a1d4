"""Records of ``__consumer_offsets`` / ``__transaction_state`` (Spark's Kafka columns:
key, value, partition, offset, timestamp) in, Arrow tables out.

:class:`GroupState` and :class:`TransactionState` take record batches in log order
(:meth:`add`) and build the tables; with ``latest=True`` they keep only the newest record
per key (a tombstone deletes the key), so memory follows the number of live keys, not
the log's length; ``as_of`` (epoch ms) ignores records written after it. Every row says
where it came from: ``record_partition``, ``record_offset``, ``record_timestamp`` (ms).

Kafka 4's group records (types 3..23) go to :mod:`.modern`: ``consumer_groups()`` and
``group_records()``. Every record is counted by type in :meth:`record_types`; record
types and value versions this build has no schema for (newer Kafka) never fail a read:
they are counted in :meth:`other_records`.
A key or value that does not decode under its schema raises CoordinatorRecordError
naming the partition and offset of the record.
"""
from __future__ import annotations

from typing import Iterable

import pyarrow as pa

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.coordinator.records import (
    GROUP_METADATA,
    GROUP_RECORD_TYPES,
    TRANSACTION_STATES,
    UnknownVersion,
    decode_assignment,
    decode_group_key,
    decode_group_value,
    decode_subscription,
    decode_txn_key,
    decode_txn_value,
)
from spark_kafkalog.format.coordinator.modern import (
    CONSUMER_GROUPS_SCHEMA,
    GROUP_RECORDS_SCHEMA,
    ModernGroups,
)
from spark_kafkalog.format.coordinator.rows import ORIGIN as _ORIGIN
from spark_kafkalog.format.coordinator.rows import keep as _keep
from spark_kafkalog.format.coordinator.rows import origin as _origin
from spark_kafkalog.format.coordinator.schemas import SCHEMAS

__all__ = ["COMMITS_SCHEMA", "CONSUMER_GROUPS_SCHEMA", "GROUPS_SCHEMA",
           "GROUP_RECORDS_SCHEMA", "OTHER_SCHEMA", "TRANSACTIONS_SCHEMA", "GroupState",
           "TransactionState"]

TOPIC_PARTITIONS = pa.list_(pa.field("element", pa.struct([
    pa.field("topic", pa.string()),
    pa.field("partitions", pa.list_(pa.field("element", pa.int32())))])))

COMMITS_SCHEMA = pa.schema([
    pa.field("group", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),            # the next offset the group reads
    pa.field("leader_epoch", pa.int32()),      # -1: none (before v3, or not known)
    pa.field("metadata", pa.string()),
    pa.field("commit_timestamp", pa.int64()),
    pa.field("expire_timestamp", pa.int64()),  # -1: none (all but v1)
    pa.field("topic_id", pa.string()),
] + _ORIGIN)

MEMBER = pa.struct([
    pa.field("member_id", pa.string()),
    pa.field("group_instance_id", pa.string()),
    pa.field("client_id", pa.string()),
    pa.field("client_host", pa.string()),
    pa.field("rebalance_timeout", pa.int32()),
    pa.field("session_timeout", pa.int32()),
    # decoded when the group's protocol type is "consumer" (null otherwise)
    pa.field("subscribed_topics", pa.list_(pa.field("element", pa.string()))),
    pa.field("owned_partitions", TOPIC_PARTITIONS),
    pa.field("assigned_partitions", TOPIC_PARTITIONS),
    pa.field("subscription", pa.binary()),
    pa.field("assignment", pa.binary()),
])

GROUPS_SCHEMA = pa.schema([
    pa.field("group", pa.string()),
    pa.field("protocol_type", pa.string()),
    pa.field("generation", pa.int32()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
    pa.field("current_state_timestamp", pa.int64()),
    pa.field("members", pa.list_(pa.field("element", MEMBER))),
] + _ORIGIN)

TRANSACTIONS_SCHEMA = pa.schema([
    pa.field("transactional_id", pa.string()),
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int16()),
    pa.field("state", pa.string()),
    pa.field("partitions", TOPIC_PARTITIONS),
    pa.field("timeout_ms", pa.int32()),
    pa.field("last_update_timestamp", pa.int64()),
    pa.field("start_timestamp", pa.int64()),
    pa.field("previous_producer_id", pa.int64()),
    pa.field("next_producer_id", pa.int64()),
    pa.field("next_producer_epoch", pa.int16()),
    pa.field("client_transaction_version", pa.int16()),
] + _ORIGIN)

OTHER_SCHEMA = pa.schema([
    pa.field("record_type", pa.int16()),
    pa.field("name", pa.string()),
    pa.field("records", pa.int64()),
])


def _tps(items, name: str = "partitions") -> list[dict] | None:
    if items is None:
        return None
    return [{"topic": t["topic"], "partitions": t[name]} for t in items]


def _columns(rb) -> tuple:
    names = rb.schema.names
    stamps = rb.column(names.index("timestamp")).cast(pa.int64()).to_pylist()
    return (rb.column(names.index("key")).to_pylist(),
            rb.column(names.index("value")).to_pylist(),
            rb.column(names.index("partition")).to_pylist(),
            rb.column(names.index("offset")).to_pylist(),
            [-1 if t is None else t // 1000 for t in stamps])


class _State:
    """Rows by key (latest) or in order (all records); counts of undecoded types."""

    topic = ""

    def __init__(self, *, latest: bool = True, as_of: int | None = None):
        self.latest = latest
        self.as_of = as_of
        #: records decoded, the partitions they came from, their time range (ms)
        self.records = 0
        self.partitions: set[int] = set()
        self.first_timestamp: int | None = None
        self.last_timestamp: int | None = None
        #: bytes of log read, when the caller counts them (the log layer does)
        self.bytes_read = 0
        self._other: dict[tuple[int, str], int] = {}

    def _count_other(self, rtype: int, name: str) -> None:
        self._other[(rtype, name)] = self._other.get((rtype, name), 0) + 1

    def other_records(self) -> pa.Table:
        """Records not decoded, counted per record type (and value version)."""
        rows = [{"record_type": t, "name": n, "records": c}
                for (t, n), c in sorted(self._other.items())]
        return pa.Table.from_pylist(rows, schema=OTHER_SCHEMA)

    def add(self, batch) -> "_State":
        """Decode a RecordBatch/Table of the topic's records (offset order within each
        partition); returns self."""
        for key, value, part, off, ts in zip(*_columns(batch)):
            if self.as_of is not None and ts > self.as_of:
                continue
            self.records += 1
            self.partitions.add(part)
            if ts >= 0:
                self.first_timestamp = ts if self.first_timestamp is None else \
                    min(self.first_timestamp, ts)
                self.last_timestamp = ts if self.last_timestamp is None else \
                    max(self.last_timestamp, ts)
            try:
                self._add(key, value, part, off, ts)
            except CoordinatorRecordError as e:
                raise CoordinatorRecordError(f"{self.topic}-{part}: {e.reason}",
                                             offset=off) from e
        return self

    def add_all(self, batches: Iterable) -> "_State":
        for b in batches:
            self.add(b)
        return self

    def _add(self, key, value, part, off, ts) -> None:
        raise NotImplementedError


def _member(m: dict, consumer: bool) -> dict:
    out = {"member_id": m["memberId"], "group_instance_id": m.get("groupInstanceId"),
           "client_id": m["clientId"], "client_host": m["clientHost"],
           "rebalance_timeout": m.get("rebalanceTimeout", -1),
           "session_timeout": m["sessionTimeout"], "subscribed_topics": None,
           "owned_partitions": None, "assigned_partitions": None,
           "subscription": m["subscription"], "assignment": m["assignment"]}
    if consumer:
        try:
            sub = decode_subscription(m["subscription"])[1]
            out["subscribed_topics"] = sub["topics"]
            out["owned_partitions"] = _tps(sub.get("ownedPartitions", []))
        except CoordinatorRecordError:
            pass                        # kept as raw bytes, as Kafka's tool does
        try:
            out["assigned_partitions"] = _tps(
                decode_assignment(m["assignment"])[1]["assignedPartitions"])
        except CoordinatorRecordError:
            pass
    return out


class GroupState(_State):
    """``__consumer_offsets``: committed offsets (:meth:`commits`), classic group
    metadata with members and assignments (:meth:`groups`), KIP-848 consumer groups
    (:meth:`consumer_groups`), every record of types 3..23 (:meth:`group_records`),
    records per type (:meth:`record_types`), undecoded ones (:meth:`other_records`)."""

    topic = "__consumer_offsets"

    def __init__(self, *, latest: bool = True, as_of: int | None = None):
        super().__init__(latest=latest, as_of=as_of)
        self._commits: dict | list = {} if latest else []
        self._groups: dict | list = {} if latest else []
        # keys repeat (one per group/partition, committed again and again): decoded once
        self._keys: dict[bytes, tuple[int, dict | None]] = {}
        self.modern = ModernGroups(latest)
        self._types: dict[int, int] = {}

    def _add(self, key, value, part, off, ts) -> None:
        if key is None:
            raise CoordinatorRecordError("a record without a key")
        known = self._keys.get(key)
        if known is None:
            known = self._keys[key] = decode_group_key(key)
        rtype, k = known
        self._types[rtype] = self._types.get(rtype, 0) + 1
        if k is None:
            self._count_other(rtype, GROUP_RECORD_TYPES.get(rtype, f"unknown type {rtype}"))
            return
        version, v = None, None
        if value is not None:
            try:
                version, v = decode_group_value(rtype, value)
            except UnknownVersion as e:
                self._count_other(rtype, e.reason)
                return
        if rtype in SCHEMAS:
            self.modern.add(rtype, k, version, v, part, off, ts)
            return
        row = _origin(rtype, version, part, off, ts)
        if rtype == GROUP_METADATA:
            row["group"] = k["group"]
            v = v or {}
            consumer = v.get("protocolType") == "consumer"
            row.update(protocol_type=v.get("protocolType"), generation=v.get("generation"),
                       protocol=v.get("protocol"), leader=v.get("leader"),
                       current_state_timestamp=v.get("currentStateTimestamp", -1)
                       if v else None,
                       members=[_member(m, consumer) for m in v["members"]] if v else None)
            _keep(self._groups, k["group"], row, self.latest)
            return
        row.update(group=k["group"], topic=k["topic"], partition=k["partition"])
        v = v or {}
        if v.get("topicId") is not None:
            self.modern.topic_names[v["topicId"]] = k["topic"]
        row.update(offset=v.get("offset"), leader_epoch=v.get("leaderEpoch", -1) if v else None,
                   metadata=v.get("metadata"), commit_timestamp=v.get("commitTimestamp"),
                   expire_timestamp=v.get("expireTimestamp", -1) if v else None,
                   topic_id=v.get("topicId"))
        _keep(self._commits, (k["group"], k["topic"], k["partition"]), row, self.latest)

    def commits(self) -> pa.Table:
        rows = self._commits.values() if self.latest else self._commits
        return pa.Table.from_pylist(list(rows), schema=COMMITS_SCHEMA)

    def groups(self) -> pa.Table:
        rows = self._groups.values() if self.latest else self._groups
        return pa.Table.from_pylist(list(rows), schema=GROUPS_SCHEMA)

    def consumer_groups(self) -> pa.Table:
        """KIP-848 consumer groups, one row each (always the newest value per key, also
        with ``latest=False``; ``as_of`` applies)."""
        return self.modern.consumer_groups()

    def group_records(self) -> pa.Table:
        """Records of types 3..23 (consumer, share, streams groups), key and value as
        JSON text; the newest per key, or every record with ``latest=False``."""
        return self.modern.group_records()

    def record_types(self) -> pa.Table:
        """Every record read, counted per record type (decoded or not)."""
        rows = [{"record_type": t, "name": GROUP_RECORD_TYPES.get(t, f"unknown type {t}"),
                 "records": c} for t, c in sorted(self._types.items())]
        return pa.Table.from_pylist(rows, schema=OTHER_SCHEMA)


class TransactionState(_State):
    """``__transaction_state``: one row per transactional id (:meth:`transactions`)."""

    topic = "__transaction_state"

    def __init__(self, *, latest: bool = True, as_of: int | None = None):
        super().__init__(latest=latest, as_of=as_of)
        self._txns: dict | list = {} if latest else []

    def _add(self, key, value, part, off, ts) -> None:
        if key is None:
            raise CoordinatorRecordError("a record without a key")
        rtype, k = decode_txn_key(key)
        if k is None:
            self._count_other(rtype, f"unknown type {rtype}")
            return
        version, v = None, {}
        if value is not None:
            try:
                version, v = decode_txn_value(value)
            except UnknownVersion as e:
                self._count_other(rtype, e.reason)
                return
        row = _origin(rtype, version, part, off, ts)
        status = v.get("transactionStatus")
        row.update(transactional_id=k["transactionalId"], producer_id=v.get("producerId"),
                   producer_epoch=v.get("producerEpoch"),
                   state=None if status is None else TRANSACTION_STATES.get(
                       status, f"Unknown({status})"),
                   partitions=_tps(v.get("transactionPartitions"), "partitionIds"),
                   timeout_ms=v.get("transactionTimeoutMs"),
                   last_update_timestamp=v.get("transactionLastUpdateTimestampMs"),
                   start_timestamp=v.get("transactionStartTimestampMs"),
                   previous_producer_id=v.get("previousProducerId"),
                   next_producer_id=v.get("nextProducerId"),
                   next_producer_epoch=v.get("nextProducerEpoch"),
                   client_transaction_version=v.get("clientTransactionVersion"))
        _keep(self._txns, k["transactionalId"], row, self.latest)

    def transactions(self) -> pa.Table:
        rows = self._txns.values() if self.latest else self._txns
        return pa.Table.from_pylist(list(rows), schema=TRANSACTIONS_SCHEMA)

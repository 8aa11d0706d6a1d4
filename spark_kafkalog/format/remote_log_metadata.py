"""``__remote_log_metadata`` (KIP-405's TopicBasedRemoteLogMetadataManager): record values
in, Arrow tables, each segment's current state and Kafka's dump text out.

A value (the key is always null) is framed by Kafka's ``BytesApiMessageSerde``::

    frame version   unsigned varint, always 1 (0 and others are refused)
    api key         unsigned varint: 0 RemoteLogSegmentMetadataRecord,
                    1 RemoteLogSegmentMetadataUpdateRecord, 2 RemotePartitionDeleteMetadataRecord,
                    3 RemoteLogSegmentMetadataSnapshotRecord
    version         unsigned varint; every record exists in version 0 only, flexible
    message         the record's fields (storage/src/main/resources/message/<Name>.json,
                    as Kafka 4.4 ships them: tables below), nothing after it

A segment's state moves COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED ->
DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED (a copy that failed goes from STARTED to
DELETE_SEGMENT_STARTED), and any state to itself (a retried update). Only
COPY_SEGMENT_FINISHED segments of partitions not marked for deletion are readable.
Errors are :class:`~spark_kafkalog.errors.RemoteLogMetadataError`.
"""
from __future__ import annotations

import pyarrow as pa

from spark_kafkalog.errors import CoordinatorRecordError, RemoteLogMetadataError
from spark_kafkalog.format.coordinator.protocol import Reader
from spark_kafkalog.format.coordinator.schemas import F, read_struct

__all__ = ["RECORDS_SCHEMA", "SEGMENTS_SCHEMA", "SEGMENT_STATES", "PARTITION_DELETE_STATES",
           "RemoteLogMetadataState", "decode_value", "dump_text", "TOPIC"]

TOPIC = "__remote_log_metadata"
FRAME_VERSION = 1
SEGMENT, SEGMENT_UPDATE, PARTITION_DELETE, SEGMENT_SNAPSHOT = 0, 1, 2, 3

#: RemoteLogSegmentState ids
SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED",
                  2: "DELETE_SEGMENT_STARTED", 3: "DELETE_SEGMENT_FINISHED"}
#: RemotePartitionDeleteState ids
PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED",
                           2: "DELETE_PARTITION_FINISHED"}
#: RemoteLogSegmentState.isValidTransition: state (None: no segment yet) -> the states it
#: may move to. Every state may move to itself: Kafka applies a retried update again.
_NEXT = {None: {0}, 0: {0, 1, 2}, 1: {1, 2}, 2: {2, 3}, 3: {3}}

_TIP = (F("Name", "string"), F("Id", "uuid"), F("Partition", "int32"))
_SEGMENT_ID = (F("TopicIdPartition", "struct", fields=_TIP), F("Id", "uuid"))
_EPOCHS = F("SegmentLeaderEpochs", "[]struct",
            fields=(F("LeaderEpoch", "int32"), F("Offset", "int64")))
_CUSTOM = F("CustomMetadata", "bytes", nullable=True)

#: api key -> (record name, version 0's fields)
MESSAGES = {
    SEGMENT: ("RemoteLogSegmentMetadataRecord", (
        F("RemoteLogSegmentId", "struct", fields=_SEGMENT_ID),
        F("StartOffset", "int64"), F("EndOffset", "int64"), F("BrokerId", "int32"),
        F("MaxTimestampMs", "int64"), F("EventTimestampMs", "int64"), _EPOCHS,
        F("SegmentSizeInBytes", "int32"), _CUSTOM, F("RemoteLogSegmentState", "int8"),
        F("TxnIndexEmpty", "bool", tag=0, default=False))),
    SEGMENT_UPDATE: ("RemoteLogSegmentMetadataUpdateRecord", (
        F("RemoteLogSegmentId", "struct", fields=_SEGMENT_ID),
        F("BrokerId", "int32"), F("EventTimestampMs", "int64"), _CUSTOM,
        F("RemoteLogSegmentState", "int8"))),
    PARTITION_DELETE: ("RemotePartitionDeleteMetadataRecord", (
        F("TopicIdPartition", "struct", fields=_TIP),
        F("BrokerId", "int32"), F("EventTimestampMs", "int64"),
        F("RemotePartitionDeleteState", "int8"))),
    SEGMENT_SNAPSHOT: ("RemoteLogSegmentMetadataSnapshotRecord", (
        F("SegmentId", "uuid"), F("StartOffset", "int64"), F("EndOffset", "int64"),
        F("BrokerId", "int32"), F("MaxTimestampMs", "int64"), F("EventTimestampMs", "int64"),
        _EPOCHS, F("SegmentSizeInBytes", "int32"), _CUSTOM,
        F("RemoteLogSegmentState", "int8"),
        F("TxnIndexEmpty", "bool", tag=0, default=False))),
}

_EPOCHS_TYPE = pa.list_(pa.field("element", pa.struct([
    pa.field("leader_epoch", pa.int32()), pa.field("offset", pa.int64())])))

#: one row per record of the topic, in log order
RECORDS_SCHEMA = pa.schema([
    pa.field("record_partition", pa.int32()),
    pa.field("record_offset", pa.int64()),
    pa.field("record_timestamp", pa.int64()),
    pa.field("record_type", pa.string()),          # the record's name (MESSAGES)
    pa.field("api_key", pa.int16()),
    pa.field("version", pa.int16()),
    pa.field("topic", pa.string()),                # null for a snapshot record
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("segment_id", pa.string()),           # null for a partition delete
    pa.field("start_offset", pa.int64()),
    pa.field("end_offset", pa.int64()),
    pa.field("broker_id", pa.int32()),
    pa.field("max_timestamp_ms", pa.int64()),
    pa.field("event_timestamp_ms", pa.int64()),
    pa.field("segment_leader_epochs", _EPOCHS_TYPE),
    pa.field("segment_size_in_bytes", pa.int32()),
    pa.field("custom_metadata", pa.binary()),
    pa.field("state", pa.string()),                # segment or partition-delete state
    pa.field("txn_index_empty", pa.bool_()),
])

#: one row per remote segment: its metadata and current state (a table of its own, not a
#: selection of RECORDS_SCHEMA: the segment's state, its partition's and where they came from)
SEGMENTS_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("segment_id", pa.string()),
    pa.field("start_offset", pa.int64()),
    pa.field("end_offset", pa.int64()),
    pa.field("max_timestamp_ms", pa.int64()),
    pa.field("segment_leader_epochs", _EPOCHS_TYPE),
    pa.field("segment_size_in_bytes", pa.int32()),
    pa.field("custom_metadata", pa.binary()),
    pa.field("txn_index_empty", pa.bool_()),
    pa.field("state", pa.string()),
    pa.field("state_timestamp_ms", pa.int64()),    # the event that set the state
    pa.field("broker_id", pa.int32()),
    pa.field("partition_delete_state", pa.string()),
    pa.field("readable", pa.bool_()),
    pa.field("metadata_partition", pa.int32()),    # where the state came from
    pa.field("metadata_offset", pa.int64()),
])


def _refused(kafka_text: str, detail: str) -> RemoteLogMetadataError:
    """Kafka's own words (what its tool prints, kept in ``kafka_text``) and ours."""
    err = RemoteLogMetadataError(f"{kafka_text} ({detail})")
    err.kafka_text = kafka_text
    return err


def decode_value(value: bytes) -> tuple[int, int, dict]:
    """``(api key, version, fields)`` of one record value (field names as in Kafka's
    schemas). Raises RemoteLogMetadataError with Kafka's reason for what it refuses."""
    if value is None:
        raise RemoteLogMetadataError("a __remote_log_metadata record has a null value")
    r = Reader(bytes(value), "remote log metadata record")
    try:
        frame = r.uvarint("frame version")
        if frame == 0:
            raise RemoteLogMetadataError(
                "Could not deserialize metadata record with frame version 0. Note that "
                "upgrades from the preview release of KRaft in 2.8 to newer versions are "
                "not supported.")
        if frame != FRAME_VERSION:
            raise RemoteLogMetadataError(
                f"Could not deserialize metadata record due to unknown frame version "
                f"{frame}(only frame version {FRAME_VERSION} is supported)")
        api_key = r.uvarint("type")
        version = r.uvarint("version")
    except CoordinatorRecordError as err:
        raise RemoteLogMetadataError(err.reason) from err
    if api_key not in MESSAGES:
        raise RemoteLogMetadataError(f"org.apache.kafka.common.errors."
                                     f"UnsupportedVersionException: Unknown metadata id {api_key}")
    name, fields = MESSAGES[api_key]
    if version != 0:
        raise _refused(f"Failed to deserialize record with type {api_key}",
                       f"{name} has no version {version}")
    r.what = f"{name} v{version}"
    try:
        data = read_struct(r, fields)
    except CoordinatorRecordError as err:
        raise _refused(f"Failed to deserialize record with type {api_key}",
                       err.reason) from err
    if not r.done():
        raise RemoteLogMetadataError(f"Found {len(r.data) - r.pos} byte(s) of garbage after "
                                     f"{api_key}")
    return api_key, version, data


# ---- Kafka's toString() of the decoded objects ----------------------------------------------

def _tip(t: dict) -> str:
    return f"{t['Id']}:{t['Name']}-{t['Partition']}"


def _segment_id(s: dict) -> str:
    return f"RemoteLogSegmentId{{topicIdPartition={_tip(s['TopicIdPartition'])}, id={s['Id']}}}"


def _epochs(entries: list) -> str:
    m = {}
    for e in entries:                              # a HashMap: the last one of an epoch wins
        m[e["LeaderEpoch"]] = e["Offset"]
    return "{" + ", ".join(f"{k}={m[k]}" for k in sorted(m)) + "}"


def _custom(raw: bytes | None) -> str:
    return "Optional.empty" if raw is None else f"Optional[CustomMetadata{{{len(raw)} bytes}}]"


def _state(d: dict, names: dict, field: str) -> str:
    state = names.get(d[field])
    if state is None:
        # RemoteLogSegmentMetadata(Update) checks for null; RemotePartitionDeleteMetadata
        # fails on it with a bare NullPointerException, printed as "null"
        text = "null" if field == "RemotePartitionDeleteState" else "state can not be null"
        raise _refused(text, f"{field} {d[field]} is not a state Kafka knows")
    return state


def _check_segment(d: dict) -> None:
    start, end = d["StartOffset"], d["EndOffset"]
    if start < 0:
        raise RemoteLogMetadataError(f"Unexpected start offset = {start}. StartOffset for a "
                                     "remote segment cannot be negative")
    if end < start:
        raise RemoteLogMetadataError(f"Unexpected end offset = {end}. EndOffset for a remote "
                                     f"segment cannot be less than startOffset = {start}")
    if not d["SegmentLeaderEpochs"]:
        raise RemoteLogMetadataError("segmentLeaderEpochs can not be null or empty")


def _text(api_key: int, d: dict) -> str:
    if api_key == SEGMENT:
        state = _state(d, SEGMENT_STATES, "RemoteLogSegmentState")
        _check_segment(d)
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId="
                f"{_segment_id(d['RemoteLogSegmentId'])}"
                f", startOffset={d['StartOffset']}, endOffset={d['EndOffset']}"
                f", brokerId={d['BrokerId']}, maxTimestampMs={d['MaxTimestampMs']}"
                f", eventTimestampMs={d['EventTimestampMs']}"
                f", segmentLeaderEpochs={_epochs(d['SegmentLeaderEpochs'])}"
                f", segmentSizeInBytes={d['SegmentSizeInBytes']}"
                f", customMetadata={_custom(d['CustomMetadata'])}, state={state}"
                f", txnIdxEmpty={str(d['TxnIndexEmpty']).lower()}}}")
    if api_key == SEGMENT_UPDATE:
        state = _state(d, SEGMENT_STATES, "RemoteLogSegmentState")
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId="
                f"{_segment_id(d['RemoteLogSegmentId'])}"
                f", customMetadata={_custom(d['CustomMetadata'])}, state={state}"
                f", eventTimestampMs={d['EventTimestampMs']}, brokerId={d['BrokerId']}}}")
    if api_key == PARTITION_DELETE:
        state = _state(d, PARTITION_DELETE_STATES, "RemotePartitionDeleteState")
        return (f"RemotePartitionDeleteMetadata{{topicPartition={_tip(d['TopicIdPartition'])}"
                f", state={state}, eventTimestampMs={d['EventTimestampMs']}"
                f", brokerId={d['BrokerId']}}}")
    state = _state(d, SEGMENT_STATES, "RemoteLogSegmentState")
    return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={d['SegmentId']}"
            f", startOffset={d['StartOffset']}, endOffset={d['EndOffset']}"
            f", maxTimestampMs={d['MaxTimestampMs']}"
            f", segmentLeaderEpochs={_epochs(d['SegmentLeaderEpochs'])}"
            f", segmentSizeInBytes={d['SegmentSizeInBytes']}"
            f", customMetadata={_custom(d['CustomMetadata'])}, state={state}"
            f", txnIdxEmpty={str(d['TxnIndexEmpty']).lower()}}}")


def dump_text(key: bytes | None, value: bytes | None, offset: int | None = None) -> str:
    """What Kafka 4.4's ``kafka-dump-log --remote-log-metadata-decoder`` prints as one
    record's payload (the key is ignored: the topic's keys are null). A value that does
    not decode raises RemoteLogMetadataError; with ``offset`` given, Kafka's own line for
    it (``Error at offset N, skipping. <reason>``) is returned instead."""
    try:
        api_key, _, data = decode_value(value)
        return _text(api_key, data)
    except RemoteLogMetadataError as err:
        if offset is None:
            raise
        return f"Error at offset {offset}, skipping. {getattr(err, 'kafka_text', err.reason)}"


# ---- tables and state ------------------------------------------------------------------------

def _row(api_key: int, version: int, d: dict) -> dict:
    name = MESSAGES[api_key][0][:-len("Record")]
    row = {f.name: None for f in RECORDS_SCHEMA}
    row.update(record_type=name, api_key=api_key, version=version,
               broker_id=d["BrokerId"], event_timestamp_ms=d["EventTimestampMs"])
    if api_key == PARTITION_DELETE:
        tip = d["TopicIdPartition"]
        row["state"] = _state(d, PARTITION_DELETE_STATES, "RemotePartitionDeleteState")
    else:
        row["state"] = _state(d, SEGMENT_STATES, "RemoteLogSegmentState")
        row["custom_metadata"] = d["CustomMetadata"]
        if api_key == SEGMENT_SNAPSHOT:
            tip = None
            row["segment_id"] = d["SegmentId"]
        else:
            tip = d["RemoteLogSegmentId"]["TopicIdPartition"]
            row["segment_id"] = d["RemoteLogSegmentId"]["Id"]
        if api_key != SEGMENT_UPDATE:
            _check_segment(d)
            row.update(start_offset=d["StartOffset"], end_offset=d["EndOffset"],
                       max_timestamp_ms=d["MaxTimestampMs"],
                       segment_size_in_bytes=d["SegmentSizeInBytes"],
                       txn_index_empty=d["TxnIndexEmpty"],
                       segment_leader_epochs=[{"leader_epoch": e["LeaderEpoch"],
                                               "offset": e["Offset"]}
                                              for e in d["SegmentLeaderEpochs"]])
    if tip is not None:
        row.update(topic=tip["Name"], topic_id=tip["Id"], partition=tip["Partition"])
    return row


class RemoteLogMetadataState:
    """Records of ``__remote_log_metadata`` fed in log order per partition (:meth:`add`);
    :meth:`records` is every record as a row, :meth:`segments` each segment's current
    state (as RemoteLogMetadataCache keeps it: an update moving a segment along a
    transition Kafka does not allow is not applied, and counted in ``rejected``).

    ``keep_records=False`` keeps only the per-segment state (memory follows the number
    of segments, not of records)."""

    def __init__(self, keep_records: bool = True):
        self.keep_records = keep_records
        self._records: list[dict] = []
        self._segments: dict[tuple, dict] = {}          # (topic_id, partition, id) -> row
        self._deletes: dict[tuple, str] = {}            # (topic_id, partition) -> state
        self.rejected: list[tuple[int, int, str]] = []  # (partition, offset, why)

    def add(self, value: bytes, partition: int, offset: int, timestamp: int) -> None:
        try:
            api_key, version, d = decode_value(value)
            row = _row(api_key, version, d)
        except RemoteLogMetadataError as err:
            raise RemoteLogMetadataError(
                f"{TOPIC}-{partition} record at offset {offset}: {err.reason}",
                offset=offset) from err
        row.update(record_partition=partition, record_offset=offset,
                   record_timestamp=timestamp)
        if self.keep_records:
            self._records.append(row)
        self._apply(row)

    def _apply(self, row: dict) -> None:
        if row["api_key"] == PARTITION_DELETE:
            self._deletes[(row["topic_id"], row["partition"])] = row["state"]
            return
        if row["api_key"] == SEGMENT_SNAPSHOT:
            return            # no topic-partition: only the file-based manager used them
        key = (row["topic_id"], row["partition"], row["segment_id"])
        cur = self._segments.get(key)
        why = _not_applied(row, cur)
        if why is not None:
            self.rejected.append((row["record_partition"], row["record_offset"],
                                  f"segment {row['segment_id']}: "
                                  f"{'no segment' if cur is None else cur['state']} -> "
                                  f"{row['state']}{why}"))
            return
        if row["api_key"] == SEGMENT:
            # a segment record (re)announces the whole segment: Kafka's cache puts it
            cur = {f.name: row.get(f.name) for f in SEGMENTS_SCHEMA}
            self._segments[key] = cur
        elif row["custom_metadata"] is not None:
            cur["custom_metadata"] = row["custom_metadata"]
        cur.update(state=row["state"], state_timestamp_ms=row["event_timestamp_ms"],
                   broker_id=row["broker_id"], metadata_partition=row["record_partition"],
                   metadata_offset=row["record_offset"])
        if cur["state"] == "DELETE_SEGMENT_FINISHED":
            del self._segments[key]

    def partition_delete_state(self, topic_id: str, partition: int) -> str | None:
        return self._deletes.get((topic_id, partition))

    def segment_rows(self) -> list[dict]:
        out = []
        for (tid, part, _), seg in self._segments.items():
            deleted = self._deletes.get((tid, part))
            out.append({**seg, "partition_delete_state": deleted,
                        "readable": seg["state"] == "COPY_SEGMENT_FINISHED" and deleted is None})
        out.sort(key=lambda s: (s["topic"], s["partition"], s["start_offset"], s["end_offset"]))
        return out

    def records(self) -> pa.Table:
        return pa.Table.from_pylist(self._records, schema=RECORDS_SCHEMA)

    def segments(self) -> pa.Table:
        """Every segment not yet DELETE_SEGMENT_FINISHED, with its current state."""
        return pa.Table.from_pylist(self.segment_rows(), schema=SEGMENTS_SCHEMA)


def _not_applied(row: dict, cur: dict | None) -> str | None:
    """Why Kafka's RemoteLogMetadataCache does not apply ``row`` to a segment in state
    ``cur`` (None when it does; ``""`` for a transition ``isValidTransition`` refuses).
    A segment record goes through ``addCopyInProgressSegment`` (its state must be
    COPY_SEGMENT_STARTED); an update through ``updateRemoteLogSegmentMetadata`` (the
    segment must be known, and COPY_SEGMENT_STARTED is no update's state)."""
    if row["api_key"] == SEGMENT and row["state"] != SEGMENT_STATES[0]:
        return " (a segment record must be COPY_SEGMENT_STARTED)"
    if row["api_key"] == SEGMENT_UPDATE and cur is None:
        return " (no such segment: never announced, or its deletion finished)"
    if _state_id(row["state"]) not in _NEXT[None if cur is None else _state_id(cur["state"])]:
        return ""
    if row["api_key"] == SEGMENT_UPDATE and row["state"] == SEGMENT_STATES[0]:
        return " (an update cannot set COPY_SEGMENT_STARTED)"
    return None


def _state_id(name: str) -> int:
    for k, v in SEGMENT_STATES.items():
        if v == name:
            return k
    raise RemoteLogMetadataError(f"unknown segment state {name}")

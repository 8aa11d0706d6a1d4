"""KRaft's control records (``__cluster_metadata`` and its snapshots) as the JSON Kafka's
converters print: LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
KRaftVersionRecord and VotersRecord, each in version 0 (Kafka's raft
``common/message/*.json``; every one flexible: compact arrays and strings, tagged fields
at the end of every struct)::

    LeaderChangeMessage  => version int16, leaderId int32, voters [voterId int32],
                            grantingVoters [voterId int32]
    SnapshotHeaderRecord => version int16, lastContainedLogTimestamp int64
    SnapshotFooterRecord => version int16
    KRaftVersionRecord   => version int16, kRaftVersion int16
    VotersRecord         => version int16, voters [voterId int32, voterDirectoryId uuid,
                            endpoints [name string, host string, port uint16],
                            kRaftVersionFeature {minSupportedVersion int16,
                                                 maxSupportedVersion int16}]

:func:`control_text` is what Kafka 4.4's DumpLogSegments prints after a control record's
metadata; it raises CoordinatorRecordError for bytes that do not decode.
"""
from __future__ import annotations

from spark_kafkalog.format.coordinator.protocol import Reader, uuid_text
from spark_kafkalog.format.coordinator.rows import to_json

__all__ = ["control_text", "KRAFT_CONTROL_TYPES"]

#: control type id -> (the label Kafka prints, the record's name)
KRAFT_CONTROL_TYPES = {2: ("LeaderChange:", "LeaderChangeMessage"),
                       3: ("SnapshotHeader", "SnapshotHeaderRecord"),
                       4: ("SnapshotFooter", "SnapshotFooterRecord"),
                       5: ("KRaftVersion", "KRaftVersionRecord"),
                       6: ("KRaftVoters", "VotersRecord")}


def _array(r: Reader, field: str, element) -> list:
    n = r.count(field, flexible=True)
    return [] if n is None else [element(r) for _ in range(n)]


def _end(r: Reader) -> None:
    r.tagged_fields()


def _voter_id(r: Reader) -> dict:
    out = {"voterId": r.int32("voterId")}
    _end(r)
    return out


def _endpoint(r: Reader) -> dict:
    out = {"name": r.string("name", flexible=True), "host": r.string("host", flexible=True),
           "port": r.uint16("port")}
    _end(r)
    return out


def _voter(r: Reader) -> dict:
    out = {"voterId": r.int32("voterId"),
           "voterDirectoryId": uuid_text(r.uuid("voterDirectoryId")),
           "endpoints": _array(r, "endpoints", _endpoint)}
    feature = {"minSupportedVersion": r.int16("minSupportedVersion"),
               "maxSupportedVersion": r.int16("maxSupportedVersion")}
    _end(r)
    out["kRaftVersionFeature"] = feature
    _end(r)
    return out


def control_text(control_type: int, value: bytes) -> str | None:
    """``"<label> <json>"`` for a KRaft control record's value, None for other types."""
    if control_type not in KRAFT_CONTROL_TYPES:
        return None
    label, name = KRAFT_CONTROL_TYPES[control_type]
    r = Reader(value, name)
    out: dict = {"version": r.int16("version")}
    if control_type == 2:
        out["leaderId"] = r.int32("leaderId")
        out["voters"] = _array(r, "voters", _voter_id)
        out["grantingVoters"] = _array(r, "grantingVoters", _voter_id)
    elif control_type == 3:
        out["lastContainedLogTimestamp"] = r.int64("lastContainedLogTimestamp")
    elif control_type == 5:
        out["kRaftVersion"] = r.int16("kRaftVersion")
    elif control_type == 6:
        out["voters"] = _array(r, "voters", _voter)
    _end(r)
    return f"{label} {to_json(out)}"

"""KRaft control records, built from Kafka's raft message schemas (version 0, flexible),
decoded to the JSON Kafka's DumpLogSegments prints (the kafka tier compares a broker's
log with Kafka 4.4's tool)."""
from __future__ import annotations

import struct
import uuid

import pytest

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.format.kraft_control import control_text


def cstr(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def test_leader_change_and_snapshot_records():
    voter = struct.pack(">i", 1) + b"\x00"
    leader = struct.pack(">hi", 0, 1) + b"\x02" + voter + b"\x02" + voter + b"\x00"
    assert control_text(2, leader) == ('LeaderChange: {"version":0,"leaderId":1,'
                                       '"voters":[{"voterId":1}],"grantingVoters":'
                                       '[{"voterId":1}]}')
    assert control_text(3, struct.pack(">hq", 0, 17) + b"\x00") == \
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":17}'
    assert control_text(4, struct.pack(">h", 0) + b"\x00") == 'SnapshotFooter {"version":0}'
    assert control_text(5, struct.pack(">hh", 0, 1) + b"\x00") == \
        'KRaftVersion {"version":0,"kRaftVersion":1}'
    assert control_text(0, b"") is None            # ABORT/COMMIT are not KRaft's


def test_voters_record():
    d = uuid.UUID(int=1).bytes
    endpoint = cstr("CONTROLLER") + cstr("localhost") + struct.pack(">H", 9093) + b"\x00"
    voter = struct.pack(">i", 1) + d + b"\x02" + endpoint + struct.pack(">hh", 0, 1) \
        + b"\x00" + b"\x00"
    value = struct.pack(">h", 0) + b"\x02" + voter + b"\x00"
    assert control_text(6, value) == (
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":'
        '"AAAAAAAAAAAAAAAAAAAAAQ","endpoints":[{"name":"CONTROLLER","host":"localhost",'
        '"port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,'
        '"maxSupportedVersion":1}}]}')
    with pytest.raises(KafkaLogError):
        control_text(6, value[:-5])

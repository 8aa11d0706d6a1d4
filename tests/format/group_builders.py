"""Kafka 4's group records of ``__consumer_offsets`` (types 3..23: KIP-848 consumer
groups, share groups, streams groups) built by hand from the facts of Kafka's schema
JSONs (group-coordinator ``common/message/*Key.json`` / ``*Value.json``, Kafka 4.3) with
the primitives of :mod:`coordinator_builders`, written out field by field here --
independent of the decoder's field tables.

Keys: int16 type, then (non-flexible) int16-length strings. Values: int16 version 0,
flexible: compact strings/arrays (length + 1), uuid 16 bytes, a tagged-field section at
the end of every struct; a nullable tagged struct starts with a varint 1.

:func:`modern_records` returns ``[(key, value, expected key, expected value)]``, the
expected dicts in Kafka's JSON names with tagged fields at their defaults when absent.
"""
from __future__ import annotations

import base64

from tests.format.coordinator_builders import (
    cbytes,
    cstring,
    i8,
    i16,
    i32,
    i64,
    string,
    tagged,
    uvarint,
)

TOPIC_A = bytes(range(16))
TOPIC_B = bytes(range(100, 116))


def uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def carr(items, enc) -> bytes:
    return uvarint(len(items) + 1) + b"".join(enc(x) for x in items)


def cint32s(values) -> bytes:
    return carr(values, i32)


def cstrings(values) -> bytes:
    return carr(values, cstring)


def key(rtype: int, *strings: str) -> bytes:
    return i16(rtype) + b"".join(string(s) for s in strings)


def v0(body: bytes) -> bytes:
    return i16(0) + body


# ---- KIP-848 consumer groups ----------------------------------------------------------------

def consumer_tp(topic_id: bytes, partitions, epochs=None) -> bytes:
    """ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions (tag 0:
    assignmentEpochs, nullable []int32; Kafka 4.3 reads it as empty when absent)."""
    return topic_id + cint32s(partitions) + tagged({} if epochs is None
                                                  else {0: cint32s(epochs)})


def consumer_tp_exp(topic_id, partitions, epochs=None) -> dict:
    return {"topicId": uuid_text(topic_id), "partitions": list(partitions),
            "assignmentEpochs": [] if epochs is None else list(epochs)}


def consumer_records():
    out = []
    # 3 ConsumerGroupMetadata: epoch int32, tag 0 metadataHash int64 (default 0)
    out.append((key(3, "cg"), v0(i32(5) + tagged({})), {"groupId": "cg"},
                {"epoch": 5, "metadataHash": 0}))
    out.append((key(3, "cg-hash"), v0(i32(6) + tagged({0: i64(-1234567890123)})),
                {"groupId": "cg-hash"}, {"epoch": 6, "metadataHash": -1234567890123}))
    # 4 ConsumerGroupPartitionMetadata: topics [topicId, topicName, numPartitions,
    #   partitionMetadata [partition, racks []string]]
    pm = carr([(0, ["r1", "r2"]), (1, [])],
              lambda p: i32(p[0]) + cstrings(p[1]) + tagged({}))
    out.append((key(4, "cg"),
                v0(carr([TOPIC_A], lambda t: t + cstring("orders") + i32(2) + pm
                        + tagged({})) + tagged({})),
                {"groupId": "cg"},
                {"topics": [{"topicId": uuid_text(TOPIC_A), "topicName": "orders",
                             "numPartitions": 2, "partitionMetadata": [
                                 {"partition": 0, "racks": ["r1", "r2"]},
                                 {"partition": 1, "racks": []}]}]}))
    # 5 ConsumerGroupMemberMetadata
    member = {"instanceId": None, "rackId": None, "clientId": "client-1",
              "clientHost": "/127.0.0.1", "subscribedTopicNames": ["orders", "ünï"],
              "subscribedTopicRegex": None, "rebalanceTimeoutMs": 300000,
              "serverAssignor": "uniform", "classicMemberMetadata": None}
    body = (cstring(None) + cstring(None) + cstring("client-1") + cstring("/127.0.0.1")
            + cstrings(["orders", "ünï"]) + cstring(None) + i32(300000)
            + cstring("uniform"))
    # the tag as a broker writes it for a consumer-protocol member: present, null (0)
    out.append((key(5, "cg", "m-1"), v0(body + tagged({0: uvarint(0)})),
                {"groupId": "cg", "memberId": "m-1"}, member))
    # the tag absent: Kafka 4.3 reads an empty ClassicMemberMetadata, not null
    out.append((key(5, "cg-hash", "m-1"), v0(body + tagged({})),
                {"groupId": "cg-hash", "memberId": "m-1"},
                {**member, "classicMemberMetadata": {"sessionTimeoutMs": 0,
                                                     "supportedProtocols": []}}))
    # ... a member that joined with the classic protocol: tag 0 nullable struct
    classic = (i32(45000) + carr([("range", b"\x00\x03meta"), ("roundrobin", b"")],
                                 lambda p: cstring(p[0]) + cbytes(p[1]) + tagged({}))
               + tagged({}))
    body = (cstring("inst-2") + cstring("rack-2") + cstring("client-2") + cstring("/10.0.0.2")
            + cstrings([]) + cstring("ord.*") + i32(-1) + cstring(None))
    out.append((key(5, "cg", "m-2"), v0(body + tagged({0: uvarint(1) + classic})),
                {"groupId": "cg", "memberId": "m-2"},
                {"instanceId": "inst-2", "rackId": "rack-2", "clientId": "client-2",
                 "clientHost": "/10.0.0.2", "subscribedTopicNames": [],
                 "subscribedTopicRegex": "ord.*", "rebalanceTimeoutMs": -1,
                 "serverAssignor": None, "classicMemberMetadata": {
                     "sessionTimeoutMs": 45000, "supportedProtocols": [
                         {"name": "range", "metadata": b"\x00\x03meta"},
                         {"name": "roundrobin", "metadata": b""}]}}))
    # 6 ConsumerGroupTargetAssignmentMetadata: assignmentEpoch, tag 0 assignmentTimestamp
    out.append((key(6, "cg"), v0(i32(5) + tagged({})), {"groupId": "cg"},
                {"assignmentEpoch": 5, "assignmentTimestamp": 0}))
    out.append((key(6, "cg-hash"), v0(i32(6) + tagged({0: i64(1_700_000_000_123)})),
                {"groupId": "cg-hash"},
                {"assignmentEpoch": 6, "assignmentTimestamp": 1_700_000_000_123}))
    # 7 ConsumerGroupTargetAssignmentMember: topicPartitions [topicId, partitions]
    out.append((key(7, "cg", "m-1"),
                v0(carr([(TOPIC_A, [0, 1]), (TOPIC_B, [])],
                        lambda t: t[0] + cint32s(t[1]) + tagged({})) + tagged({})),
                {"groupId": "cg", "memberId": "m-1"},
                {"topicPartitions": [{"topicId": uuid_text(TOPIC_A), "partitions": [0, 1]},
                                     {"topicId": uuid_text(TOPIC_B), "partitions": []}]}))
    # 8 ConsumerGroupCurrentMemberAssignment
    out.append((key(8, "cg", "m-1"),
                v0(i32(5) + i32(4) + i8(0) + carr([(TOPIC_A, [0, 1], None)],
                                                  lambda t: consumer_tp(*t))
                   + carr([TOPIC_B], lambda t: t + cint32s([5]) + tagged({0: uvarint(0)}))
                   + tagged({})),
                {"groupId": "cg", "memberId": "m-1"},
                {"memberEpoch": 5, "previousMemberEpoch": 4, "state": 0,
                 "assignedPartitions": [consumer_tp_exp(TOPIC_A, [0, 1])],
                 "partitionsPendingRevocation": [{"topicId": uuid_text(TOPIC_B),
                                                  "partitions": [5],
                                                  "assignmentEpochs": None}]}))
    out.append((key(8, "cg", "m-2"),
                v0(i32(6) + i32(5) + i8(1) + carr([(TOPIC_A, [2], [6])],
                                                  lambda t: consumer_tp(*t))
                   + carr([(TOPIC_B, [0, 3], [])], lambda t: consumer_tp(*t)) + tagged({})),
                {"groupId": "cg", "memberId": "m-2"},
                {"memberEpoch": 6, "previousMemberEpoch": 5, "state": 1,
                 "assignedPartitions": [consumer_tp_exp(TOPIC_A, [2], [6])],
                 "partitionsPendingRevocation": [consumer_tp_exp(TOPIC_B, [0, 3], [])]}))
    # 16 ConsumerGroupRegularExpression: key groupId, regularExpression; value topics,
    #    version int64, timestamp int64
    out.append((key(16, "cg", "ord.*"),
                v0(cstrings(["orders", "orders2"]) + i64(7) + i64(1_700_000_000_999)
                   + tagged({})),
                {"groupId": "cg", "regularExpression": "ord.*"},
                {"topics": ["orders", "orders2"], "version": 7,
                 "timestamp": 1_700_000_000_999}))
    return out


# ---- share groups ---------------------------------------------------------------------------

def share_records():
    tps = carr([(TOPIC_A, [0, 2])], lambda t: t[0] + cint32s(t[1]) + tagged({}))
    tps_exp = [{"topicId": uuid_text(TOPIC_A), "partitions": [0, 2]}]
    return [
        (key(10, "sg", "s-1"),
         v0(cstring(None) + cstring("sc") + cstring("/h") + cstrings(["orders"])
            + tagged({})),
         {"groupId": "sg", "memberId": "s-1"},
         {"rackId": None, "clientId": "sc", "clientHost": "/h",
          "subscribedTopicNames": ["orders"]}),
        (key(11, "sg"), v0(i32(3) + i64(42) + tagged({})), {"groupId": "sg"},
         {"epoch": 3, "metadataHash": 42}),
        (key(12, "sg"), v0(i32(3) + tagged({0: i64(0)})), {"groupId": "sg"},
         {"assignmentEpoch": 3, "assignmentTimestamp": 0}),
        (key(13, "sg", "s-1"), v0(tps + tagged({})), {"groupId": "sg", "memberId": "s-1"},
         {"topicPartitions": tps_exp}),
        (key(14, "sg", "s-1"), v0(i32(3) + i32(2) + i8(0) + tps + tagged({})),
         {"groupId": "sg", "memberId": "s-1"},
         {"memberEpoch": 3, "previousMemberEpoch": 2, "state": 0,
          "assignedPartitions": tps_exp}),
        (key(15, "sg"),
         v0(carr([TOPIC_A], lambda t: t + cstring("orders") + cint32s([0, 1]) + tagged({}))
            + carr([], bytes)
            + carr([TOPIC_B], lambda t: t + cstring("gone") + tagged({})) + tagged({})),
         {"groupId": "sg"},
         {"initializingTopics": [{"topicId": uuid_text(TOPIC_A), "topicName": "orders",
                                  "partitions": [0, 1]}],
          "initializedTopics": [],
          "deletingTopics": [{"topicId": uuid_text(TOPIC_B), "topicName": "gone"}]}),
    ]


# ---- streams groups -------------------------------------------------------------------------

def kv(pairs) -> bytes:
    return carr(pairs, lambda p: cstring(p[0]) + cstring(p[1]) + tagged({}))


def kv_exp(pairs) -> list:
    return [{"key": k, "value": v} for k, v in pairs]


def tasks(items, epochs=False) -> bytes:
    """[subtopologyId, partitions (, tag 0 assignmentEpochs)]"""
    return carr(items, lambda t: cstring(t[0]) + cint32s(t[1]) + tagged(
        {0: cint32s(t[2])} if epochs and len(t) > 2 else {}))


def tasks_exp(items, epochs=False) -> list:
    out = []
    for t in items:
        e = {"subtopologyId": t[0], "partitions": list(t[1])}
        if epochs:
            e["assignmentEpochs"] = list(t[2]) if len(t) > 2 else []
        out.append(e)
    return out


def topic_info(name, partitions, rf, configs) -> bytes:
    return cstring(name) + i32(partitions) + i16(rf) + kv(configs) + tagged({})


def streams_records():
    out = [
        (key(17, "st"), v0(i32(2) + i64(77) + tagged({})), {"groupId": "st"},
         {"epoch": 2, "metadataHash": 77, "validatedTopologyEpoch": -1,
          "lastAssignmentConfigs": []}),
        (key(17, "st2"), v0(i32(2) + i64(0) + tagged({0: i32(1),
                                                     1: kv([("num.standby", "1")])})),
         {"groupId": "st2"},
         {"epoch": 2, "metadataHash": 0, "validatedTopologyEpoch": 1,
          "lastAssignmentConfigs": kv_exp([("num.standby", "1")])}),
        (key(19, "st", "p-1"),
         v0(cstring(None) + cstring("rk") + cstring("sc") + cstring("/h") + i32(1000)
            + i32(1) + cstring("proc-1") + i8(1) + cstring("localhost") + i16(-1) + tagged({})
            + kv([("az", "a")]) + tagged({})),
         {"groupId": "st", "memberId": "p-1"},
         {"instanceId": None, "rackId": "rk", "clientId": "sc", "clientHost": "/h",
          "rebalanceTimeoutMs": 1000, "topologyEpoch": 1, "processId": "proc-1",
          "userEndpoint": {"host": "localhost", "port": 65535},
          "clientTags": kv_exp([("az", "a")])}),
        (key(19, "st", "p-2"),
         v0(cstring("i2") + cstring(None) + cstring("sc") + cstring("/h") + i32(1000)
            + i32(1) + cstring("proc-2") + i8(-1) + kv([]) + tagged({})),
         {"groupId": "st", "memberId": "p-2"},
         {"instanceId": "i2", "rackId": None, "clientId": "sc", "clientHost": "/h",
          "rebalanceTimeoutMs": 1000, "topologyEpoch": 1, "processId": "proc-2",
          "userEndpoint": None, "clientTags": []}),
        (key(17, "st3"), v0(i32(4) + i64(1) + tagged({1: uvarint(0)})), {"groupId": "st3"},
         {"epoch": 4, "metadataHash": 1, "validatedTopologyEpoch": -1,
          "lastAssignmentConfigs": None}),
        (key(20, "st"), v0(i32(2) + tagged({0: i64(5)})), {"groupId": "st"},
         {"assignmentEpoch": 2, "assignmentTimestamp": 5}),
        (key(21, "st", "p-1"),
         v0(tasks([("0", [0, 1])]) + tasks([]) + tasks([("1", [2])]) + tagged({})),
         {"groupId": "st", "memberId": "p-1"},
         {"activeTasks": tasks_exp([("0", [0, 1])]), "standbyTasks": [],
          "warmupTasks": tasks_exp([("1", [2])])}),
    ]
    lists = [[("0", [0, 1], [2, 2])], [], [("1", [3])], [], [("2", [0])], []]
    body = i32(2) + i32(1) + i8(2) + b"".join(tasks(x, epochs=True) for x in lists)
    names = ["activeTasks", "standbyTasks", "warmupTasks", "activeTasksPendingRevocation",
             "standbyTasksPendingRevocation", "warmupTasksPendingRevocation"]
    out.append((key(22, "st", "p-1"), v0(body + tagged({})),
                {"groupId": "st", "memberId": "p-1"},
                {"memberEpoch": 2, "previousMemberEpoch": 1, "state": 2,
                 **{n: tasks_exp(x, epochs=True) for n, x in zip(names, lists)}}))
    sub = (cstring("0") + cstrings(["in"]) + cstrings([]) +
           carr([("st-store-changelog", 0, 0, [("cleanup.policy", "compact")])],
                lambda t: topic_info(*t))
           + cstrings(["st-rep"]) + carr([("st-rep", 4, 1, [])], lambda t: topic_info(*t))
           + carr([([0], [], [0])], lambda g: carr(g[0], i16) + carr(g[1], i16)
                  + carr(g[2], i16) + tagged({}))
           + tagged({}))
    out.append((key(23, "st"), v0(i32(1) + uvarint(2) + sub + tagged({})), {"groupId": "st"},
                {"epoch": 1, "subtopologies": [{
                    "subtopologyId": "0", "sourceTopics": ["in"], "sourceTopicRegex": [],
                    "stateChangelogTopics": [{
                        "name": "st-store-changelog", "partitions": 0,
                        "replicationFactor": 0,
                        "topicConfigs": kv_exp([("cleanup.policy", "compact")])}],
                    "repartitionSinkTopics": ["st-rep"],
                    "repartitionSourceTopics": [{
                        "name": "st-rep", "partitions": 4, "replicationFactor": 1,
                        "topicConfigs": []}],
                    "copartitionGroups": [{"sourceTopics": [0], "sourceTopicRegex": [],
                                           "repartitionSourceTopics": [0]}]}]}))
    return out


def modern_records():
    """``[(key, value, expected key fields, expected value fields)]`` of every type."""
    return consumer_records() + share_records() + streams_records()

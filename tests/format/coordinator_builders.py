"""Keys and values of ``__consumer_offsets`` / ``__transaction_state`` records built by
hand with ``struct``, from the facts of Kafka's schema JSONs (group-coordinator and
transaction-coordinator ``common/message/*.json``, clients' ConsumerProtocol*.json) --
independent of the decoders under test.

:func:`every_version` returns ``[(key, value, expected)]`` covering each key type and
value version Kafka has written; ``expected`` is what a decoder must find, in plain
Python (snake_case like our tables).
"""
from __future__ import annotations

import struct

# ---- primitives -----------------------------------------------------------------------------


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def cstring(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def byts(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def cbytes(b: bytes | None) -> bytes:
    return uvarint(0) if b is None else uvarint(len(b) + 1) + b


def tagged(fields: dict[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def int32s(values, compact=False) -> bytes:
    n = uvarint(len(values) + 1) if compact else i32(len(values))
    return n + b"".join(i32(v) for v in values)


# ---- consumer protocol ----------------------------------------------------------------------

def topic_partitions(tps) -> bytes:
    return i32(len(tps)) + b"".join(string(t) + int32s(ps) for t, ps in tps)


def subscription(version, topics, user_data=None, owned=(), generation=-1, rack=None):
    out = i16(version) + i32(len(topics)) + b"".join(string(t) for t in topics)
    out += byts(user_data)
    if version >= 1:
        out += topic_partitions(owned)
    if version >= 2:
        out += i32(generation)
    if version >= 3:
        out += string(rack)
    return out


def assignment(version, tps, user_data=None):
    return i16(version) + topic_partitions(tps) + byts(user_data)


# ---- __consumer_offsets ---------------------------------------------------------------------

def commit_key(group, topic, partition, key_type=1):
    return i16(key_type) + string(group) + string(topic) + i32(partition)


def commit_value(version, offset, metadata, commit_ts, *, leader_epoch=-1, expire_ts=-1,
                 topic_id: bytes | None = None):
    flex = version >= 4
    out = i16(version) + i64(offset)
    if version >= 3:
        out += i32(leader_epoch)
    out += cstring(metadata) if flex else string(metadata)
    out += i64(commit_ts)
    if version == 1:
        out += i64(expire_ts)
    if flex:
        out += tagged({0: topic_id} if topic_id is not None else {})
    return out


def group_key(group):
    return i16(2) + string(group)


def group_value(version, protocol_type, generation, protocol, leader, members,
                state_ts=-1):
    flex = version >= 4
    s = cstring if flex else string
    b = cbytes if flex else byts
    out = i16(version) + s(protocol_type) + i32(generation) + s(protocol) + s(leader)
    if version >= 2:
        out += i64(state_ts)
    out += uvarint(len(members) + 1) if flex else i32(len(members))
    for m in members:
        out += s(m["member_id"])
        if version >= 3:
            out += s(m.get("group_instance_id"))
        out += s(m["client_id"]) + s(m["client_host"])
        if version >= 1:
            out += i32(m["rebalance_timeout"])
        out += i32(m["session_timeout"]) + b(m["subscription"]) + b(m["assignment"])
        if flex:
            out += tagged({})
    if flex:
        out += tagged({})
    return out


# ---- __transaction_state --------------------------------------------------------------------

def txn_key(tid):
    return i16(0) + string(tid)


def txn_value(version, pid, epoch, timeout, status, partitions, last_update, start, *,
              tags: dict[int, bytes] | None = None):
    flex = version >= 1
    out = i16(version) + i64(pid) + i16(epoch) + i32(timeout) + i8(status)
    if partitions is None:
        out += uvarint(0) if flex else i32(-1)
    else:
        out += uvarint(len(partitions) + 1) if flex else i32(len(partitions))
        for t, ps in partitions:
            out += (cstring(t) + int32s(ps, compact=True) + tagged({})) if flex else \
                (string(t) + int32s(ps))
    out += i64(last_update) + i64(start)
    if flex:
        out += tagged(tags or {})
    return out


# ---- a record of every version --------------------------------------------------------------

TOPIC_ID = bytes(range(16))


def _member(i, version, consumer=True):
    sub = subscription(min(i, 3), [f"t{i}", "shared"], user_data=b"u" if i % 2 else None,
                       owned=[("shared", [i])], generation=7 + i, rack=f"r{i}") \
        if consumer else b"\x00\x01raw-subscription"
    asg = assignment(min(i, 3), [("shared", [i, i + 10])], user_data=b"" if i else None) \
        if consumer else b"raw-assignment"
    return {"member_id": f"m{i}", "group_instance_id": f"inst{i}" if version >= 3 else None,
            "client_id": f"c{i}", "client_host": f"/10.0.0.{i}",
            "rebalance_timeout": 30000 + i if version >= 1 else -1,
            "session_timeout": 10000 + i, "subscription": sub, "assignment": asg,
            "subscribed_topics": [f"t{i}", "shared"] if consumer else None,
            "owned_partitions": ([{"topic": "shared", "partitions": [i]}]
                                 if min(i, 3) >= 1 else []) if consumer else None,
            "assigned_partitions": [{"topic": "shared", "partitions": [i, i + 10]}]
            if consumer else None}


def commit_records():
    """``[(key, value, expected commit row)]``: key types 0 and 1, values v0..v4."""
    out = []
    for v in range(5):
        for key_type in (0, 1) if v == 0 else (1,):
            group = f"g-v{v}-k{key_type}"
            exp = {"group": group, "topic": "orders", "partition": v, "offset": 100 + v,
                   "leader_epoch": 5 if v >= 3 else -1, "metadata": f"meta{v}",
                   "commit_timestamp": 1_700_000_000_000 + v,
                   "expire_timestamp": 1_800_000_000_000 if v == 1 else -1,
                   "topic_id": "AAECAwQFBgcICQoLDA0ODw" if v == 4 else None,
                   "key_version": key_type, "value_version": v}
            value = commit_value(v, 100 + v, f"meta{v}", 1_700_000_000_000 + v,
                                 leader_epoch=5, expire_ts=1_800_000_000_000,
                                 topic_id=TOPIC_ID if v == 4 else None)
            out.append((commit_key(group, "orders", v, key_type), value, exp))
    return out


def group_records():
    """``[(key, value, expected group row)]``: GroupMetadataValue v0..v4, consumer
    members (subscription/assignment v0..v3) and a non-consumer group."""
    out = []
    for v in range(5):
        members = [_member(i, v) for i in range(4)]
        value = group_value(v, "consumer", 3 + v, "range", "m0", members,
                            state_ts=1_700_000_000_500)
        exp = {"group": f"grp-v{v}", "protocol_type": "consumer", "generation": 3 + v,
               "protocol": "range", "leader": "m0",
               "current_state_timestamp": 1_700_000_000_500 if v >= 2 else -1,
               "members": members, "key_version": 2, "value_version": v}
        out.append((group_key(f"grp-v{v}"), value, exp))
    members = [_member(1, 3, consumer=False)]
    value = group_value(3, "connect", 1, None, None, members, state_ts=5)
    out.append((group_key("connect-grp"), value,
                {"group": "connect-grp", "protocol_type": "connect", "generation": 1,
                 "protocol": None, "leader": None, "current_state_timestamp": 5,
                 "members": members, "key_version": 2, "value_version": 3}))
    return out


def txn_records():
    """``[(key, value, expected transaction row)]``: TransactionLogValue v0 and v1 (with
    and without tagged fields, null partitions)."""
    parts = [("orders", [0, 1]), ("payments", [2])]
    exp_parts = [{"topic": "orders", "partitions": [0, 1]},
                 {"topic": "payments", "partitions": [2]}]
    base = {"producer_id": 4000, "producer_epoch": 2, "timeout_ms": 60000,
            "last_update_timestamp": 1_700_000_001_000,
            "start_timestamp": 1_700_000_000_900, "key_version": 0}
    return [
        (txn_key("tx-v0"), txn_value(0, 4000, 2, 60000, 1, parts, 1_700_000_001_000,
                                     1_700_000_000_900),
         {**base, "transactional_id": "tx-v0", "state": "Ongoing", "partitions": exp_parts,
          "previous_producer_id": -1, "next_producer_id": -1, "next_producer_epoch": -1,
          "client_transaction_version": 0, "value_version": 0}),
        (txn_key("tx-v1"), txn_value(1, 4000, 2, 60000, 4, None, 1_700_000_001_000,
                                     1_700_000_000_900),
         {**base, "transactional_id": "tx-v1", "state": "CompleteCommit",
          "partitions": None, "previous_producer_id": -1, "next_producer_id": -1,
          "next_producer_epoch": -1, "client_transaction_version": 0,
          "value_version": 1}),
        (txn_key("tx-v1-tags"), txn_value(1, 4000, 2, 60000, 2, parts, 1_700_000_001_000,
                                          1_700_000_000_900,
                                          tags={0: i64(3999), 1: i64(4001), 2: i16(2),
                                                3: i16(0)}),
         {**base, "transactional_id": "tx-v1-tags", "state": "PrepareCommit",
          "partitions": exp_parts, "previous_producer_id": 3999,
          "next_producer_id": 4001, "next_producer_epoch": 0,
          "client_transaction_version": 2, "value_version": 1}),
    ]

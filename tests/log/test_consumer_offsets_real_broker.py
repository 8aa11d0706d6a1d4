"""``__consumer_offsets`` of the real-broker fixtures (Kafka 0.10 magic 1, 2.7.1
compacted, 3.x, KRaft 3.7) decodes to the groups and offsets that an independent
decoding gives: the one below, written with ``struct`` from Kafka's schema definitions
(OffsetCommitKey/Value, GroupMetadataKey/Value, ConsumerProtocolAssignment), over the
raw records the generic record reader returns. The fixtures are referenced in place."""
from __future__ import annotations

import struct

import pytest

from spark_kafkalog.log import read_group_state, read_table

from tests.conftest import REAL_BROKER as FIXTURES  # noqa: E402  (referenced in place)
LOG_DIRS = ["kafka-0.10-magic1", "donaldy-kafka-2.7.1", "seanorth-kafka-server",
            "niloufar-ldi-poc"]


class _Buf:
    def __init__(self, data: bytes):
        self.d, self.p = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v

    def s(self):
        n = self.take(">h")
        if n < 0:
            return None
        v = self.d[self.p:self.p + n].decode()
        self.p += n
        return v

    def b(self):
        n = self.take(">i")
        v = self.d[self.p:self.p + n] if n >= 0 else None
        self.p += max(n, 0)
        return v


def kafka_schema_decode(key: bytes, value: bytes | None):
    """(kind, key tuple, fields or None) from the schemas' field lists."""
    k = _Buf(key)
    ktype = k.take(">h")
    if ktype in (0, 1):
        kt = (k.s(), k.s(), k.take(">i"))
        if value is None:
            return "commit", kt, None
        v = _Buf(value)
        ver = v.take(">h")
        assert ver <= 3, "the fixtures hold no flexible versions"
        off = v.take(">q")
        epoch = v.take(">i") if ver >= 3 else -1
        meta = v.s()
        ts = v.take(">q")
        return "commit", kt, {"offset": off, "leader_epoch": epoch, "metadata": meta,
                              "commit_timestamp": ts}
    assert ktype == 2
    kt = k.s()
    if value is None:
        return "group", kt, None
    v = _Buf(value)
    ver = v.take(">h")
    ptype, gen, proto, leader = v.s(), v.take(">i"), v.s(), v.s()
    if ver >= 2:
        v.take(">q")
    members = []
    for _ in range(v.take(">i")):
        mid = v.s()
        if ver >= 3:
            v.s()
        v.s(), v.s()
        if ver >= 1:
            v.take(">i")
        v.take(">i")
        v.b()
        a = _Buf(v.b())
        a.take(">h")
        assigned = []
        for _t in range(a.take(">i")):
            topic = a.s()
            assigned.append((topic, [a.take(">i") for _p in range(a.take(">i"))]))
        members.append((mid, assigned))
    return "group", kt, {"protocol_type": ptype, "generation": gen, "protocol": proto,
                         "leader": leader, "members": members}


def independent_state(logdir):
    table = read_table(str(logdir), "__consumer_offsets", isolation_level="read_committed")
    commits, groups = {}, {}
    for row in table.select(["key", "value"]).to_pylist():
        kind, key, fields = kafka_schema_decode(row["key"], row["value"])
        store = commits if kind == "commit" else groups
        store.pop(key, None)
        if fields is not None:
            store[key] = fields
    return table.num_rows, commits, groups


@pytest.mark.parametrize("name", LOG_DIRS)
def test_fixture_consumer_offsets_match_an_independent_decoding(name):
    logdir = FIXTURES / name
    records, commits, groups = independent_state(logdir)
    state = read_group_state(str(logdir))
    assert state.records == records
    ours = {(r["group"], r["topic"], r["partition"]):
            {k: r[k] for k in ("offset", "leader_epoch", "metadata", "commit_timestamp")}
            for r in state.commits().to_pylist()}
    assert ours == commits
    ours_groups = {
        r["group"]: {"protocol_type": r["protocol_type"], "generation": r["generation"],
                     "protocol": r["protocol"], "leader": r["leader"],
                     "members": [(m["member_id"],
                                  [(tp["topic"], tp["partitions"])
                                   for tp in m["assigned_partitions"] or []])
                                 for m in r["members"]]}
        for r in state.groups().to_pylist()}
    assert ours_groups == groups
    assert state.other_records().num_rows == 0


def test_fixtures_hold_what_the_comparison_needs():
    """Guards the oracle: commits and groups with assignments are really there."""
    found = {name: independent_state(FIXTURES / name) for name in LOG_DIRS}
    assert sum(len(c) for _n, c, _g in found.values()) >= 7
    assert any(m[1] for _n, _c, g in found.values() for grp in g.values()
               for m in grp["members"])
    assert found["kafka-0.10-magic1"][1][("GroupA", "foo", 0)]["offset"] == 204


def test_every_record_of_the_fixtures_is_kept_with_all_records():
    state = read_group_state(str(FIXTURES / "kafka-0.10-magic1"), latest=False)
    commits = state.commits()
    assert commits.num_rows + state.groups().num_rows == state.records == 856
    offsets = commits["record_offset"].to_pylist()
    assert offsets == sorted(offsets)


def test_aborted_transactional_offset_commits_are_left_out(tmp_path):
    """Offsets a transactional producer committed (sendOffsetsToTransaction) count only
    when its transaction committed, as the group coordinator applies them."""
    from tests.format import coordinator_builders as cb
    from tests.log.logbuilder import LogDirBuilder, rec

    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("__consumer_offsets", 0, base_timestamp=1_700_000_000_000)
    key = cb.commit_key("eos", "orders", 0)
    p.append([rec(key, cb.commit_value(3, 10, "", 1))])
    txn = p.begin_txn(producer_id=7)
    p.append([rec(key, cb.commit_value(3, 20, "", 2))], txn=txn)
    p.end_txn(txn, commit=False)
    txn = p.begin_txn(producer_id=7, producer_epoch=1)
    p.append([rec(cb.commit_key("eos", "orders", 1), cb.commit_value(3, 30, "", 3))],
             txn=txn)
    p.end_txn(txn, commit=True)
    p.high_watermark = p.log_end_offset
    b.write()
    committed = {(r["partition"], r["offset"])
                 for r in read_group_state(b.uris()).commits().to_pylist()}
    assert committed == {(0, 10), (1, 30)}
    uncommitted = {(r["partition"], r["offset"]) for r in read_group_state(
        b.uris(), isolation_level="read_uncommitted").commits().to_pylist()}
    assert uncommitted == {(0, 20), (1, 30)}

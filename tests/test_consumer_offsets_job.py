"""``jobs/consumer_offsets.py``: the tables it writes, and ``--translate`` of committed
offsets through an offset map (built here with pyarrow, as jobs/copy_topic.py
``--offset-map`` writes it) on a re-partitioned copy and on a time-window copy, checked
record by record: every group resumes at the first record it had not consumed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_kafkalog.jobs import consumer_offsets as job
from spark_kafkalog.format import encode
from tests.format import coordinator_builders as cb
from tests.format import group_builders as gb

REPO = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000_000
OLD_PARTITIONS = 3
RECORDS = 40                     # per old partition


def write_consumer_offsets(logdir: Path, pairs) -> None:
    """A ``__consumer_offsets-0`` partition holding ``pairs`` (key, value), one ms apart."""
    d = logdir / "__consumer_offsets-0"
    d.mkdir(parents=True)
    t = pa.table({"key": pa.array([k for k, _v in pairs], pa.binary()),
                  "value": pa.array([v for _k, v in pairs], pa.binary()),
                  "timestamp": pa.array([T0 + i for i in range(len(pairs))], pa.int64())})
    (d / "00000000000000000000.log").write_bytes(encode(t))


def commits(group, offsets: dict[int, int], topic="orders"):
    return [(cb.commit_key(group, topic, p), cb.commit_value(3, c, "", T0))
            for p, c in offsets.items()]


def repartitioned_map(path: Path, new_partitions=2):
    """Old orders-0..2 (offsets 0..39 each, every 7th left out as by compaction)
    re-partitioned into ``new_partitions`` by key, the old partitions' records
    interleaved round robin, each old partition's order kept. Returns the rows."""
    rows = []
    next_offset = [0] * new_partitions
    for o in range(RECORDS):
        for p in range(OLD_PARTITIONS):
            if o % 7 == 3:
                continue                      # a compaction gap in the old log
            key = f"k{p}-{o % 5}".encode()
            q = zlib.crc32(key) % new_partitions
            rows.append({"topic": "orders", "partition": p, "offset": o,
                         "new_topic": "orders2", "new_partition": q,
                         "new_offset": next_offset[q]})
            next_offset[q] += 1
    write_map(path, rows)
    return rows


def write_map(path: Path, rows):
    path.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                        ("offset", pa.int64()), ("new_topic", pa.string()),
                        ("new_partition", pa.int32()), ("new_offset", pa.int64())])
    half = len(rows) // 2                       # two files: a dataset, as Spark writes
    pq.write_table(pa.Table.from_pylist(rows[:half], schema=schema), path / "part-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows[half:], schema=schema), path / "part-1.parquet")


def read_csv(path: Path) -> dict[tuple[str, int], int]:
    out = {}
    for line in path.read_text().splitlines():
        t, p, o = line.split(",")
        out[(t, int(p))] = int(o)
    return out


GROUPS = {
    "mid": {0: 10, 1: 25, 2: 3},        # somewhere in each partition (3 is a gap)
    "one-partition": {1: 17},            # partitions 0 and 2 never consumed
    "done": {0: 40, 1: 40, 2: 40},       # consumed everything
    "fresh": {0: 0, 1: 0, 2: 0},
}


def run_job(args) -> int:
    return job.main([*args, "--no-progress"])


def test_translation_on_a_repartitioned_copy_record_by_record(tmp_path, capsys):
    logdir = tmp_path / "old"
    pairs = []
    for g, offs in GROUPS.items():
        pairs += commits(g, offs)
    pairs += commits("other-topic", {0: 5}, topic="elsewhere")
    write_consumer_offsets(logdir, pairs)
    rows = repartitioned_map(tmp_path / "map")
    out = tmp_path / "out"
    assert run_job(["--path", str(logdir), "--translate", str(tmp_path / "map"),
                    "--output", str(out), "--summary-json", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert set(summary["translated"]["groups"]) == set(GROUPS)      # not other-topic
    again = {}
    for g, committed in GROUPS.items():
        new = read_csv(out / f"{g}.csv")
        assert set(new) == {("orders2", 0), ("orders2", 1)}
        for (t, q), pos in new.items():
            mine = sorted((r for r in rows if r["new_partition"] == q),
                          key=lambda r: r["new_offset"])
            consumed = [r["partition"] in committed and r["offset"] < committed[r["partition"]]
                        for r in mine]
            # every record before the new position was consumed, the one at it was not
            assert all(consumed[:pos]), (g, q, pos)
            if pos < len(mine):
                assert not consumed[pos], (g, q, pos)
            else:
                assert pos == len(mine)            # all consumed: the partition's end
            again[g] = again.get(g, 0) + sum(consumed[pos:])
    # consumed records after the new position (interleaved) are counted and reported
    for g in GROUPS:
        assert summary["translated"]["groups"][g]["redelivered"] == again[g]
    assert again["mid"] > 0 and again["done"] == 0 and again["fresh"] == 0
    # the gap at old orders-2 offset 3 is a record the copy does not hold: said so
    err = capsys.readouterr().err
    assert "group mid: orders-2 committed 3, a record the copy left out" in err
    assert f"group mid: {again['mid']} records it had consumed come after" in err
    assert summary["translated"]["notes"] == [
        line.removeprefix("consumer_offsets: ") for line in err.splitlines()
        if line.startswith("consumer_offsets: group ")]
    assert read_csv(out / "done.csv") == {("orders2", 0): sum(
        r["new_partition"] == 0 for r in rows), ("orders2", 1): sum(
        r["new_partition"] == 1 for r in rows)}
    assert read_csv(out / "fresh.csv") == {("orders2", 0): 0, ("orders2", 1): 0}


def test_translation_on_a_time_window_copy(tmp_path, capsys):
    """Offsets kept (same topic and partition), only old offsets 20..29 copied: a group
    before the window resumes at its first record, one past it at the copy's end, one
    inside it at the same record; the first two are reported."""
    logdir = tmp_path / "old"
    write_consumer_offsets(logdir, commits("before", {0: 12}) + commits("after", {0: 35})
                           + commits("inside", {0: 24}) + commits("edge", {0: 30}))
    rows = [{"topic": "orders", "partition": 0, "offset": o, "new_topic": "orders",
             "new_partition": 0, "new_offset": o} for o in range(20, 30)]
    write_map(tmp_path / "map", rows)
    out = tmp_path / "out"
    assert run_job(["--path", str(logdir), "--translate", str(tmp_path / "map"),
                    "--output", str(out)]) == 0
    assert (out / "before.csv").read_text() == "orders,0,20\n"
    assert (out / "after.csv").read_text() == "orders,0,30\n"
    assert (out / "inside.csv").read_text() == "orders,0,24\n"
    assert (out / "edge.csv").read_text() == "orders,0,30\n"
    captured = capsys.readouterr()
    assert "group before: orders-0 committed 12, a record the copy left out: it resumes " \
           "at the next copied record, old offset 20" in captured.err
    assert "group after: orders-0 committed 35, past the last copied record (29)" \
        in captured.err
    assert "group inside" not in captured.err and "group edge" not in captured.err
    assert "translated 4 groups (4 partitions) through 10 mapped records" in captured.out
    assert "2 notes on stderr" in captured.out


def kip848_group():
    """A KIP-848 consumer group's records (tests/format/group_builders.py): group
    epoch, one member's metadata and current assignment."""
    wanted = [(3, {"groupId": "cg"}), (5, {"groupId": "cg", "memberId": "m-1"}),
              (8, {"groupId": "cg", "memberId": "m-1"})]
    return [next((k, v) for k, v, ek, _v in gb.modern_records()
                 if k[:2] == cb.i16(t) and ek == key) for t, key in wanted]


def test_tables_latest_as_of_and_all_records(tmp_path):
    logdir = tmp_path / "old"
    member = cb._member(1, 3)
    pairs = (commits("g", {0: 5}) + [(cb.group_key("g"), cb.group_value(
        3, "consumer", 2, "range", "m1", [member]))] + commits("g", {0: 9})
        + [(cb.commit_key("g", "orders", 0), None)] + commits("h", {1: 4})
        + kip848_group() + [(cb.i16(99) + cb.string("future"), b"\x00\x00")])
    write_consumer_offsets(logdir, pairs)
    out = tmp_path / "latest"
    assert run_job(["--path", str(logdir), "--output", str(out),
                    "--summary-json", str(tmp_path / "s.json")]) == 0
    latest = pq.read_table(out / "commits.parquet").to_pylist()
    assert [(r["group"], r["partition"], r["offset"]) for r in latest] == [("h", 1, 4)]
    groups = pq.read_table(out / "groups.parquet").to_pylist()
    assert groups[0]["members"][0]["assigned_partitions"] == [
        {"topic": "shared", "partitions": [1, 11]}]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["other_record_types"] == {"unknown type 99": 1}
    assert summary["record_types"] == {
        "OffsetCommit": 4, "GroupMetadata": 1, "ConsumerGroupMetadata": 1,
        "ConsumerGroupMemberMetadata": 1, "ConsumerGroupCurrentMemberAssignment": 1,
        "unknown type 99": 1}
    [modern] = pq.read_table(out / "consumer_groups.parquet").to_pylist()
    assert (modern["group"], modern["group_epoch"], [
        (m["member_id"], m["member_epoch"], m["state"], m["client_id"],
         [p["partitions"] for p in m["assigned_partitions"]]) for m in modern["members"]]) \
        == ("cg", 5, [("m-1", 5, "STABLE", "client-1", [[0, 1]])])
    kinds = pq.read_table(out / "group_records.parquet").column("name").to_pylist()
    assert kinds == ["ConsumerGroupMetadata", "ConsumerGroupMemberMetadata",
                     "ConsumerGroupCurrentMemberAssignment"]
    assert summary["consumer_groups"] == 1
    # as of the third record (T0 + 2): g's second commit, 9
    out = tmp_path / "asof"
    assert run_job(["--path", str(logdir), "--output", str(out), "--format", "json",
                    "--as-of", str(T0 + 2)]) == 0
    rows = [json.loads(x) for x in (out / "commits.jsonl").read_text().splitlines()]
    assert [(r["group"], r["offset"]) for r in rows] == [("g", 9)]
    out = tmp_path / "all"
    assert run_job(["--path", str(logdir), "--output", str(out), "--all-records"]) == 0
    every = pq.read_table(out / "commits.parquet").to_pylist()
    assert [(r["offset"], r["deleted"]) for r in every] == [(5, False), (9, False),
                                                            (None, True), (4, False)]


def test_a_spark_written_map_partitioned_by_topic(tmp_path):
    """A map as Spark writes it: partitionBy("topic") directories, _SUCCESS and .crc."""
    logdir = tmp_path / "old"
    write_consumer_offsets(logdir, commits("g", {0: 3}))
    m = tmp_path / "map"
    (m / "topic=orders").mkdir(parents=True)
    pq.write_table(pa.table({"partition": pa.array([0] * 5, pa.int32()),
                             "offset": pa.array(range(5), pa.int64()),
                             "new_topic": ["orders"] * 5,
                             "new_partition": pa.array([0] * 5, pa.int32()),
                             "new_offset": pa.array(range(100, 105), pa.int64())}),
                   m / "topic=orders" / "part-0.parquet")
    (m / "_SUCCESS").write_text("")
    (m / "topic=orders" / ".part-0.parquet.crc").write_bytes(b"\x00")
    assert run_job(["--path", str(logdir), "--translate", str(m),
                    "--output", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "g.csv").read_text() == "orders,0,103\n"


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    logdir = tmp_path / "old"
    write_consumer_offsets(logdir, commits("g", {0: 1}))
    bad = tmp_path / "badmap"
    bad.mkdir()
    pq.write_table(pa.table({"topic": ["orders"], "offset": [1]}), bad / "x.parquet")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args, reason in (
            (["--translate", str(bad)], "has no column(s) partition, new_topic"),
            (["--translate", str(tmp_path / "nothing")], "nothing does not exist"),
            (["--as-of", "yesterday"], "--as-of: 'yesterday' is neither")):
        proc = subprocess.run([sys.executable, str(REPO / "jobs" / "consumer_offsets.py"),
                               "--path", str(logdir), "--output", str(tmp_path / "o"),
                               "--no-progress", *args],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("consumer_offsets: ")
        assert reason in lines[0]
    (tmp_path / "empty").mkdir()
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "consumer_offsets.py"),
                           "--path", str(tmp_path / "empty"), "--output", str(tmp_path / "o")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "__consumer_offsets" in proc.stderr


def test_help_has_an_example():
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "consumer_offsets.py"),
                           "--help"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and "Example:" in proc.stdout and "--translate" in proc.stdout


@pytest.mark.parametrize("group,name", [("plain-group_1.x", "plain-group_1.x.csv"),
                                        ("a/b c", "a%2Fb%20c.csv"), ("", "%00.csv")])
def test_group_file_names_are_safe(group, name):
    assert job.group_file_name(group) == name


# ---- a replaced output: old or new, never a mix ------------------------------------------

def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def run_command(args, faults: str | None = None) -> subprocess.CompletedProcess:
    """The job as a command (the fault spec is read at import, so a process of its own)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPARK_KAFKALOG_FAULTS", None)
    if faults:
        env["SPARK_KAFKALOG_FAULTS"] = faults
    return subprocess.run([sys.executable, str(REPO / "jobs" / "consumer_offsets.py"),
                           *args, "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=120)


def test_killed_at_every_file_operation_leaves_the_old_output_or_the_new(tmp_path):
    """SIGKILL before each file operation of a run (every create, write, fsync, rename and
    directory sync the job makes, ``SPARK_KAFKALOG_FAULTS=*@N=KILL``) over an existing
    output: the output is byte for byte the old one or the new one; the next run lands
    the new one and leaves nothing beside it."""
    import shutil

    logdir = tmp_path / "logs"
    write_consumer_offsets(logdir, commits("g", {0: 5, 1: 7}) + commits("h", {2: 4})
                           + kip848_group())
    out, saved = tmp_path / "offsets", tmp_path / "saved-old"
    # the old output: another run's (JSON lines, the state as of the first record)
    assert run_command(["--path", str(logdir), "--output", str(out), "--format", "json",
                        "--as-of", str(T0)]).returncode == 0
    old = tree(out)
    shutil.copytree(out, saved)
    reference = tmp_path / "reference"
    assert run_command(["--path", str(logdir), "--output", str(reference)]).returncode == 0
    new = tree(reference)
    assert set(old) == {f"{t}.jsonl" for t in job.OUTPUT_TABLES[:-1]}
    assert set(new) == {f"{t}.parquet" for t in job.OUTPUT_TABLES[:-1]} and old != new
    argv = ["--path", str(logdir), "--output", str(out)]
    kills, landed = 0, 0
    for n in range(1, 400):
        proc = run_command(argv, faults=f"*@{n}=KILL")
        if proc.returncode == 0:
            break
        assert proc.returncode == -9, (n, proc.stderr)
        kills += 1
        now = tree(out)
        assert now in (old, new), f"killed before operation {n}: a mix of old and new"
        landed += now == new
        shutil.rmtree(out)                      # the old output again, for the next point;
        shutil.copytree(saved, out)             # what the killed run left beside it stays
    else:
        pytest.fail("the job never completed")
    # five files, each opened for its fsync and fsynced, then the directory's fsync and
    # the swap
    assert kills >= 5 * 2 + 2, kills
    assert landed >= 1                          # killed after the swap: the new one stands
    assert tree(out) == new
    assert [n for n in os.listdir(tmp_path) if ".kafkalog-" in n] == []


def test_an_output_holding_other_files_is_refused_unchanged(tmp_path):
    logdir = tmp_path / "logs"
    write_consumer_offsets(logdir, commits("g", {0: 5}))
    out = tmp_path / "backup"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    proc = run_command(["--path", str(logdir), "--output", str(out)])
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("consumer_offsets: ") and "'notes.txt'" in line
    assert tree(out) == {"notes.txt": b"mine"}

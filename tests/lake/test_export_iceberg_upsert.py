"""``--mode upsert``: a compacted topic exported as the latest value per key. The oracle is
Kafka's documented compaction rules applied here, to the records the log builder itself
encoded (tests/log/logbuilder.py, not our reader): per partition, the last record of a
key by offset; a tombstone (null value) removes the key; records without a key and
records of aborted transactions are gone. The table is read back by Apache Iceberg's
Java library (IcebergReader.java) and by pyiceberg, row for row; and compared with our
offline compaction (jobs/compact.py) of the same topic read back with read_table."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_kafkalog.errors import TableError
from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import NEXT_OFFSETS_KEY, OFFSETS_KEY, export_topics, open_catalog
from spark_kafkalog.lake.iceberg_table import MODE_KEY, RawRecords, open_table
from tests.lake.oracle import JavaReader, row_tuples
from tests.log.logbuilder import LogDirBuilder, rec

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000
IDENT = "kafka.t"


def _batch(rng: random.Random, n: int, ts: int, keys: int = 12) -> list:
    """``n`` records over a small key space: updates, tombstones (1 in 5), a record
    without a key (1 in 9), headers on some."""
    out = []
    for i in range(n):
        k = rng.randrange(keys)
        key = None if rng.random() < 1 / 9 else b"k%d" % k
        value = None if rng.random() < 0.2 else b"v%d-%d-" % (k, rng.randrange(10**6)) + \
            b"x" * rng.randrange(40)
        hdrs = [("h", b"%d" % i)] if i % 3 == 0 else []
        out.append(rec(key, value, ts=ts + i, headers=hdrs))
    return out


def _grow(b: LogDirBuilder, rng: random.Random, n: int, ts: int) -> None:
    """``n`` more records in each partition of ``t``: a plain batch, an aborted
    transaction (its keys must never show) and a committed one."""
    for pid, (_, p) in enumerate(b.parts):
        p.append(_batch(rng, n, ts), compression=rng.choice(["none", "gzip", "lz4"]))
        aborted = p.begin_txn(producer_id=100 + pid)
        p.append([rec(b"k%d" % i, b"aborted-%d" % i, ts=ts + n) for i in range(4)],
                 txn=aborted)
        p.end_txn(aborted, commit=False)
        kept = p.begin_txn(producer_id=200 + pid)
        p.append(_batch(rng, 5, ts + n + 1), txn=kept)
        p.end_txn(kept, commit=True)
        p.high_watermark = p.log_end_offset
    b.write()


def _log(root: Path, seed: int = 39, n: int = 40) -> tuple[LogDirBuilder, random.Random]:
    rng = random.Random(seed)
    b = LogDirBuilder(root)
    for q in range(2):
        b.partition("t", q)
    _grow(b, rng, n, T0)
    return b, rng


def compacted(b: LogDirBuilder, below_active: bool = False,
              topics=None) -> list[tuple]:
    """Kafka's compaction rules over the builder's own records (read_committed: the
    aborted ones gone), as :func:`row_tuples` gives rows; ``below_active``: of the
    records below each partition's active (last) segment only."""
    out = []
    for _, p in b.parts:
        if topics is not None and p.topic not in topics:
            continue
        latest: dict = {}
        end = p.segments[-1][0] if below_active else p.log_end_offset
        for r in sorted(p.expected_rows("read_committed", end=end), key=lambda r: r.offset):
            if r.key is None:
                continue                    # the cleaner drops records without a key
            if r.value is None:
                latest.pop(r.key, None)     # a tombstone deletes the key
            else:
                latest[r.key] = r           # the last record of a key wins
        for r in latest.values():
            out.append((p.topic, p.partition, r.offset, r.timestamp * 1000,
                        r.timestamp_type, r.key.hex(), r.value.hex(),
                        tuple((k, None if v is None else v.hex()) for k, v in r.headers or ())))
    return sorted(out, key=lambda r: r[:3])


def _export(logs, wh: Path, topics=("t",), **kw):
    catalog = open_catalog(str(wh))
    shape = RawRecords("upsert")
    table = open_table(catalog, IDENT, shape, partition_by=kw.pop("partition_by", "day"))
    return export_topics(logs, list(topics), catalog, table, IDENT, shape=shape, **kw)


def _table(wh: Path):
    return open_catalog(str(wh)).load_table(IDENT)


def _py_rows(wh: Path):
    return row_tuples(_table(wh).scan().to_arrow())


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    return JavaReader(tmp_path_factory.mktemp("iceberg-reader"))


def test_runs_with_updates_and_deletes_equal_kafkas_compaction(tmp_path, java):
    """Three runs, keys updated and deleted across runs and within each: after every run
    the table read by pyiceberg (and at the end by Java) is the compaction of everything
    so far; each
    run is one snapshot with the summary keys; the identifier fields are declared."""
    b, rng = _log(tmp_path / "logs")
    wh = tmp_path / "wh"
    results = []
    for run in range(3):
        if run:
            _grow(b, rng, 30, T0 + run * 86_400_000)
        results.append(_export(b.uris(), wh, window_records=17))
        assert _py_rows(wh) == compacted(b), f"run {run}"
    head, rows = java.read_catalog(wh, IDENT)     # one JVM: the last state
    assert rows == compacted(b)
    assert [r.status for r in results] == ["committed"] * 3
    assert all(r.null_keys > 0 and r.tombstones > 0 for r in results)
    assert results[1].rows_removed > 0 and results[1].files_rewritten > 0
    snaps = head["snapshots"]
    assert len(snaps) == 3
    assert [s["operation"] for s in snaps] == ["append", "overwrite", "overwrite"]
    for s, r in zip(snaps, results):
        assert s["summary"]["kafkalog.run-id"] == r.run_id
        assert json.loads(s["summary"][OFFSETS_KEY]) == json.loads(json.dumps(
            r.summary()["offsets"]))
    ends = {str(q): p.log_end_offset for q, (_, p) in enumerate(b.parts)}
    assert json.loads(snaps[-1]["summary"][NEXT_OFFSETS_KEY]) == {"t": ends}
    assert head["identifierFields"] == ["key", "partition", "topic"]
    assert _table(wh).properties[MODE_KEY] == "upsert"
    # a re-run adds nothing and leaves the table as it is
    assert _export(b.uris(), wh).status == "nothing-new"
    assert _py_rows(wh) == compacted(b)


def test_one_run_over_everything_gives_the_same_table(tmp_path):
    """The table of three incremental runs equals the one a single run builds from the
    same log (within a run only the last record per key of the range matters)."""
    b, rng = _log(tmp_path / "logs")
    _export(b.uris(), tmp_path / "inc", window_records=9)
    for run in (1, 2):
        _grow(b, rng, 25, T0 + run * 86_400_000)
        _export(b.uris(), tmp_path / "inc", window_records=9)
    whole = _export(b.uris(), tmp_path / "one", window_records=1000)
    assert whole.files_rewritten == 0 and whole.rows == len(compacted(b))
    assert _py_rows(tmp_path / "one") == _py_rows(tmp_path / "inc") == compacted(b)


def _killed_run(logs, wh, kill_at, window) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.lake.killed_export", logs, str(wh),
                           IDENT, str(kill_at), str(window), "upsert"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def _kill_setup(tmp_path: Path, name: str):
    """A table one upsert run wrote, and a log grown since (updates and tombstones of
    keys the table holds)."""
    b, rng = _log(tmp_path / f"logs-{name}")
    _export(b.uris(), tmp_path / f"wh-{name}")
    _grow(b, rng, 30, T0 + 86_400_000)
    return b, tmp_path / f"wh-{name}"


def _check_killed_then_rerun(tmp_path, k, expect_point=None):
    b, wh = _kill_setup(tmp_path, str(k))
    out = _killed_run(b.uris(), wh, k, 11)
    assert out.returncode == -9, (k, out.stdout, out.stderr)
    again = _export(b.uris(), wh)
    assert again.status == ("nothing-new" if expect_point == "after-commit"
                            else "committed"), k
    assert _py_rows(wh) == compacted(b), f"killed at #{k} ({expect_point})"
    table = _table(wh)
    listed = {task.file.file_path for task in table.scan().plan_files()}
    assert listed <= {f"file://{p}" for p in wh.rglob("*.parquet")}


def test_killed_between_write_and_commit_then_rerun(tmp_path):
    """SIGKILL after the new and rewritten files are written, before the commit: the
    table is unchanged (the files are orphans) and the re-run leaves the compaction."""
    b, wh = _kill_setup(tmp_path, "dry")
    dry = _killed_run(b.uris(), wh, 0, 11)
    assert dry.returncode == 0, dry.stderr
    points = dry.stdout.split()
    assert points[0] == "planned" and points[-2:] == ["before-commit", "after-commit"]
    assert points.count("file-written") >= 1
    _check_killed_then_rerun(tmp_path, len(points) - 1, "before-commit")


@pytest.mark.slow
def test_sigkill_at_every_phase_then_rerun(tmp_path):
    b, wh = _kill_setup(tmp_path, "dry")
    points = _killed_run(b.uris(), wh, 0, 11).stdout.split()
    for k, point in enumerate(points, 1):
        _check_killed_then_rerun(tmp_path, k, point)


@pytest.mark.slow
def test_equal_to_our_offline_compaction(spark, tmp_path):
    """jobs/compact.py over a copy of the log (every segment inactive: the cleaner
    leaves the active one alone; two passes a delete.retention.ms apart, so tombstones
    are gone), read back with read_table: the same rows as the upsert table."""
    from spark_kafkalog.jobs import compact as job
    from spark_kafkalog.log import read_table

    b, rng = _log(tmp_path / "logs")
    _export(b.uris(), tmp_path / "wh", window_records=13)
    _grow(b, rng, 30, T0 + 86_400_000)
    for _, p in b.parts:
        p.append([rec(b"k0", b"last", ts=T0 + 2 * 86_400_000)])
        p.roll()                    # an active segment the cleaner may skip
        p.append([rec(b"k0", b"active", ts=T0 + 2 * 86_400_000 + 1)])
        p.high_watermark = p.log_end_offset
    b.write()
    _export(b.uris(), tmp_path / "wh", window_records=13)
    shutil.copytree(tmp_path / "logs", tmp_path / "copy")
    now = T0 + 10 * 86_400_000
    for clock in (now, now + 1000):
        job.compact(spark, job.parse_args(
            ["--path", str(tmp_path / "copy"), "--topic", "t", "--force", "--now", str(clock),
             "--set", "delete.retention.ms=1000", "--no-progress"]))
    cleaned = row_tuples(read_table(str(tmp_path / "copy"), "t"))
    active = {p.partition: p.segments[-1][0] for _, p in b.parts}
    assert [r for r in cleaned if r[2] < active[r[1]]] == compacted(b, below_active=True)
    # the active segment's records are not compacted: the rule applied to them here
    latest = {}
    for r in cleaned:
        latest[(r[1], r[5])] = r
    assert sorted(latest.values(), key=lambda r: r[:3]) == _py_rows(tmp_path / "wh") \
        == compacted(b)


def test_concurrent_runs_rewriting_the_same_file(tmp_path):
    """Runs on topics x and y at once, both rewriting the one data file that holds both
    topics' rows: one commits; the other's overwrite finds that file gone, deletes its
    own files and runs again from the new table. The table is both compactions."""
    import threading

    rng = random.Random(7)
    b = LogDirBuilder(tmp_path / "logs")
    for topic in ("x", "y"):
        b.partition(topic, 0)
    for _, p in b.parts:
        p.append(_batch(rng, 30, T0))
        p.high_watermark = p.log_end_offset
    b.write()
    wh = tmp_path / "wh"
    _export(b.uris(), wh, topics=("x", "y"), partition_by="none")
    assert len(list(_table(wh).scan().plan_files())) == 1
    for _, p in b.parts:
        p.append(_batch(rng, 30, T0 + 1000))
        p.high_watermark = p.log_end_offset
    b.write()
    barrier = threading.Barrier(2, timeout=60)
    results, lines, errors = {}, [], []

    def run(topic):
        first = []

        def fault(phase):
            if phase == "before-commit" and not first:
                first.append(phase)
                barrier.wait()
        try:
            results[topic] = _export(b.uris(), wh, topics=(topic,), fault=fault,
                                     progress=lines.append, partition_by="none")
        except BaseException as err:       # reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(t,)) for t in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert {r.status for r in results.values()} == {"committed"}
    assert any("removed a data file this run rewrites" in ln for ln in lines), lines
    assert _py_rows(wh) == compacted(b)
    listed = {task.file.file_path for task in _table(wh).scan().plan_files()}
    assert listed <= {f"file://{p}" for p in wh.rglob("*.parquet")}


def _job(tmp_path, *extra):
    argv = ["--path", str(tmp_path / "logs"), "--warehouse", str(tmp_path / "wh"),
            "--table", IDENT, "--no-progress", *extra]
    return run_job("export_iceberg", argv)


@pytest.mark.parametrize("first,second", [("append", "upsert"), ("upsert", "append")])
def test_job_refuses_the_other_mode_before_writing(tmp_path, capsys, first, second):
    _log(tmp_path / "logs")
    assert _job(tmp_path, "--mode", first) == 0
    before = _table(tmp_path / "wh").current_snapshot().snapshot_id
    files = set((tmp_path / "wh").rglob("*"))
    capsys.readouterr()
    assert _job(tmp_path, "--mode", second) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    hint = ("its rows are the topic's history" if first == "append" else
            "its rows are the latest value per key")
    assert line == (f"export_iceberg: TableError: table {IDENT} was created by --mode "
                    f"{first} ({hint}); --mode {second} needs a table of its own")
    assert _table(tmp_path / "wh").current_snapshot().snapshot_id == before
    assert set((tmp_path / "wh").rglob("*")) == files


def test_job_upsert_summary_and_refusals(tmp_path, capsys):
    b, _ = _log(tmp_path / "logs")
    assert _job(tmp_path, "--mode", "upsert", "--summary-json", str(tmp_path / "s.json")) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["mode"] == "upsert" and s["rows"] == len(compacted(b))
    assert s["records"] == sum(len(p.expected_rows("read_committed")) for _, p in b.parts)
    nulls = sum(1 for _, p in b.parts for r in p.expected_rows("read_committed")
                if r.key is None)
    assert s["null_keys"] == nulls > 0
    out = capsys.readouterr().out
    assert out.startswith(f"upserted {s['records']} records into {IDENT}: ")
    assert f"{nulls} records without a key skipped" in out
    for extra, says in ((["--isolation-level", "read_uncommitted"], "never an aborted"),):
        assert _job(tmp_path, "--mode", "upsert", *extra) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert says in line
    with pytest.raises(TableError, match="export it read_committed"):
        _export(b.uris(), tmp_path / "wh", isolation_level="read_uncommitted")


KEY_V1 = {"type": "record", "name": "K", "namespace": "shop",
          "fields": [{"name": "id", "type": "long"}]}
KEY_V2 = {"type": "record", "name": "K", "namespace": "shop",
          "fields": [{"name": "id", "type": "long"},
                     {"name": "region", "type": ["null", "string"], "default": None}]}


def test_typed_key_upsert_keeps_the_key_bytes_as_identifier(tmp_path, java):
    """--key-format registry: the key column is the decoded struct and the identifier is
    the key's bytes (``key_raw``), as compaction compares them — the same id framed
    under two schema ids is two keys. The table equals Kafka's rules over the raw keys;
    the structs are what fastavro wrote."""
    from tests.typed import registry_records as rr
    from tests.typed import typed_logs as tl

    def key(sid, schema, datum):
        return b"\x00" + sid.to_bytes(4, "big") + tl.avro(schema, datum)

    b = LogDirBuilder(tmp_path / "logs")
    reg = b.partition("_schemas", 0)
    reg.append([rec(rr.schema_key("t-key", 1), rr.schema_value("t-key", 1, 41,
                                                                tl.text(KEY_V1)), ts=T0),
                rec(rr.schema_key("t-key", 2), rr.schema_value("t-key", 2, 42,
                                                                tl.text(KEY_V2)), ts=T0)])
    k1, k2, k3 = (key(41, KEY_V1, {"id": i}) for i in (1, 2, 3))
    k1v2 = key(42, KEY_V2, {"id": 1, "region": "eu"})
    p = b.partition("t", 0)
    p.append([rec(k1, b"a", ts=T0), rec(k2, b"b", ts=T0 + 1), rec(k1, b"c", ts=T0 + 2),
              rec(k1v2, b"d", ts=T0 + 3), rec(None, b"no key", ts=T0 + 4)])
    for _, part in b.parts:
        part.high_watermark = part.log_end_offset
    b.write()
    argv = ["--topic", "t", "--mode", "upsert", "--key-format", "registry"]
    assert _job(tmp_path, *argv) == 0
    p.append([rec(k2, None, ts=T0 + 10), rec(k3, b"e", ts=T0 + 11), rec(k1, b"f", ts=T0 + 12)])
    p.high_watermark = p.log_end_offset
    b.write()
    assert _job(tmp_path, *argv) == 0
    want = compacted(b, topics=("t",))
    assert sorted((r[2], r[5], r[6]) for r in want) == [
        (3, k1v2.hex(), b"d".hex()), (6, k3.hex(), b"e".hex()), (7, k1.hex(), b"f".hex())]
    table = _table(tmp_path / "wh")
    schema = table.schema()
    assert sorted(schema.find_column_name(i) for i in schema.identifier_field_ids) == \
        ["key_raw", "partition", "topic"]
    got = table.scan().to_arrow().sort_by("offset")
    assert [(o, k.hex(), v.hex()) for o, k, v in zip(*(got.column(c).to_pylist() for c in
                                                      ("offset", "key_raw", "value")))] \
        == sorted((r[2], r[5], r[6]) for r in want)
    assert got.column("key").to_pylist() == [{"id": 1, "region": "eu"}, {"id": 3, "region": None},
                                             {"id": 1, "region": None}]
    head, rows = java.read_catalog(tmp_path / "wh", IDENT, raw=True)
    assert head["identifierFields"] == ["key_raw", "partition", "topic"]
    assert sorted((r["offset"], r["extra"]["key_raw"]) for r in rows) == \
        sorted((r[2], r[5]) for r in want)

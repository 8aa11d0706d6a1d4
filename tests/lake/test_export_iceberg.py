"""The Iceberg export: tables read back by Apache Iceberg's Java library (the oracle the
export did not use) and by pyiceberg, row for row equal to ``log.read_table`` of the same
offsets over logs built by tests/log/logbuilder.py (independent encoders); incremental
runs, SIGKILL at every phase then a re-run, two runs at once, retention past the table's
end, and the bad inputs refused before a file is written."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spark_kafkalog.errors import DataLossError, TableError
from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import NEXT_OFFSETS_KEY, OFFSETS_KEY, export_topics, open_catalog
from spark_kafkalog.lake.iceberg_table import RawRecords, open_table
from spark_kafkalog.log import read_table
from tests.lake.oracle import JavaReader, metadata_location, row_tuples
from tests.log.logbuilder import LogDirBuilder, build_rich_partition, sample_records

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400_000
T0 = 1_700_000_000_000
IDENT = "kafka.t"


def _log(root: Path, n: int = 80) -> LogDirBuilder:
    """Topic ``t``: two partitions over two days, headers, a gzip segment, a roll."""
    b = LogDirBuilder(root)
    for q in range(2):
        p = b.partition("t", q)
        p.append(sample_records(n // 2, b"a%d" % q, ts0=T0 + q * DAY, with_headers=True))
        p.roll()
        p.append(sample_records(n - n // 2, b"b%d" % q, ts0=T0 + 2 * DAY), compression="gzip")
        p.high_watermark = p.log_end_offset
    b.write()
    return b


def _grow(b: LogDirBuilder, n: int, tag: bytes) -> None:
    for (_, p) in b.parts:
        p.append(sample_records(n, tag, ts0=T0 + 3 * DAY, with_headers=True), compression="lz4")
        p.high_watermark = p.log_end_offset
    b.write()


def _expected(logs, topic="t", isolation="read_committed", **kw):
    return row_tuples(read_table(logs, topic, isolation_level=isolation, **kw))


def _export(logs, wh: Path, topics=("t",), **kw):
    catalog = open_catalog(str(wh))
    table = open_table(catalog, IDENT, RawRecords(), partition_by=kw.pop("partition_by", "day"))
    return export_topics(logs, list(topics), catalog, table, IDENT, **kw)


def _table(wh: Path):
    return open_catalog(str(wh)).load_table(IDENT)


def _py_rows(wh: Path):
    return row_tuples(_table(wh).scan().to_arrow())


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    return JavaReader(tmp_path_factory.mktemp("iceberg-reader"))


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_rich_log_read_back_by_java_and_pyiceberg(tmp_path, java, isolation):
    """Every kind of batch (legacy, transactions with aborts, compaction gaps, a log start
    inside a segment, a high watermark below the log end) plus a second topic, under
    both isolation levels: what the Java library and pyiceberg read equals read_table's
    rows, and the summary holds each partition's range from the log start to the upper
    bound (the builder's own: last stable offset, or high watermark)."""
    logs = tmp_path / "logs"
    _, rich = build_rich_partition(logs)
    _log(tmp_path / "logs2")
    paths = f"{logs},{tmp_path / 'logs2'}"
    result = _export(paths, tmp_path / "wh", topics=("a.b-c_d", "t"), window_records=7,
                     partition_by="day,partition", isolation_level=isolation)
    expected = sorted(_expected(str(logs), "a.b-c_d", isolation) +
                      _expected(str(tmp_path / "logs2"), "t", isolation), key=lambda r: r[:3])
    assert result.status == "committed" and result.rows == len(expected) > 100
    assert _py_rows(tmp_path / "wh") == expected
    head, rows = java.read(metadata_location(tmp_path / "wh", IDENT))
    assert rows == expected
    assert "day(4)" in head["spec"] and "identity(2)" in head["spec"]
    assert "identity(2) ASC" in head["sortOrder"] and "identity(3) ASC" in head["sortOrder"]
    (snap,) = head["snapshots"]
    ranges = json.loads(snap["summary"][OFFSETS_KEY])
    assert ranges["a.b-c_d"] == {"0": list(rich.bounds(isolation))}
    assert ranges["t"] == {"0": [0, 80], "1": [0, 80]}
    assert int(snap["summary"]["added-records"]) == len(expected)


@pytest.mark.slow
def test_incremental_run_appends_exactly_the_new_records(tmp_path, java):
    b = _log(tmp_path / "logs")
    logs = b.uris()
    first = _export(logs, tmp_path / "wh", window_records=25)
    assert first.status == "committed" and first.rows == 160
    assert _export(logs, tmp_path / "wh").status == "nothing-new"
    _grow(b, 37, b"new")
    second = _export(logs, tmp_path / "wh", window_records=25)
    assert second.status == "committed" and second.rows == 74
    expected = _expected(logs)
    assert len(expected) == 234 and _py_rows(tmp_path / "wh") == expected
    head, rows = java.read_catalog(tmp_path / "wh", IDENT)     # Java's JdbcCatalog finds it
    assert rows == expected
    old, new = head["snapshots"]
    assert new["parent"] == old["id"]
    assert json.loads(new["summary"][OFFSETS_KEY]) == {"t": {"0": [80, 117], "1": [80, 117]}}
    assert json.loads(new["summary"][NEXT_OFFSETS_KEY]) == {"t": {"0": 117, "1": 117}}
    assert int(new["summary"]["added-records"]) == 74


def _killed_run(logs, wh, kill_at, window=45) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.lake.killed_export", logs, str(wh),
                           IDENT, str(kill_at), str(window)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("incremental", [False, True], ids=["fresh", "incremental"])
def test_sigkill_at_every_phase_then_rerun_is_exactly_once(tmp_path, incremental):
    """SIGKILL at each fault point (planned, after each data file, just before and just
    after the catalog commit) of a run in its own process; the re-run leaves every record
    exactly once, and the data files the killed run left are in no snapshot."""
    def setup(name):
        b = _log(tmp_path / f"logs-{name}", n=40 if incremental else 80)
        if incremental:         # the killed run appends to a table one run already wrote
            _export(b.uris(), tmp_path / f"wh-{name}")
            _grow(b, 20, b"more")
        return b.uris(), tmp_path / f"wh-{name}"

    window = 12 if incremental else 45       # at least three data files either way
    dry = _killed_run(*setup("dry"), 0, window)
    assert dry.returncode == 0, dry.stderr
    points = dry.stdout.split()
    assert points[0] == "planned" and points[-2:] == ["before-commit", "after-commit"]
    assert points.count("file-written") >= 3
    for k, point in enumerate(points, 1):
        logs, wh = setup(k)
        out = _killed_run(logs, wh, k, window)
        assert out.returncode == -9, (k, out.stdout, out.stderr)
        again = _export(logs, wh)
        assert again.status == ("nothing-new" if point == "after-commit" else "committed"), k
        assert _py_rows(wh) == _expected(logs), f"killed at {point} (#{k})"


def test_two_runs_at_once_export_each_record_once(tmp_path):
    """Both runs plan from the same table state and write their files; they then commit
    at the same moment (a barrier at before-commit): one commits, the other finds its
    ranges committed, deletes its files and says so."""
    b = _log(tmp_path / "logs")
    logs = b.uris()
    open_table(open_catalog(str(tmp_path / "wh")), IDENT, RawRecords())
    barrier = threading.Barrier(2, timeout=60)
    results, errors = [], []

    def run():
        def fault(phase):
            if phase == "before-commit":
                barrier.wait()
        try:
            results.append(_export(logs, tmp_path / "wh", window_records=50, fault=fault))
        except BaseException as err:       # reported below, with the other thread's
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(r.status for r in results) == ["already-exported", "committed"]
    loser = next(r for r in results if r.status == "already-exported")
    assert "concurrent run committed these offsets first" in loser.notes[0]
    assert _py_rows(tmp_path / "wh") == _expected(logs)
    table = _table(tmp_path / "wh")
    assert len(list(table.snapshots())) == 1
    listed = {task.file.file_path for task in table.scan().plan_files()}
    on_disk = {f"file://{p}" for p in (tmp_path / "wh").rglob("*.parquet")}
    assert on_disk == listed, "the loser's data files were left behind"


def test_runs_on_other_topics_at_once_both_commit(tmp_path):
    """A concurrent commit that touched other topics: the commit is retried on top of it
    and the next offsets hold both topics."""
    b = LogDirBuilder(tmp_path / "logs")
    for topic in ("x", "y"):
        p = b.partition(topic, 0)
        p.append(sample_records(20, topic.encode(), ts0=T0))
        p.high_watermark = p.log_end_offset
    b.write()
    open_table(open_catalog(str(tmp_path / "wh")), IDENT, RawRecords())
    barrier = threading.Barrier(2, timeout=60)
    results = {}

    def run(topic):
        first = []

        def fault(phase):           # the first commit of each: the retry must not wait
            if phase == "before-commit" and not first:
                first.append(phase)
                barrier.wait()
        results[topic] = _export(b.uris(), tmp_path / "wh", topics=(topic,), fault=fault)

    threads = [threading.Thread(target=run, args=(t,)) for t in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r.status for r in results.values()} == {"committed"}
    assert sorted(r.attempts for r in results.values()) == [1, 2]
    snap = _table(tmp_path / "wh").current_snapshot()
    assert json.loads(snap.summary[NEXT_OFFSETS_KEY]) == {"x": {"0": 20}, "y": {"0": 20}}
    assert _py_rows(tmp_path / "wh") == sorted(_expected(b.uris(), "x") + _expected(
        b.uris(), "y"), key=lambda r: r[:3])


def test_retention_past_the_table_is_data_loss(tmp_path):
    b = _log(tmp_path / "logs")
    logs = b.uris()
    _export(logs, tmp_path / "wh")
    first = _expected(logs)
    before = _table(tmp_path / "wh").current_snapshot().snapshot_id
    _grow(b, 30, b"gone")
    for (_, p) in b.parts:
        p.log_start_offset = 95          # 80..94 deleted before they were exported
    b.write()
    with pytest.raises(DataLossError, match=r"t-0: kafka.t ends at offset 80 but the log "
                                            r"starts at 95"):
        _export(logs, tmp_path / "wh")
    assert _table(tmp_path / "wh").current_snapshot().snapshot_id == before
    skipped = _export(logs, tmp_path / "wh", fail_on_data_loss=False)
    assert skipped.status == "committed" and skipped.rows == 2 * 15
    assert skipped.summary()["lost"] == [{"topic": "t", "partition": q, "from": 80, "to": 95}
                                         for q in (0, 1)]
    rows = _py_rows(tmp_path / "wh")
    assert rows == sorted(first + _expected(logs), key=lambda r: r[:3])
    assert [r[2] for r in rows if r[1] == 0] == list(range(80)) + list(range(95, 110))


def _job(tmp_path, *extra):
    argv = ["--path", str(tmp_path / "logs"), "--warehouse", str(tmp_path / "wh"),
            "--table", IDENT, "--no-progress", *extra]
    return run_job("export_iceberg", argv)


def _foreign_table(wh: Path, schema=None):
    """A table another tool wrote: our schema (or ``schema``), one append without our
    summary keys."""
    import pyarrow as pa

    catalog = open_catalog(str(wh))
    catalog.create_namespace_if_not_exists("kafka")
    shape = RawRecords()
    table = catalog.create_table(IDENT, schema=schema or shape.schema)
    if schema is None:
        table.append(pa.Table.from_pylist([], schema=shape.arrow_schema))
    return table


def test_job_refuses_a_foreign_table_unless_told_where_to_start(tmp_path, capsys):
    b = _log(tmp_path / "logs")
    _foreign_table(tmp_path / "wh")
    before = _table(tmp_path / "wh").current_snapshot().snapshot_id
    assert _job(tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"export_iceberg: TableError: {IDENT} has snapshots but no "
                   f"{NEXT_OFFSETS_KEY} in any of them (written by another tool?): give "
                   "--starting-offsets to say where the export starts"]
    assert _table(tmp_path / "wh").current_snapshot().snapshot_id == before
    assert _job(tmp_path, "--starting-offsets", '{"t":{"0":70,"1":75}}',
                "--summary-json", str(tmp_path / "s.json")) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["offsets"] == {"t": {"0": [70, 80], "1": [75, 80]}}
    assert [r[1:3] for r in _py_rows(tmp_path / "wh")] == \
        [(0, o) for o in range(70, 80)] + [(1, o) for o in range(75, 80)]
    del b


def test_job_refuses_a_table_whose_schema_cannot_take_ours(tmp_path, capsys):
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    _log(tmp_path / "logs")
    _foreign_table(tmp_path / "wh", Schema(NestedField(1, "topic", StringType(), True),
                                           NestedField(2, "partition", LongType(), True)))
    assert _job(tmp_path) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"export_iceberg: TableError: table {IDENT}: column 'partition' is long, "
                    "the export writes int")
    assert _table(tmp_path / "wh").current_snapshot() is None
    assert not list((tmp_path / "wh").rglob("*.parquet"))


def test_job_unreachable_catalog_is_one_line(tmp_path, capsys):
    _log(tmp_path / "logs")
    assert _job(tmp_path, "--catalog-uri", f"sqlite:///{tmp_path}/no/such/dir/c.db") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"export_iceberg: TableError: catalog sqlite:///{tmp_path}/no/"
                           "such/dir/c.db cannot be reached: OperationalError")
    assert not (tmp_path / "wh").exists() or not list((tmp_path / "wh").rglob("*.parquet"))


def test_job_summary_and_rerun(tmp_path, capsys):
    _log(tmp_path / "logs")
    assert _job(tmp_path, "--summary-json", str(tmp_path / "s.json")) == 0
    out = capsys.readouterr().out
    assert out.startswith("exported 160 rows (") and f"partitions to {IDENT}" in out
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["status"] == "committed" and s["rows"] == 160 and s["lost"] == []
    assert _job(tmp_path) == 0
    assert capsys.readouterr().out.strip() == \
        f"export_iceberg: {IDENT}: nothing new past the table's offsets"


def test_job_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exit_:
        run_job("export_iceberg", ["--help"])
    assert exit_.value.code == 0
    assert "kafkalog job export_iceberg --path" in capsys.readouterr().out


def test_headers_null_becomes_empty_list_even_over_hidden_values():
    """Null header lists are written as empty lists (Kafka's header count 0); a sliced
    array, and one whose null slots span values (legal Arrow), keep every other row."""
    import pyarrow as pa

    shape = RawRecords()
    hdr = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    values = pa.array([{"key": "a", "value": b"1"}, {"key": "hidden", "value": None},
                       {"key": "b", "value": None}], hdr.value_type)
    spanning = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3, 3]), values, type=hdr,
                                        mask=pa.array([False, True, False, True]))
    plain = pa.array([None, [{"key": "c", "value": b"2"}], None, []], hdr).slice(1, 3)
    for headers in (spanning, plain):
        rows = len(headers)
        window = pa.table({"key": pa.nulls(rows, pa.binary()),
                           "value": pa.nulls(rows, pa.binary()),
                           "topic": ["t"] * rows, "partition": pa.array([0] * rows, pa.int32()),
                           "offset": pa.array(range(rows), pa.int64()),
                           "timestamp": pa.array([0] * rows, pa.timestamp("us", "UTC")),
                           "timestampType": pa.array([0] * rows, pa.int32()),
                           "headers": headers})
        got = shape.to_arrow(window).column("headers").to_pylist()
        want = [h or [] for h in headers.to_pylist()]
        assert got == want


def test_job_refuses_a_conflicting_partition_spec(tmp_path, capsys):
    _log(tmp_path / "logs")
    assert _job(tmp_path, "--partition-by", "day,partition") == 0
    before = _table(tmp_path / "wh").current_snapshot().snapshot_id
    capsys.readouterr()
    assert _job(tmp_path, "--partition-by", "none") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"export_iceberg: TableError: table {IDENT} is partitioned by "
                    "day(timestamp), identity(partition); --partition-by none asks for "
                    "nothing: leave the flag out to write in the table's own spec")
    assert _table(tmp_path / "wh").current_snapshot().snapshot_id == before
    assert _job(tmp_path) == 0          # no flag: the table's own spec


def test_a_run_overtaken_in_part_starts_over_from_the_new_offsets(tmp_path):
    """Run A plans 0..80 and waits before its commit; the log grows; run B plans 0..117,
    writes, and commits right after A: A's commit holds part of B's ranges, so B deletes
    its files and exports again from 80. Every record once."""
    b = _log(tmp_path / "logs")
    logs = b.uris()
    open_table(open_catalog(str(tmp_path / "wh")), IDENT, RawRecords())
    a_ready, go_a, a_done = threading.Event(), threading.Event(), threading.Event()
    results = {}

    def fault_a(phase):
        if phase == "before-commit":
            a_ready.set()
            assert go_a.wait(60)
        elif phase == "after-commit":
            a_done.set()

    thread = threading.Thread(target=lambda: results.setdefault(
        "a", _export(logs, tmp_path / "wh", fault=fault_a)))
    thread.start()
    assert a_ready.wait(60)
    _grow(b, 37, b"late")
    lines, first = [], []

    def fault_b(phase):
        if phase == "before-commit" and not first:
            first.append(phase)
            go_a.set()
            assert a_done.wait(60)

    results["b"] = _export(logs, tmp_path / "wh", fault=fault_b, progress=lines.append)
    thread.join()
    assert results["a"].status == results["b"].status == "committed"
    assert [(r.start, r.end) for r in results["b"].ranges] == [(80, 117)] * 2
    assert any("a concurrent export committed part of t-0" in ln for ln in lines), lines
    assert _py_rows(tmp_path / "wh") == _expected(logs)
    table = _table(tmp_path / "wh")
    assert len(list(table.snapshots())) == 2
    listed = {task.file.file_path for task in table.scan().plan_files()}
    assert {f"file://{p}" for p in (tmp_path / "wh").rglob("*.parquet")} == listed


def test_offsets_without_records_still_move_the_table_on(tmp_path):
    """An aborted transaction's offsets (and its marker) hold no record under
    read_committed: the run commits an empty append whose summary moves the next offset
    past them, so the next run does not read them again."""
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("t", 0)
    txn = p.begin_txn(producer_id=7)
    p.append(sample_records(5, b"x", ts0=T0), txn=txn)
    p.end_txn(txn, commit=False)
    p.high_watermark = p.log_end_offset
    b.write()
    result = _export(b.uris(), tmp_path / "wh")
    assert result.status == "committed" and result.rows == 0 and result.files == 0
    snap = _table(tmp_path / "wh").current_snapshot()
    assert json.loads(snap.summary[NEXT_OFFSETS_KEY]) == {"t": {"0": 6}}
    assert _py_rows(tmp_path / "wh") == []
    assert _export(b.uris(), tmp_path / "wh").status == "nothing-new"


@pytest.mark.slow
def test_job_killed_at_random_moments_then_rerun_is_exactly_once(tmp_path):
    """The job as a command (its own process: catalog creation, table creation, windows,
    commit), SIGKILLed at seeded random moments of a run's length, each kill followed by
    the next killed run on the same table; a last run completes. Every record once."""
    import random
    import time

    b = LogDirBuilder(tmp_path / "logs")
    for q in range(3):
        p = b.partition("t", q)
        for i in range(6):
            p.append(sample_records(1000, b"r%d-%d" % (q, i), ts0=T0 + i * DAY // 2),
                     compression="zstd" if i % 2 else "none")
        p.high_watermark = p.log_end_offset
    b.write()
    cmd = [sys.executable, "-m", "spark_kafkalog.jobs.export_iceberg", "--path",
           b.uris(), "--warehouse", "", "--table", IDENT, "--window-records", "1500",
           "--no-progress"]

    def job(wh):
        cmd[6] = str(wh)
        with open(tmp_path / "job.err", "w") as err:      # the child keeps its own copy
            return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)

    t = time.perf_counter()
    assert job(tmp_path / "dry").wait(300) == 0, (tmp_path / "job.err").read_text()
    length = time.perf_counter() - t
    rng = random.Random(39)
    killed = 0
    for _ in range(6):
        proc = job(tmp_path / "wh")
        try:
            proc.wait(rng.uniform(0.3, 1.0) * length)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            killed += 1
    assert job(tmp_path / "wh").wait(300) == 0, (tmp_path / "job.err").read_text()
    assert killed >= 3
    assert _py_rows(tmp_path / "wh") == _expected(b.uris())


def test_job_exports_both_tiers(tmp_path):
    """A broker's log dir whose first three segments are only in the remote tier: with
    --remote-storage the table starts at offset 0, equal to read_table over both tiers
    and to the builder's own records."""
    from tests.log import tiered_builder

    p, full, bases = tiered_builder.build(tmp_path / "src")
    data, remote = tiered_builder.tier(tmp_path / "src", p, full, bases,
                                       data=tmp_path / "logs", remote=tmp_path / "remote")
    topic = tiered_builder.TOPIC
    assert _job(tmp_path, "--topic", topic, "--remote-storage", remote) == 0
    rows = row_tuples(_table(tmp_path / "wh").scan().to_arrow())
    want = row_tuples(read_table(data, topic, isolation_level="read_committed",
                                 remote_storage=remote))
    assert rows == want == row_tuples(p.expected_table("read_committed"))
    assert rows[0][2] == 0 < bases[3]          # the local tier starts at bases[3]

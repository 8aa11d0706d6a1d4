"""Every job refuses bad input before a Spark session starts, in one line, and leaves an
existing destination byte-identical (every file under it hashed before and after): a
missing source, an unknown topic, bad options (offsets JSON, windows, codecs, levels), a
destination topic or output that exists, a destination log dir whose ``.lock`` a running
broker holds (a second process locks it as Kafka does, ``FileChannel.tryLock``), a
corrupt segment, an internal topic as target. No Spark: ``jobkit.spark_session`` is
replaced by one that fails the test if a job gets that far."""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.errors import LockError
from spark_kafkalog.jobs import (_preflight, compact, consumer_offsets, copy_topic,
                                 export_parquet, import_files, log_report, retention)
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.read import seek
from spark_kafkalog.log.write import check_broker_lock
from tests.log.logbuilder import flip_byte

JOBS = {"export_parquet": export_parquet, "import_files": import_files,
        "copy_topic": copy_topic, "consumer_offsets": consumer_offsets,
        "compact": compact, "retention": retention, "log_report": log_report}


def tree_hash(root: Path) -> dict[str, str]:
    """Every file under ``root`` -> sha256 of its bytes (directories by their files)."""
    out = {}
    for d, _sub, files in os.walk(root):
        for f in files:
            p = Path(d) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("src") / "kafka-logs"
    make_sample_log(root, records=4_000, partitions=2, segment_bytes=32 << 10, days=2)
    return root


@pytest.fixture()
def no_spark(monkeypatch):
    @contextlib.contextmanager
    def refuse(*_a, **_k):
        raise AssertionError("the job started Spark before refusing its input")
        yield
    monkeypatch.setattr(jobkit, "spark_session", refuse)


@pytest.fixture()
def dest(tmp_path, logs) -> Path:
    """An existing destination log dir holding topic 'events' (a copy of the source)."""
    d = tmp_path / "dest"
    shutil.copytree(logs, d)
    return d


@pytest.fixture()
def parquet_out(tmp_path) -> Path:
    """An existing export: the files a previous run left."""
    out = tmp_path / "export"
    part = out / "topic=events" / "date=2024-01-01"
    part.mkdir(parents=True)
    (part / "part-00000.snappy.parquet").write_bytes(b"PAR1 old export PAR1")
    (out / "_SUCCESS").write_bytes(b"")
    return out


@contextlib.contextmanager
def broker_lock(root: Path):
    """``<root>/.lock`` held by another live process with an exclusive POSIX record lock,
    as a running broker holds it."""
    code = ("import fcntl, os, sys\n"
            f"fd = os.open({str(root / '.lock')!r}, os.O_RDWR | os.O_CREAT, 0o644)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('locked', flush=True)\nsys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def refused(job: str, argv: list[str], capsys, status: int | None = None) -> str:
    """Run a job's main as its script does; the one line it printed on stderr. With
    ``status``, the exit status must be that one (README, Jobs: 1 the data is damaged,
    2 bad input, 3 a lock is held)."""
    module = JOBS[job]
    code = jobkit.run(job, lambda: module.main(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0, err
    assert status is None or code == status, (code, err)
    assert len(err) == 1, err
    return err[0]


def corrupt_first_segment(root: Path, topic: str = "events", partition: int = 0) -> None:
    seg = sorted((root / f"{topic}-{partition}").glob("*.log"))[1]
    flip_byte(seg, 40)                          # inside the first batch's CRC range


# ---- export_parquet ----------------------------------------------------------------------------
@pytest.mark.parametrize("extra, expect", [
    (["--path", "MISSING"], "log directory MISSING does not exist"),
    (["--topic", "nosuch"], "--topic: topic nosuch not found"),
    (["--parquet-compression", "brotli"],
     "--parquet-compression: Parquet codec 'brotli' cannot be written"),
    (["--starting-offsets", "{bad"], "--starting-offsets is not valid JSON"),
    (["--starting-offsets", '{"events":{"0":5}}'], "--starting-offsets"),
    (["--from", "yesterday"], "--from: 'yesterday' is neither epoch milliseconds"),
    (["--to", ""], "--to: '' is neither epoch milliseconds"),
    (["--from", "2024-01-02", "--to", "2024-01-01"], "the window [from, to) is empty"),
    (["--mode", "errorifexists"], "exists (--mode errorifexists)"),
])
def test_export_refuses_before_spark_and_keeps_the_old_export(
        logs, parquet_out, no_spark, capsys, extra, expect):
    before = tree_hash(parquet_out)
    argv = ["--path", str(logs), "--output", str(parquet_out), *extra]
    if "--path" in extra:
        argv = argv[2:]
    line = refused("export_parquet", argv, capsys, status=2)
    assert line.startswith("export_parquet: ") and expect in line, line
    assert tree_hash(parquet_out) == before


def test_export_refuses_a_corrupt_segment(tmp_path, logs, parquet_out, no_spark, capsys):
    src = tmp_path / "bad"
    shutil.copytree(logs, src)
    corrupt_first_segment(src)
    before = tree_hash(parquet_out)
    line = refused("export_parquet", ["--path", str(src), "--output", str(parquet_out)],
                   capsys, status=1)
    assert "events-0" in line and "position" in line and "offset" in line, line
    assert tree_hash(parquet_out) == before


# ---- import_files ------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, expect", [
    (["--input", "MISSING"], "--input: MISSING does not exist"),
    (["--mode", "errorifexists"], "'events' already exists"),
    (["--compression-type", "lz4", "--compression-level", "99"], "must be in [1, 17]"),
    (["--topic", "__consumer_offsets"], "internal topic"),
    (["--partitions", "events=0"], "--partitions"),
])
def test_import_refuses_before_spark_and_keeps_the_log(
        tmp_path, dest, parquet_out, no_spark, capsys, extra, expect):
    before = tree_hash(dest)
    argv = ["--input", str(parquet_out), "--output", str(dest), "--topic", "events", *extra]
    for flag in ("--input", "--topic"):
        if flag in extra:
            i = argv.index(flag)
            del argv[i:i + 2]
    line = refused("import_files", argv, capsys, status=2)
    assert line.startswith("import_files: ") and expect in line, line
    assert tree_hash(dest) == before


def test_import_refuses_a_log_dir_a_broker_holds(dest, parquet_out, no_spark, capsys):
    with broker_lock(dest):
        before = tree_hash(dest)
        line = refused("import_files", ["--input", str(parquet_out), "--output", str(dest),
                                        "--topic", "new-topic"], capsys)
        assert "a running Kafka broker holds this log dir" in line, line
        assert tree_hash(dest) == before


# ---- copy_topic --------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, expect", [
    (["--topic", "nosuch"], "nosuch not found"),
    (["--topic", "events"], "already exists"),
    (["--from", "2024-01-02", "--to", "2024-01-01"], "window [from, to) is empty"),
    (["--from", "someday"], "neither epoch milliseconds nor an ISO-8601"),
    (["--rename", "events=__consumer_offsets"], "internal topic"),
    (["--compression-type", "zstd", "--compression-level", "99"], "must be in"),
    (["--starting-offsets", "[1]"], "not Kafka offsets JSON"),
])
def test_copy_refuses_before_spark_and_keeps_the_destination(
        logs, dest, no_spark, capsys, extra, expect):
    before = tree_hash(dest)
    argv = ["--path", str(logs), "--output", str(dest), *extra]
    if "--topic" not in extra:
        argv += ["--topic", "events", "--rename", "events=copy"] \
            if "--rename" not in extra else ["--topic", "events"]
    line = refused("copy_topic", argv, capsys, status=2)
    assert line.startswith("copy_topic: ") and expect in line, line
    assert tree_hash(dest) == before


def test_copy_refuses_a_held_destination_and_a_corrupt_source(
        tmp_path, logs, dest, no_spark, capsys):
    with broker_lock(dest):
        before = tree_hash(dest)
        line = refused("copy_topic", ["--path", str(logs), "--output", str(dest),
                                      "--topic", "events", "--rename", "events=x"], capsys,
                       status=3)
        assert "a running Kafka broker holds this log dir" in line, line
        assert tree_hash(dest) == before
    src = tmp_path / "bad"
    shutil.copytree(logs, src)
    corrupt_first_segment(src, partition=1)
    line = refused("copy_topic", ["--path", str(src), "--output", str(dest), "--topic",
                                  "events", "--rename", "events=x"], capsys, status=1)
    assert "events-1" in line and "CRC" in line.upper(), line
    assert tree_hash(dest) == before
    # a copy that starts past the damaged segment, or reads a time window, is not refused
    seg_bases = [s.base_offset for s in LogDirs(str(src)).partitions("events")[1].segments]
    for extra in (["--start-offset", str(seg_bases[2])], ["--from", "0"]):
        args = copy_topic.parse_args(["--path", str(src), "--output", str(tmp_path / "new"),
                                      "--topic", "events", "--isolation-level",
                                      "read_uncommitted", *extra])
        _preflight.copy(args, copy_topic.plan_topics(args), copy_topic.reader_options,
                        copy_topic.writer_options)


def _timestamps(logs: Path) -> list[int]:
    from spark_kafkalog.log import read_table

    t = read_table(str(logs), "events", include_headers=False)
    return sorted(t.column("timestamp").cast("int64").to_pylist())      # microseconds


@pytest.mark.parametrize("extra, expect", [
    (["--from", "2030-01-01"], "--from 2030-01-01: no record of events in the offsets "
                               "selected has a timestamp in [2030-01-01T00:00:00.000Z, "
                               "the last): nothing to copy, nothing created"),
    (["--to", "2023-12-31"], "--to 2023-12-31: no record of events"),
    (["--start-offset", "5000"], "the offsets selected hold no record of events (offsets "
                                 "to copy per partition: events-0 [5000, 2000), "
                                 "events-1 [5000, 2000), each empty)"),
    (["--end-offset", "1000", "--from", "2024-01-03"], "no record of events"),
    (["--ending-offsets", '{"events":{"0":0,"1":0}}'], "each empty"),
])
def test_copy_refuses_an_empty_selection_and_creates_nothing(
        tmp_path, logs, dest, no_spark, capsys, extra, expect):
    """A window or offset range that selects no record: one line, exit 2, before Spark,
    and neither the destination nor a new output dir is touched (issue 37, item 5)."""
    before = tree_hash(dest)
    for out in (dest, tmp_path / "new"):
        line = refused("copy_topic", ["--path", str(logs), "--output", str(out), "--topic",
                                      "events", "--rename", "events=copy", *extra],
                       capsys, status=2)
        assert line.startswith("copy_topic: ") and expect in line, line
    assert tree_hash(dest) == before and not (tmp_path / "new").exists()


def test_a_window_between_two_records_is_empty_and_one_around_a_record_is_not(
        tmp_path, logs, no_spark, capsys, monkeypatch):
    """The preflight decides a window inside the data by the records' timestamps (the
    oracle: every timestamp, read here), refusing only what holds no record."""
    ts = sorted({t // 1000 for t in _timestamps(logs)})
    gap = next(i for i in range(len(ts) // 2, len(ts) - 1) if ts[i + 1] - ts[i] > 2)
    empty = ["--from", str(ts[gap] + 1), "--to", str(ts[gap + 1])]
    one = ["--from", str(ts[gap]), "--to", str(ts[gap] + 1)]
    base = ["--path", str(logs), "--output", str(tmp_path / "new"), "--topic", "events"]
    line = refused("copy_topic", base + empty, capsys, status=2)
    assert "no record of events" in line, line
    args = copy_topic.parse_args(base + one)
    assert _preflight.copy(args, copy_topic.plan_topics(args), copy_topic.reader_options,
                           copy_topic.writer_options) is True      # not refused
    args = copy_topic.parse_args(base)                  # no window: nothing to decide
    assert _preflight.copy(args, copy_topic.plan_topics(args), copy_topic.reader_options,
                           copy_topic.writer_options) is True
    # undecided (the byte budget spent): not refused; the job asks Spark for one row
    monkeypatch.setattr(seek, "window_has_records", lambda *a, **kw: None)
    args = copy_topic.parse_args(base + empty)
    assert _preflight.copy(args, copy_topic.plan_topics(args), copy_topic.reader_options,
                           copy_topic.writer_options) is None
    assert not (tmp_path / "new").exists()


# ---- compact, retention: the log dir is the destination ------------------------------------------
def test_compact_refuses_held_corrupt_and_unknown(tmp_path, dest, no_spark, capsys):
    with broker_lock(dest):
        before = tree_hash(dest)
        line = refused("compact", ["--path", str(dest), "--topic", "events"], capsys)
        assert "a running Kafka broker holds this log dir" in line, line
        assert tree_hash(dest) == before
    line = refused("compact", ["--path", str(dest), "--topic", "nosuch"], capsys)
    assert "'nosuch' not found" in line, line
    line = refused("compact", ["--path", str(dest), "--topic", "events", "--partition",
                               "7"], capsys, status=2)
    assert "--partition: partitions [7]" in line, line
    corrupt_first_segment(dest)
    before = tree_hash(dest)
    line = refused("compact", ["--path", str(dest), "--topic", "events"], capsys, status=1)
    assert "events-0" in line and "position" in line, line
    assert tree_hash(dest) == before


def test_retention_refuses_a_held_log_dir(dest, capsys):
    with broker_lock(dest):
        before = tree_hash(dest)
        line = refused("retention", ["--path", str(dest), "--retention-ms", "1"], capsys)
        assert "a running Kafka broker holds this log dir" in line, line
        assert tree_hash(dest) == before


# ---- consumer_offsets, log_report --------------------------------------------------------------
def test_consumer_offsets_and_report_refuse_before_writing(tmp_path, logs, no_spark,
                                                          capsys):
    out = tmp_path / "offsets"
    out.mkdir()
    (out / "commits.parquet").write_bytes(b"old")
    before = tree_hash(out)
    line = refused("consumer_offsets", ["--path", str(logs), "--output", str(out)], capsys)
    assert "'__consumer_offsets' not found" in line, line
    line = refused("consumer_offsets", ["--path", str(tmp_path / "none"), "--output",
                                        str(out)], capsys)
    assert "does not exist" in line, line
    assert tree_hash(out) == before
    line = refused("log_report", ["--path", str(logs), "--html",
                                  str(tmp_path / "no" / "r.html")], capsys)
    assert "--html: directory" in line and "does not exist" in line, line
    line = refused("log_report", ["--path", str(tmp_path / "none")], capsys)
    assert "does not exist" in line, line
    html, js = out / "report.html", out / "report.json"
    html.write_text("<html>old</html>")
    js.write_text("{}")
    before = tree_hash(out)
    line = refused("log_report", ["--path", str(logs), "--topic", "nosuch", "--html",
                                  str(html), "--json", str(js)], capsys)
    assert "'nosuch' is not in" in line, line
    assert tree_hash(out) == before


# ---- the pieces ---------------------------------------------------------------------------------
def test_broker_lock_probe_creates_nothing_and_keeps_our_own_guard(tmp_path):
    from spark_kafkalog.log.io import resolve_filesystem
    from spark_kafkalog.log.files.lock import BrokerDirGuard

    fs, root = resolve_filesystem(str(tmp_path))
    check_broker_lock(fs, root)                      # no .lock: free, and none created
    assert not (tmp_path / ".lock").exists()
    # our own shared guard is not a broker, and it survives the probe (closing another
    # descriptor of the file would drop it): another process still cannot lock it
    with BrokerDirGuard(fs, root):
        check_broker_lock(fs, root)
        code = ("import fcntl, os\n"
                f"fd = os.open({str(tmp_path / '.lock')!r}, os.O_RDWR)\n"
                "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                "    print('got')\nexcept OSError:\n    print('held')\n")
        got = subprocess.run([sys.executable, "-c", code], capture_output=True,
                             text=True, timeout=30).stdout.strip()
        assert got == "held"
    with broker_lock(tmp_path):
        with pytest.raises(LockError, match="running Kafka broker"):
            check_broker_lock(fs, root)


def test_partition_counts_parse():
    assert _preflight.partition_counts(None) == (None, {})
    assert _preflight.partition_counts(["3", "a=2,b=5"]) == (3, {"a": 2, "b": 5})
    assert _preflight.partition_counts(["x.y=1"]) == (None, {"x.y": 1})
    for bad in (["0"], ["a="], ["=2"], ["a=b"]):
        with pytest.raises(jobkit.JobInputError, match="--partitions"):
            _preflight.partition_counts(bad)


def test_segment_probe_reads_only_the_selected_range(tmp_path, logs):
    src = tmp_path / "bad"
    shutil.copytree(logs, src)
    corrupt_first_segment(src)
    logdirs = LogDirs(str(src))
    p = logdirs.partitions("events")[0]
    bad_base = p.segments[1].base_offset
    with pytest.raises(Exception, match="position"):
        _preflight.check_segments(logdirs, [p])
    # a range starting past the damaged segment does not touch it
    later = p.segments[2].base_offset
    assert _preflight.check_segments(logdirs, [p], {("events", 0): (later, 10**9)}) == \
        len(p.segments) - 2
    assert bad_base < later


def test_a_killed_write_never_makes_the_next_copy_refuse(tmp_path, logs):
    """SIGKILL at every commit step of a write into the destination: the partition dirs
    it created are rolled back before copy_topic asks whether the topic exists, so the
    next copy runs (or, past the commit point, refuses the topic that now exists)."""
    import functools

    import pyarrow as pa

    import spark_kafkalog.log.write.table as table_mod
    from spark_kafkalog.log import read_table
    from spark_kafkalog.log.write import topic_partitions, write_table
    from spark_kafkalog.log.write.commit import commit_write
    from spark_kafkalog.log.io import resolve_filesystem
    from tests.log.killing import run_killed

    rows = pa.table({"value": [b"v%d" % i for i in range(20)],
                     "partition": pa.array([i % 2 for i in range(20)], pa.int32())})
    left_dirs = committed = 0
    for kill_at in range(1, 60):
        root = tmp_path / f"k{kill_at}"
        root.mkdir()

        def write(fault, root=root):
            table_mod.commit_write = functools.partial(commit_write, fault=fault)
            write_table(str(root), "events", rows, partitions=2)
        if not run_killed(write, kill_at):
            break
        fs, r = resolve_filesystem(str(root))
        dirs_before = bool(topic_partitions(fs, r, "events"))
        _preflight.recover_log_dir(str(root))
        if topic_partitions(fs, r, "events"):
            assert read_table(str(root), "events").num_rows == 20
            committed += 1
            continue
        left_dirs += dirs_before
        args = copy_topic.parse_args(["--path", str(logs), "--output", str(root),
                                      "--topic", "events"])
        _preflight.copy_destination(args)
        assert [p.target for p in copy_topic.plan_topics(args)] == ["events"]
    assert left_dirs and committed, (left_dirs, committed)


def test_an_existing_topic_is_bad_input_in_one_wording(tmp_path, dest, parquet_out, no_spark,
                                                        capsys):
    """import_files --mode errorifexists, copy_topic into an existing topic and the data
    source's saveMode=errorifexists: one wording, JobInputError / TopicExistsError, exit 2
    (not exit 3's "retry later" of a commit conflict)."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from spark_kafkalog.errors import TopicExistsError
    from spark_kafkalog.spark.writer import make_batch_writer

    wording = f"topic 'events' already exists in {dest} ("
    line = refused("import_files", ["--input", str(parquet_out), "--output", str(dest),
                                    "--topic", "events", "--mode", "errorifexists"],
                   capsys, status=2)
    assert line.startswith(f"import_files: JobInputError: --topic: {wording}"), line
    line = refused("copy_topic", ["--path", str(dest), "--output", str(dest), "--topic",
                                  "events"], capsys, status=2)
    assert line.startswith(f"copy_topic: JobInputError: --output: {wording}"), line
    schema = StructType([StructField("value", BinaryType())])
    with pytest.raises(TopicExistsError) as err:
        make_batch_writer({"path": str(dest), "topic": "events",
                           "saveMode": "errorifexists"}, schema, False)
    assert str(err.value) == f"{wording}saveMode errorifexists)"
    assert jobkit.exit_status(err.value) == (
        2, f"TopicExistsError: {wording}saveMode errorifexists)")
    assert not [n for n in os.listdir(dest) if n.startswith(".kafkalog-staging.")]

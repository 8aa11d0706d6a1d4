"""Jobs on Spark never destroy the old output: ``export_parquet --mode overwrite`` killed
(SIGKILL to its process group, driver JVM included) while it writes, or failing inside
the Spark job on damage only the read can find, leaves the previous export byte-identical,
and the next run finishes the replacement over the leftovers. Export's records without a
timestamp go under a null date and are counted; ``import_files`` gives each topic its own
partition count (``--partitions TOPIC=N`` too). ``copy_topic`` and ``import_files`` killed
the same way leave the destination log dir as it was, and their next run lands."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import export_parquet, import_files
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.log import LogDirs, read_table
from tests.conftest import REPO
from tests.log.logbuilder import LogDirBuilder, flip_byte, rec
from tests.test_job_preflight import tree_hash


@pytest.fixture()
def shared_session(spark, monkeypatch):
    """Jobs' ``main`` on the shared session (not stopped at the end)."""
    @contextlib.contextmanager
    def session(*_a, **_k):
        yield spark
    monkeypatch.setattr(jobkit, "spark_session", session)
    return spark


def old_export(out):
    part = out / "topic=events" / "date=2024-01-01"
    part.mkdir(parents=True)
    (part / "part-00000-old.snappy.parquet").write_bytes(b"PAR1 old PAR1")
    (out / "_SUCCESS").write_bytes(b"")
    return tree_hash(out)


def leftovers(out):
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def test_export_killed_while_writing_keeps_the_old_export(tmp_path, shared_session):
    logs = tmp_path / "kafka-logs"
    make_sample_log(logs, records=300_000, partitions=2, segment_bytes=4 << 20, days=2)
    out = tmp_path / "export"
    before = old_export(out)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(REPO / "jobs" / "export_parquet.py"),
                             "--path", str(logs), "--output", str(out), "--no-progress"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not leftovers(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)                    # polling for the new output to appear
        assert leftovers(out), "the export never began writing its new output"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)     # the driver, its JVM, the workers
        proc.wait(timeout=60)
    assert tree_hash(out) == before             # killed mid-write: the old export, intact
    # the next run finishes over the leftovers: the new export, nothing beside it
    assert export_parquet.main(["--path", str(logs), "--output", str(out),
                                "--no-progress"]) == 0
    assert leftovers(out) == []
    assert pq.read_table(out).num_rows == 300_000


def test_export_failing_in_spark_keeps_the_old_export(tmp_path, shared_session):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("events", 0)
    for i in range(40):
        p.append([rec(b"k%d" % i, b"v" * 200, ts=1_700_000_000_000 + i)])
    b.write()
    seg = b.roots[0] / "events-0" / "00000000000000000000.log"
    # damage deep in the segment, past the first batches preflight probes: only the
    # read in the Spark job finds it
    flip_byte(seg, seg.stat().st_size - 100)
    out = tmp_path / "export"
    before = old_export(out)
    code = jobkit.run("export_parquet", lambda: export_parquet.main(
        ["--path", str(b.roots[0]), "--output", str(out), "--no-progress",
         "--option", "windowBytes=65536"]))
    assert code != 0
    assert tree_hash(out) == before
    assert leftovers(out) == []                 # the failed run removed its new output


def test_export_names_and_counts_records_without_a_timestamp(tmp_path, shared_session,
                                                             capsys):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("t", 0)
    p.append([rec(b"a", b"1", ts=1_700_000_000_000), rec(b"b", b"2", ts=1_700_100_000_000)])
    p.append([rec(b"c", b"3", ts=-1), rec(b"d", b"4", ts=-1)])   # Kafka's NO_TIMESTAMP
    b.write()
    out = tmp_path / "out"
    assert export_parquet.main(["--path", str(b.roots[0]), "--output", str(out),
                                "--no-progress"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert sorted(d.name for d in (out / "topic=t").iterdir()) == [
        "date=2023-11-14", "date=2023-11-16", "date=__HIVE_DEFAULT_PARTITION__"]
    assert "2023-11-14T22:13:20.000Z .. 2023-11-16T02:00:00.000Z" in line, line
    assert line.endswith("; 2 rows without a timestamp (Kafka's -1) under "
                         "date=__HIVE_DEFAULT_PARTITION__"), line
    nulls = pq.read_table(out / "topic=t" / "date=__HIVE_DEFAULT_PARTITION__")
    assert sorted(nulls.column("key").to_pylist()) == [b"c", b"d"]


def test_import_gives_each_topic_its_own_partition_count(tmp_path, shared_session):
    b = LogDirBuilder(tmp_path / "logs")
    for topic, n in (("events", 2), ("orders", 3)):
        for q in range(n):
            b.partition(topic, q).append([rec(b"k", b"%s-%d" % (topic.encode(), q),
                                              ts=1_700_000_000_000)])
    b.write()
    exp = tmp_path / "exp"
    assert export_parquet.main(["--path", str(b.roots[0]), "--output", str(exp),
                                "--no-progress", "--include-headers"]) == 0
    for argv, want in (([], {"events": 2, "orders": 3}),
                       (["--partitions", "events=5"], {"events": 5, "orders": 3})):
        dst = tmp_path / f"dst{len(argv)}"
        assert import_files.main(["--input", str(exp), "--path", str(dst),
                                  "--preserve-offsets", "--no-progress", *argv]) == 0
        logdirs = LogDirs(str(dst))
        got = {t: len(logdirs.partitions(t)) for t in logdirs.topics()}
        assert got == want
        for topic in want:
            t = read_table(str(dst), topic)
            assert sorted(t.column("value").to_pylist()) == sorted(
                read_table(str(b.roots[0]), topic).column("value").to_pylist())


def _staging(dest) -> list[str]:
    return [n for n in os.listdir(dest) if n.startswith(".kafkalog-staging.")]


def kill_while_staging(job: str, argv: list[str], dest) -> set[str]:
    """Run ``jobs/JOB.py argv`` as spark-submit would run it and SIGKILL its process
    group (driver JVM and Python workers) once its tasks stage files in ``dest``; the
    killed write's staging ids (a worker may finish a staging file just after)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(REPO / "jobs" / f"{job}.py"), *argv],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not _staging(dest) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)                    # polling for the tasks' staged files
        assert _staging(dest), f"{job} never began staging"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    return {".".join(n.split(".")[:3]) for n in _staging(dest)}


def assert_killed_run_left_it(dest, before: dict, new_prefix: str) -> None:
    """What was there is untouched: the killed run added only its staging and lock files,
    no partition dir of the topic it was writing."""
    after = tree_hash(dest)
    assert {k: v for k, v in after.items() if k in before} == before
    assert not [k for k in after if k.startswith(new_prefix)]


def test_copy_killed_while_writing_leaves_the_destination_and_the_next_run_copies(
        tmp_path, shared_session):
    from spark_kafkalog.jobs import copy_topic

    logs = tmp_path / "kafka-logs"
    make_sample_log(logs, records=300_000, partitions=2, segment_bytes=4 << 20, days=2)
    dest = tmp_path / "dest"
    import shutil
    shutil.copytree(logs, dest)                 # an existing log dir holding 'events'
    before = tree_hash(dest)
    argv = ["--path", str(logs), "--output", str(dest), "--topic", "events", "--rename",
            "events=copy", "--no-progress"]
    killed_write = kill_while_staging("copy_topic", argv, dest)
    assert_killed_run_left_it(dest, before, "copy-")
    assert copy_topic.main(argv) == 0
    assert read_table(str(dest), "copy").num_rows == 300_000
    assert {k: v for k, v in tree_hash(dest).items()
            if k.startswith("events-")} == {k: v for k, v in before.items()
                                            if k.startswith("events-")}
    # the next run cleaned its own staging; the killed run's is the library's to delete
    # once older than STAGING_TTL_S (it cannot tell a dead writer's from a live one's)
    assert {".".join(n.split(".")[:3]) for n in _staging(dest)} <= killed_write


def test_import_killed_while_writing_leaves_the_destination_and_the_next_run_imports(
        tmp_path, shared_session):
    """import_files, the same way: into a log dir that holds 'events', a new topic from
    an export; killed while its tasks stage, then run again."""
    logs = tmp_path / "kafka-logs"
    make_sample_log(logs, records=300_000, partitions=2, segment_bytes=4 << 20, days=2)
    exp = tmp_path / "exp"
    assert export_parquet.main(["--path", str(logs), "--output", str(exp),
                                "--no-progress"]) == 0
    dest = tmp_path / "dest"
    import shutil
    shutil.copytree(logs, dest)
    before = tree_hash(dest)
    argv = ["--input", str(exp), "--output", str(dest), "--topic", "restored",
            "--no-progress", "--retention-ms", "-1"]
    killed_write = kill_while_staging("import_files", argv, dest)
    assert_killed_run_left_it(dest, before, "restored-")
    assert import_files.main(argv) == 0
    assert sorted(read_table(str(dest), "restored").column("value").to_pylist()) == \
        sorted(read_table(str(logs), "events").column("value").to_pylist())
    assert {k: v for k, v in tree_hash(dest).items()
            if k.startswith("events-")} == {k: v for k, v in before.items()
                                            if k.startswith("events-")}
    assert {".".join(n.split(".")[:3]) for n in _staging(dest)} <= killed_write
"""Disk faults under the jobs that write a log dir (copy_topic, import_files: run as their
scripts run them, ``jobkit.run`` of ``main(argv)`` on the shared session, into a log dir
that already holds another topic) and under the streaming sink (availableNow).

Faults: the kernel's ENOSPC (the destination on a small, filled tmpfs: the staging does
not fit, or the commit's copy does not), and EIO / ENOSPC through the sysio hook
(tests/log/faulting.py) at a sample of the commit's calls, one of each kind and every few.
The hook applies to the commit only, and not in this process: Spark runs a Python data
source's commit/abort in a worker the JVM starts on the driver (the tasks in others), so
the kafkalog source is registered again under its own name with writers whose commit and
abort install the FaultPlan there and log its calls to a file (``hooked_source``).

After each fault: exit 4 and one stderr line naming the errno and a file in the
destination (exit 0 with the topic whole when the fault came after the journal's commit
point); every file the destination held byte-identical, nothing new but the writer's lock
and journal, the same reads; no staging/.tmp/.new file; once space is freed (the hook
removed) a second run completes and the topic reads exactly as the source.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.errors import StorageError, unwrap
from spark_kafkalog.jobs import _preflight, copy_topic, import_files
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.files import journal as jr
from tests.log import faulting
from tests.log.faulting import (
    MODES,
    SPACE_OPS,
    FaultPlan,
    assert_storage_error,
    can_mount,
    fill,
    injected,
    leftovers,
    pick_calls,
    small_fs,
)
from tests.spark.test_import_files import export
from tests.spark.test_write_stream import make_inputs
from tests.test_job_preflight import tree_hash

FS = pafs.LocalFileSystem()
COLUMNS = ["key", "value", "partition", "offset", "timestamp", "timestampType", "headers"]
TOPIC = "events"
#: what a write adds to a log dir that is not the log: the broker lock (the preflight's),
#: the writer's locks, the topic's journal (a rolled-back write is recorded there) and an
#: aborted write's marker (a task still staging after the abort deletes its own staging
#: when it sees it; a later write's sweep removes the marker, see journal.ABORTED_PREFIX)
BOOKKEEPING = re.compile(r"^(\.lock|\.kafkalog\.lock|\.kafkalog\.[^/]+\.(lock|journal)"
                         r"|\.kafkalog-aborted\.[^/]+)$")
#: sampling of the commit's calls: every EVERY-th, and the first of each kind
EVERY = 6


# ---- the commit-side hook --------------------------------------------------------------
def hooked_source(log: str, root: str, fail: tuple | None = None, code: int = errno.EIO,
                  full: bool = False, batch: int | None = None):
    """The kafkalog data source class with writers whose ``commit`` and ``abort`` run
    under a :class:`FaultPlan` for ``root`` in the Spark worker that runs them: failing
    call ``fail`` with ``code`` (of micro-batch ``batch`` only, when given; with ``full``
    the disk stays full: every later space-taking call fails, the abort's too), and
    appending one JSON line per call of commit/abort to ``log``. Defined here, so
    cloudpickle sends it by value."""
    from pyspark_kafkalog import DefaultSource
    from spark_kafkalog.spark.writer import KafkaLogBatchWriter, KafkaLogStreamWriter

    def under(kind, batch_id, fn):
        armed = batch is None or batch == batch_id
        plan = FaultPlan(root, fail=fail if armed else None, code=code, full=full)
        if kind == "abort" and full and armed and os.path.exists(log):
            with open(log) as f:
                if any(json.loads(line)["fired"] for line in f):
                    plan.fail, plan.fired = None, True
                    plan._full_now = True           # the commit filled the disk
        err = None
        try:
            with injected(plan):
                return fn()
        except BaseException as e:
            err = f"{type(e).__name__}: {e}"
            raise
        finally:
            with open(log, "a") as f:
                f.write(json.dumps({"kind": kind, "batch": batch_id, "calls": plan.calls,
                                    "fired": plan.fired and kind == "commit",
                                    "error": err}) + "\n")

    class Batch(KafkaLogBatchWriter):
        def commit(self, messages):
            return under("commit", None, lambda: KafkaLogBatchWriter.commit(self, messages))

        def abort(self, messages):
            return under("abort", None, lambda: KafkaLogBatchWriter.abort(self, messages))

    class Stream(KafkaLogStreamWriter):
        def commit(self, messages, batchId):
            return under("commit", batchId,
                         lambda: KafkaLogStreamWriter.commit(self, messages, batchId))

        def abort(self, messages, batchId):
            return under("abort", batchId,
                         lambda: KafkaLogStreamWriter.abort(self, messages, batchId))

    class Source(DefaultSource):
        def writer(self, schema, overwrite):
            return Batch(DefaultSource.writer(self, schema, overwrite).plan)

        def streamWriter(self, schema, overwrite):
            return Stream(DefaultSource.streamWriter(self, schema, overwrite).plan)

    return Source


def calls_of(log) -> list[dict]:
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f]


@pytest.fixture()
def shared(spark, monkeypatch):
    """The shared session as every job's (not stopped by it); the hooked source can be
    registered; afterwards the plain kafkalog source is registered back."""
    from pyspark import cloudpickle
    from pyspark_kafkalog import DefaultSource

    @contextlib.contextmanager
    def session(*_a, **_k):
        yield spark
    monkeypatch.setattr(jobkit, "spark_session", session)
    # the workers need not find tests/ on their sys.path
    cloudpickle.register_pickle_by_value(faulting)
    try:
        yield spark
    finally:
        spark.dataSource.register(DefaultSource)
        cloudpickle.unregister_pickle_by_value(faulting)


def hook(spark, *a, **kw) -> None:
    spark.dataSource.register(hooked_source(*a, **kw))


def unhook(spark) -> None:
    from pyspark_kafkalog import DefaultSource
    spark.dataSource.register(DefaultSource)


# ---- the logs and the jobs -------------------------------------------------------------
def rows(root, topic) -> list[tuple]:
    t = read_table(str(root), topic).sort_by([("partition", "ascending"),
                                             ("offset", "ascending")])
    return list(zip(*(t.column(c).to_pylist() for c in COLUMNS)))


def view(root) -> dict:
    """What a reader sees in log dir ``root``: every topic's records."""
    return {t: rows(root, t) for t in LogDirs(str(root), include_internal=True).topics()}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A source log dir (topic ``events``, 2 partitions, several segments) and its rows."""
    src = tmp_path_factory.mktemp("source") / "kafka-logs"
    make_sample_log(src, records=3000, partitions=2, segment_bytes=64 << 10, days=1)
    return src, rows(src, TOPIC)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The destination as it is before every run: a log dir holding topic ``other``."""
    dest = tmp_path_factory.mktemp("pristine") / "kafka-logs"
    make_sample_log(dest, records=500, partitions=2, topic="other", segment_bytes=32 << 10,
                    days=1, seed=11)
    return dest, tree_hash(dest), view(dest)


@pytest.fixture(scope="module")
def exported(spark, source, tmp_path_factory):
    """The source topic exported as export_parquet writes it (import_files' input)."""
    out = str(tmp_path_factory.mktemp("export") / "parquet")
    export(spark, str(source[0]), out, [TOPIC])
    return out


JOBS = {"copy_topic": copy_topic, "import_files": import_files}


def job_argv(job: str, source, exported, dest) -> list[str]:
    common = ["--output", str(dest), "--topic", TOPIC, "--segment-bytes", "65536",
              "--retention-ms", "-1", "--no-progress"]
    if job == "copy_topic":
        return ["--path", str(source[0])] + common
    return ["--input", exported, "--preserve-offsets", "--partitions", "2"] + common


def run_job(job: str, argv: list[str], capsys) -> tuple[int, list[str]]:
    """The job run as its script runs it: exit status and the lines it printed on
    stderr."""
    module = JOBS[job]
    capsys.readouterr()
    status = jobkit.run(job, lambda: module.main(argv), argv=argv)
    return status, capsys.readouterr().err.strip().splitlines()


def assert_failed(job, status, lines, code: int, dest) -> None:
    """Exit 4 and one line ``<job>: StorageError: ... <ERRNO> ... (file <in dest>)``."""
    assert status == jobkit.EXIT_FAILED, (status, lines)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{job}: StorageError: "), lines[0]
    assert f": {errno.errorcode[code]} (" in lines[0], lines[0]
    m = re.search(r"\(file (.+?)\)$", lines[0])
    assert m and (m.group(1) + "/").startswith(f"{dest}/"), lines[0]   # dest's fsync: itself


def assert_as_before(dest, pristine, settled: bool = True) -> None:
    """Every file the destination held is byte-identical, nothing but the writer's lock
    and journal files is new, and it reads as before; ``settled``: the journal holds no
    pending write either (on a disk that stays full the rollback cannot record itself:
    the next open finishes it, as the second run's preflight does)."""
    _, hashes, seen = pristine
    now = tree_hash(Path(dest))
    assert {f: now.get(f) for f in hashes} == hashes, \
        [f for f in hashes if now.get(f) != hashes[f]]
    assert [f for f in now if f not in hashes and not BOOKKEEPING.match(f)] == []
    assert view(dest) == seen
    if settled and os.path.exists(f"{dest}/.kafkalog.{TOPIC}.journal"):
        assert jr.load(FS, str(dest), TOPIC).pending is None


def assert_as_after(dest, pristine, source) -> None:
    """The destination reads as before plus the new topic, exactly the source's."""
    assert view(dest) == {**pristine[2], TOPIC: source[1]}
    pending = jr.load(FS, str(dest), TOPIC).pending
    if pending is not None:
        # committed, but the fault came while finishing it (checkpoints, staging's
        # deletion, the journal's last record): the next open completes it, as every
        # job's preflight does -- and changes nothing a reader sees
        assert pending.committed, pending
        assert _preflight.recover_log_dir(str(dest), [TOPIC]) == [TOPIC]
        assert jr.load(FS, str(dest), TOPIC).pending is None
        assert view(dest) == {**pristine[2], TOPIC: source[1]}


def fault_and_retry(shared, job, argv, dest, pristine, source, code, full, capsys) -> str:
    """The checks after a faulted run, then (the hook removed) the second run's; returns
    "before" or "after": what the faulted run left."""
    status, lines = run_job(job, argv, capsys)
    if status == 0:         # past the journal's commit point: the copy is in
        assert_as_after(dest, pristine, source)
        outcome = "after"
    else:
        assert_failed(job, status, lines, code, dest)
        assert_as_before(dest, pristine, settled=not full)
        outcome = "before"
    assert not leftovers(str(dest)), leftovers(str(dest))
    unhook(shared)
    if outcome == "before":
        status, lines = run_job(job, argv, capsys)
        assert status == 0, lines
        assert_as_after(dest, pristine, source)
        assert not leftovers(str(dest)), leftovers(str(dest))
    return outcome


# ---- copy_topic and import_files: the hook at the commit's calls ----------------------------
@pytest.mark.parametrize("job", list(JOBS))
def test_job_commit_faults_through_the_hook(shared, job, source, pristine, exported,
                                            tmp_path, capsys):
    """The job's commit (one topic: lock, journal, segments, indexes, checkpoints,
    staging's deletion): the first call of each kind and every EVERY-th, failed with EIO,
    and the space-taking ones also with ENOSPC on a disk that stays full."""
    ref = tmp_path / "ref"
    shutil.copytree(pristine[0], ref)
    log = str(tmp_path / "ref.jsonl")
    hook(shared, log, str(ref))
    status, lines = run_job(job, job_argv(job, source, exported, ref), capsys)
    assert status == 0, lines
    assert_as_after(ref, pristine, source)
    (commit,) = [r for r in calls_of(log) if r["kind"] == "commit"]
    calls = [tuple(c) for c in commit["calls"]]
    kinds = {c[0] for c in calls}
    assert {"ftruncate", "create", "write", "fsync", "rename", "fsync-dir", "mkdir",
            "unlink"} <= kinds, kinds
    shutil.rmtree(ref)
    points = pick_calls(calls, EVERY)
    outcomes: Counter = Counter()
    for i, key in enumerate(points):
        for name, code, full in MODES:
            if full and key[0] not in SPACE_OPS:
                continue            # a full disk refuses only the calls that take space
            dest = tmp_path / f"f{i}-{name}"
            shutil.copytree(pristine[0], dest)
            flog = str(tmp_path / f"f{i}-{name}.jsonl")
            hook(shared, flog, str(dest), fail=key, code=code, full=full)
            argv = job_argv(job, source, exported, dest)
            outcome = fault_and_retry(shared, job, argv, dest, pristine, source, code,
                                      full, capsys)
            assert any(r["fired"] for r in calls_of(flog)), (key, "fault not reached")
            outcomes[outcome, name] += 1
            shutil.rmtree(dest)
    print(f"{job}: {len(calls)} commit calls, {len(points)} sampled, "
          f"{sum(outcomes.values())} faults: {dict(outcomes)}")
    assert {o for o, _ in outcomes} == {"before", "after"}, outcomes


# ---- copy_topic and import_files on a full disk (the kernel's ENOSPC) ---------------------
def used(path) -> int:
    """Bytes ``path`` takes on its filesystem (tmpfs: whole pages)."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512
               for d, _, fs in os.walk(path) for f in fs)


@pytest.mark.skipif(not can_mount(), reason="mounting a small filesystem needs root "
                    "(CI runs as root)")
@pytest.mark.parametrize("job", list(JOBS))
def test_job_on_a_full_disk(shared, job, source, pristine, exported, tmp_path, capsys):
    """The destination on an 8 MiB tmpfs with a quarter of the new topic's size free
    (the tasks' staging does not fit) and one and a half times it (the staging fits,
    the commit's copy into the segments does not): which of the two failed is checked
    from the commit's own record of its calls."""
    with small_fs(8 * 1024) as mnt:
        ref = f"{mnt}/ref"
        shutil.copytree(pristine[0], ref)
        base = used(ref)
        status, lines = run_job(job, job_argv(job, source, exported, ref), capsys)
        assert status == 0, lines
        size = used(ref) - base                 # what the new topic takes
        shutil.rmtree(ref)
        for level, free in (("staging", size // 4), ("commit", size + size // 2)):
            dest = f"{mnt}/dest"
            shutil.copytree(pristine[0], dest)
            log = str(tmp_path / f"{level}.jsonl")
            hook(shared, log, dest)             # records the commit's calls, fails none
            filler = fill(mnt, free)
            status, lines = run_job(job, job_argv(job, source, exported, dest), capsys)
            assert_failed(job, status, lines, errno.ENOSPC, dest)
            commits = [r for r in calls_of(log) if r["kind"] == "commit"]
            if level == "staging":              # a task failed: Spark never committed
                assert commits == [], commits
            else:                               # staged whole; the commit's copy failed
                assert len(commits) == 1 and "ENOSPC" in commits[0]["error"], commits
            assert_as_before(dest, pristine, settled=False)
            assert not leftovers(dest), leftovers(dest)
            os.unlink(filler)
            unhook(shared)
            status, lines = run_job(job, job_argv(job, source, exported, dest), capsys)
            assert status == 0, lines
            assert_as_after(dest, pristine, source)
            assert not leftovers(dest), leftovers(dest)
            shutil.rmtree(dest)


# ---- the streaming sink: the hook at a micro-batch's commit ---------------------------------
PER_FILE = 300
FILES = 3


def test_stream_sink_commit_faults(shared, tmp_path):
    """A micro-batch's commit (batch 1, appending to the topic batch 0 made) failed with
    EIO at each kind of call and every 2*EVERY-th: the query stops with our error, the
    log holds whole micro-batches, a restart from the checkpoint lands the rest once."""
    inputs = tmp_path / "in"
    make_inputs(inputs, range(FILES), PER_FILE)
    want = sorted(f"payload-{i}".encode() for i in range(FILES * PER_FILE))

    def run(root, ckpt):
        df = shared.readStream.schema("key string, value string") \
            .option("maxFilesPerTrigger", 1).parquet(str(inputs))
        q = df.writeStream.format("kafkalog").option("path", str(root)) \
            .option("topic", "s").option("partitions", "2") \
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        q.awaitTermination()

    def values(root):
        return read_table(str(root), "s")["value"].to_pylist()

    log = str(tmp_path / "ref.jsonl")
    hook(shared, log, str(tmp_path / "ref"))
    run(tmp_path / "ref", tmp_path / "ref-ckpt")
    assert sorted(values(tmp_path / "ref")) == want
    # micro-batch 1 appends to the topic batch 0 made
    (commit,) = [r for r in calls_of(log) if r["kind"] == "commit" and r["batch"] == 1]
    calls = [tuple(c) for c in commit["calls"]]
    assert {"ftruncate", "create", "write", "fsync", "rename", "fsync-dir",
            "unlink"} <= {c[0] for c in calls}, calls
    points = pick_calls(calls, 2 * EVERY)
    outcomes: Counter = Counter()
    for i, key in enumerate(points):
        root, ckpt = tmp_path / f"s{i}", tmp_path / f"s{i}-ckpt"
        flog = str(tmp_path / f"s{i}.jsonl")
        # the reference's query id (a checkpoint's metadata): the same write ids, so the
        # staging files' names, and the calls, are the reference's
        ckpt.mkdir()
        shutil.copy(tmp_path / "ref-ckpt" / "metadata", ckpt / "metadata")
        hook(shared, flog, str(root), fail=key, code=errno.EIO, batch=1)
        try:
            run(root, ckpt)
            failed = None
        except Exception as exc:        # StreamingQueryException
            failed = exc
        assert any(r["fired"] for r in calls_of(flog)), (key, "fault not reached")
        got = values(root)
        if failed is not None:
            err = unwrap(failed)
            assert isinstance(err, StorageError), failed
            assert_storage_error(err, errno.EIO, str(root))
            # whole micro-batches only: batch 0's records, batch 1's too when the fault
            # came after its commit point
            n = len(got)
            assert n in (PER_FILE, 2 * PER_FILE), n
            assert sorted(got) == sorted(f"payload-{j}".encode() for j in range(n)), key
            outcomes["failed"] += 1
        else:                           # past the commit point: the query went on
            assert sorted(got) == want
            outcomes["ok"] += 1
        assert not leftovers(str(root)), leftovers(str(root))
        unhook(shared)
        run(root, ckpt)                 # restarted from its checkpoint: the rest, once
        assert sorted(values(root)) == want, key
        assert jr.load(FS, str(root), "s").pending is None
        assert not leftovers(str(root)), leftovers(str(root))
    print(f"stream sink: {len(calls)} calls in batch 1's commit, {len(points)} faulted: "
          f"{dict(outcomes)}")
    assert outcomes["failed"], outcomes

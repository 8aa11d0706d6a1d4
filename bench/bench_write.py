"""Write throughput: format("kafkalog") vs Parquet, same DataFrame, same Spark session.

    .venv/bin/python bench/bench_write.py [--rows 2000000] [--repeat 3] [--partitions 4]
                                          [--codecs none,lz4,zstd] [--master local[2]]

The DataFrame (``key`` string, ``value`` ~120-byte string) is generated, repartitioned to
the number of cores and cached before anything is timed, so both writers read the same
in-memory rows. Each writer runs once to warm up (JIT, Python workers), then ``--repeat``
interleaved rounds run every writer once each; medians are reported, and the median of
the per-round kafkalog/Parquet ratios (robust to the machine's load changing). Parquet is
written with Spark's defaults (snappy). kafkalog uses its defaults (batch.size 1 MiB);
unless ``--no-producer-batches``, uncompressed is also timed with the Java producer's
16 KiB batches, whose commit rewrites every fourth page of the log before its fsync. A
kafkalog write includes the driver's commit: offsets, appending to the segments, indexes,
fsync, checkpoints and the journal — everything until ``save()`` returns. Unless
``--no-nofsync``, uncompressed is also timed with option ``fsync=false`` (the bytes are in
the page cache, not yet on disk, when ``save()`` returns — a broker's default).

Unless ``--no-floors``, two Python data sources that do not encode are timed too, as
floors for any Python writer on this machine: ``python no-op`` (Spark hands it the Arrow
batches and it counts them: Spark's own cost of a Python data source write) and ``python
write+fsync`` (it writes each batch's key and value bytes, unencoded, to four files per
task, fdatasyncs them behind the task every 4 MiB once a file is 16 MiB and drops what
is on disk from the page cache, and its commit fsyncs every file: about the bytes and
disk work of an uncompressed kafkalog write, with no encoding, partitioning, offsets or
indexes). What kafkalog none takes beyond the second
is the encoder and the log's own work.

Before each timed write the page cache is synced (untimed): what Parquet, or a write with
``fsync=false``, left dirty would otherwise be written back during a later writer's time
(and an fsync on ext4 waits for other files' pending writeback).

The session reads the repo's conf/spark-defaults.conf (as ``make run`` does), which sets
``spark.sql.execution.arrow.maxBytesPerBatch`` so Spark does not size each Arrow batch
after every row it hands to the Python writer.

Output: one line per writer with rows/s, the bytes each wrote, and the
kafkalog/Parquet throughput ratio (>= 1.0 means kafkalog is at least as fast). Last, the
machine's cost of writing files through the page cache, measured in the same run:
``pwrite`` into pages the file does not have yet (what every write of new data does), in
8 MiB writes and in the 1 MiB pieces the writer uses (``log.io.write_fully``: writes of
2 MiB or more get 2 MiB page-cache folios, which on a virtual machine whose free memory
is returned to the host are the slowest to get), the ``fdatasync`` that puts them on
disk, and overwriting pages already cached. Uncompressed, kafkalog writes about ten times
the bytes Parquet does (Parquet dictionary-encodes and compresses), so where new
page-cache pages are slow to get, that cost, not the encoding, bounds it.

Last of all, what putting those bytes on disk costs the writers' CPUs: as many bytes as
kafkalog none wrote are written and fdatasynced while every core runs a busy loop, and the
CPU steal (/proc/stat) over that time is printed, next to the same writes without the
fdatasync. On a virtual machine whose host does the guest's disk I/O on the CPUs that run
the guest, an fsync'd write pays this on top of its own work (measured here: about 0.2-0.5
core-s per 280 MB, none without the fdatasync); Parquet, which fsyncs nothing and writes a
tenth of the bytes, does not. How long the disk took to have all those bytes (fdatasync'd
behind the writes, as the writer's flush-behind does) is printed next to Parquet's median:
here it is about half of it, so the disk's speed is not what bounds an fsync'd write; the
CPU it costs is.

``--commit-scale 10,1000`` (no Spark): the driver's commit alone, at each partition count.
``--commit-records`` (default 100,000) records of ~110 B are staged by ``--commit-tasks``
(default 2) tasks' staging writers (one file each, as the Spark writer does), first into
new partitions (untimed), then ``--repeat`` more times into those existing partitions, each commit timed (median)
with its steps: lock, recover and plan (to the journal's ``begun``), append and fsync (to
``synced``), and the rest (commit point, checkpoints, journal), once per ``--commit-sync``
method (default ``auto,fsync``, interleaved). Beside them, two bounds: the same bytes
landed durably by the system calls no commit can skip, in a tight loop without our code
(:func:`commit_bound`), with an fsync per file and with one syncfs. Prints the ratio of
the largest count's median to the smallest's for each method and bound, the cost of each
added partition, and the load average.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def page_cache_rates(scratch: Path, nbytes: int = 256 << 20, chunk: int = 8 << 20):
    """GB/s of ``pwrite`` into new pages of a file, of the ``fdatasync`` that puts them
    on disk, and of overwriting the same (then cached) pages; the file is deleted after.
    Starts after 3 s idle: pages freed a moment before (an earlier probe's) are faster to
    get again than those of a write that follows other work."""
    time.sleep(3)
    src = memoryview(os.urandom(chunk))
    path = scratch / "page-cache-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        rates = []
        for sync in (True, False):
            t0 = time.perf_counter()
            for off in range(0, nbytes, chunk):
                os.pwrite(fd, src, off)
            rates.append(nbytes / (time.perf_counter() - t0) / 1e9)
            if sync:
                t0 = time.perf_counter()
                os.fdatasync(fd)
                rates.append(nbytes / (time.perf_counter() - t0) / 1e9)
    finally:
        os.close(fd)
        path.unlink()
    return rates


def _cpu_times() -> list[int] | None:
    """The machine's /proc/stat CPU counters (user nice system idle iowait irq softirq
    steal ...), in clock ticks; None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def disk_write_steal(scratch: Path, nbytes: int, cores: int, rounds: int = 3
                     ) -> tuple[float, float, float] | None:
    """``nbytes`` written (1 MiB pieces) while every core runs a busy loop: ``rounds``
    times with an ``fdatasync`` behind every 4 MiB, in a thread of its own (the bytes go
    to disk while the next are written, as an fsync'd write's do), and once without (they stay in the page cache). Returns the median core-seconds of
    CPU steal with the fdatasync, the steal without, and the fastest fsync'd round's
    seconds. On a virtual machine whose host does the disk I/O on the CPUs that run the
    guest, the steal is CPU that putting these bytes on disk takes from the writers (zero
    on a machine whose disk I/O costs no guest CPU), and the seconds are what the disk
    alone needed for them while the cores were busy. None without /proc/stat (steal is
    its 8th counter)."""
    first = _cpu_times()
    if first is None or len(first) < 8:
        return None
    import queue
    import subprocess
    import threading
    piece = memoryview(os.urandom(1 << 20))
    steal: dict[bool, list[float]] = {True: [], False: []}
    seconds = []
    for sync in [True] * rounds + [False]:
        os.sync()
        time.sleep(1)
        path = scratch / "steal-probe"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        burners = [subprocess.Popen([sys.executable, "-c",
                                     "import time\nt = time.time() + 60\n"
                                     "while time.time() < t: pass"])
                   for _ in range(cores)]
        try:
            time.sleep(0.3)
            before = _cpu_times()
            t0 = time.perf_counter()
            # fdatasync behind the writes, in a thread of its own (as the writer's
            # flush-behind does), so the disk works while the next bytes are written
            jobs: queue.Queue = queue.Queue()
            syncer = threading.Thread(target=lambda: [os.fdatasync(fd) for _ in
                                                      iter(jobs.get, None)])
            syncer.start()
            try:
                for off in range(0, nbytes, 1 << 20):
                    os.pwrite(fd, piece, off)
                    if sync and (off + (1 << 20)) % (4 << 20) == 0:
                        jobs.put(True)
            finally:
                jobs.put(None)
                syncer.join()
            if sync:
                os.fdatasync(fd)
                seconds.append(time.perf_counter() - t0)
            after = _cpu_times()
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
            os.close(fd)
            path.unlink()
        steal[sync].append((after[7] - before[7]) / os.sysconf("SC_CLK_TCK"))
    return statistics.median(steal[True]), steal[False][0], min(seconds)


def _floor_sources():
    """The two floors' data source classes (see the module doc); defined after pyspark is
    importable, pickled by value to Spark's Python workers."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Files(WriterCommitMessage):
        def __init__(self, paths):
            self.paths = paths

    class NoopWriter(DataSourceArrowWriter):
        def write(self, iterator):
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return Files([])

    class WriteFsyncWriter(DataSourceArrowWriter):
        def __init__(self, root):
            self.root = root

        def write(self, iterator):
            import queue
            import threading
            import uuid
            os.makedirs(self.root, exist_ok=True)
            tag = uuid.uuid4().hex
            paths = [os.path.join(self.root, f"{tag}-{p}") for p in range(4)]
            fds = [os.open(p, os.O_WRONLY | os.O_CREAT, 0o644) for p in paths]
            size = [0] * 4
            flushed = [0] * 4
            pending = queue.Queue()

            def flush_behind():           # and drop what is on disk, as kafkalog does
                while (job := pending.get()) is not None:
                    fd, upto = job
                    os.fdatasync(fd)
                    if hasattr(os, "posix_fadvise"):
                        os.posix_fadvise(fd, 0, upto, os.POSIX_FADV_DONTNEED)

            flusher = threading.Thread(target=flush_behind, daemon=True)
            flusher.start()
            k = 0
            try:
                for batch in iterator:
                    for column in batch.columns:          # key, value: their data buffers
                        data = column.buffers()[2]
                        p = k % 4
                        k += 1
                        os.pwrite(fds[p], data, size[p])
                        size[p] += data.size
                        if size[p] >= 16 << 20 and size[p] - flushed[p] >= 4 << 20:
                            pending.put((fds[p], size[p] - size[p] % 4096))
                            flushed[p] = size[p]
                for p, fd in enumerate(fds):
                    pending.put((fd, size[p] - size[p] % 4096))
            finally:
                pending.put(None)
                flusher.join()                            # before closing the descriptors
                for fd in fds:
                    os.close(fd)
            return Files(paths)

        def commit(self, messages):
            from concurrent.futures import ThreadPoolExecutor

            def fsync(path):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(fsync, [p for m in messages if m for p in m.paths]))
            fsync(self.root)

    class Noop(DataSource):
        @classmethod
        def name(cls):
            return "bench_python_noop"

        def writer(self, schema, overwrite):
            return NoopWriter()

    class WriteFsync(DataSource):
        @classmethod
        def name(cls):
            return "bench_python_write_fsync"

        def writer(self, schema, overwrite):
            return WriteFsyncWriter(self.options["path"])

    return Noop, WriteFsync


def commit_scale(scratch: Path, counts: list[int], records: int, repeat: int,
                 tasks: int, methods: list[str]) -> None:
    """See ``--commit-scale`` in the module doc."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.fs as pafs

    from spark_kafkalog.format.encode import encode_partitioned
    from spark_kafkalog.log.write import AppendConfig, TopicSpec, commit_write
    from spark_kafkalog.log.files import journal as jr
    from spark_kafkalog.log.write.config import watcher
    from spark_kafkalog.log.write.staging import StagingWriter

    fs = pafs.LocalFileSystem()
    ids = np.arange(records)
    table = pa.table({"key": pa.array([f"key-{i}" for i in ids]),
                      "value": pa.array([f"{i:020d}" + "v" * 90 for i in ids])})
    medians: dict = {m: {} for m in methods}
    bounds: dict = {m: {} for m in ("fsync", "syncfs")}
    for n in counts:
        root = str(scratch / f"commit-{n}")
        shutil.rmtree(root, ignore_errors=True)
        parts = (ids % n).astype(np.int32)
        cuts = [records * k // tasks for k in range(tasks + 1)]
        encoded = [encode_partitioned(table.slice(a, b - a), parts[a:b], n)
                   for a, b in zip(cuts, cuts[1:])]

        def one_commit(method: str) -> dict:
            write_id = jr.batch_write_id()
            staged = []
            for k, (data, sections) in enumerate(encoded):
                w = StagingWriter(fs, root, write_id, f"task{k}")
                view = memoryview(data)
                for p, start, end, index in sections:
                    w.add("bench", p, view[start:end], index)
                staged.append(w.finish())
            os.sync()                 # untimed: the commit pays only for its own files
            marks = {}
            c0 = time.process_time()
            t0 = time.perf_counter()

            @watcher
            def fault(step: str) -> None:
                marks.setdefault(step, time.perf_counter() - t0)
            commit_write(fs, root, write_id, staged,
                         [TopicSpec("bench", partitions_if_new=n, expected_partitions=n)],
                         config=AppendConfig(sync_method=method), fault=fault)
            marks["total"] = time.perf_counter() - t0
            marks["cpu"] = time.process_time() - c0
            return marks

        one_commit(methods[0])        # creates the partitions
        runs: dict = {m: [] for m in methods}
        for _ in range(repeat):       # interleaved: a change in load hits every method
            for m in methods:
                runs[m].append(one_commit(m))
        nbytes = sum(len(data) for data, _ in encoded)
        for m in bounds:
            bounds[m][n] = commit_bound(scratch, n, nbytes, repeat, m)
        for m in methods:
            med = {k: statistics.median(r.get(k, 0.0) for r in runs[m])
                   for k in ("begun", "synced", "total", "cpu")}
            medians[m][n] = med["total"]
            each = ", ".join(f"{r['total']:.2f}" for r in runs[m])
            print(f"commit ({m}) of {tasks} tasks to {n:>5} existing partitions: "
                  f"median {med['total']:.3f} s, CPU {med['cpu']:.3f} s "
                  f"(plan {med['begun']:.3f} s, append+sync {med['synced'] - med['begun']:.3f} s, "
                  f"commit point and after {med['total'] - med['synced']:.3f} s; runs: "
                  f"{each})", flush=True)
        print(f"bound to {n:>5} partitions: {bounds['fsync'][n]:.3f} s with an fsync per "
              f"file, {bounds['syncfs'][n]:.3f} s with one syncfs", flush=True)
        shutil.rmtree(root, ignore_errors=True)
    lo, hi = min(counts), max(counts)

    def ratio(t: dict) -> str:
        return (f"{t[hi] / t[lo]:.2f}x ({t[lo]:.3f} -> {t[hi]:.3f} s), per added partition "
                f"{(t[hi] - t[lo]) / (hi - lo) * 1e3:.3f} ms")
    for m in methods:
        print(f"ratio commit ({m}) {hi} / {lo} partitions: {ratio(medians[m])}")
    for m, t in bounds.items():
        print(f"ratio bound ({m}) {hi} / {lo} partitions: {ratio(t)}")
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


def commit_bound(scratch: Path, n: int, nbytes: int, repeat: int, method: str) -> float:
    """Median seconds of the system calls a commit of ``nbytes`` to ``n`` existing
    partitions cannot do without, timed in a tight loop with none of our code: per
    partition, open its ``.log``, ``.index`` and ``.timeindex`` and append to each (its
    share of the bytes, one offset-index entry, one time-index entry); then, with
    ``method`` ``fsync``, each file fsynced and closed on ``flush.SYNC_THREADS`` threads
    as the commit does, with ``syncfs``, each closed and one syncfs of the filesystem at
    the end; per commit, two atomic writes of a small file (write, fsync, rename, fsync of
    the directory), as the journal's begin and commit point. No listing, no reads, no
    checkpoints."""
    import queue
    import threading

    from spark_kafkalog.log.write import flush
    from spark_kafkalog.log.write.flush import SYNC_THREADS

    syncfs = flush._libc_syncfs() if method == "syncfs" else None
    if method == "syncfs" and syncfs is None:
        return float("nan")
    root = scratch / f"bound-{n}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    per = nbytes // n
    data = os.urandom(per)
    files = []
    for p in range(n):
        d = root / f"t-{p}"
        d.mkdir()
        for name, size in (("0.log", per), ("0.index", 8), ("0.timeindex", 12)):
            (d / name).write_bytes(os.urandom(size))
        files.append([str(d / name) for name in ("0.log", "0.index", "0.timeindex")])

    def atomic(name: str) -> None:
        tmp = root / (name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * 200)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, root / name)
        fd = os.open(root, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    def sync(q: queue.SimpleQueue) -> None:
        while (fd := q.get()) is not None:
            os.fsync(fd)
            os.close(fd)
    times = []
    for r in range(1, repeat + 1):
        os.sync()
        t0 = time.perf_counter()
        q: queue.SimpleQueue = queue.SimpleQueue()
        threads = [] if syncfs else [threading.Thread(target=sync, args=(q,))
                                     for _ in range(SYNC_THREADS)]
        for t in threads:
            t.start()
        atomic("journal")
        for log, idx, tidx in files:
            for path, buf, at in ((log, data, per * r), (idx, b"i" * 8, 8 * r),
                                  (tidx, b"t" * 12, 12 * r)):
                fd = os.open(path, os.O_WRONLY)
                os.pwrite(fd, buf, at)
                if syncfs:
                    os.close(fd)
                else:
                    q.put(fd)
        for _ in threads:
            q.put(None)
        for t in threads:
            t.join()
        if syncfs:
            fd = os.open(root, os.O_RDONLY)
            if syncfs(fd) != 0:
                raise OSError("syncfs failed")
            os.close(fd)
        atomic("journal")
        times.append(time.perf_counter() - t0)
    shutil.rmtree(root, ignore_errors=True)
    return statistics.median(times)


def _tree_bytes(root: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in root.rglob(pattern) if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=4, help="topic partitions")
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--nofsync", action=argparse.BooleanOptionalAction, default=True,
                    help="also time uncompressed with option fsync=false (what a broker's "
                         "default flush policy gives: no fsync per append)")
    ap.add_argument("--producer-batches", action=argparse.BooleanOptionalAction,
                    default=True,
                    help="also time uncompressed with option batch.size=16384 (the Java "
                         "producer's default; ours is 1 MiB)")
    ap.add_argument("--floors", action=argparse.BooleanOptionalAction, default=True,
                    help="also time a no-op Python writer and one that only writes and "
                         "fsyncs the bytes (see the module doc)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--commit-scale", default=None, metavar="COUNTS",
                    help="only time the driver's commit at these partition counts "
                         "(e.g. 10,1000; no Spark: see the module doc)")
    ap.add_argument("--commit-records", type=int, default=100_000)
    ap.add_argument("--commit-tasks", type=int, default=2,
                    help="staging writers (Spark tasks) the --commit-scale records come from")
    ap.add_argument("--commit-sync", default="auto,fsync",
                    help="the commit's syncMethod values to time, interleaved")
    args = ap.parse_args()
    if args.commit_scale:
        scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_commit_"))
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            commit_scale(scratch, [int(c) for c in args.commit_scale.split(",")],
                         args.commit_records, args.repeat, args.commit_tasks,
                         [m.strip() for m in args.commit_sync.split(",") if m.strip()])
        finally:
            if not args.dir:
                shutil.rmtree(scratch, ignore_errors=True)
        return

    from tests.conftest import spark_env, spark_test_conf
    spark_env()
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(args.master).appName("bench_write")
    for k, v in spark_test_conf().items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_write_"))
    scratch.mkdir(parents=True, exist_ok=True)

    df = (spark.range(args.rows, numPartitions=cores)
          .selectExpr("concat('key-', cast(id as string)) as key",
                      "concat(lpad(cast(id as string), 20, '0'), repeat('v', 100)) as value")
          .cache())
    df.count()
    print(f"rows={args.rows} cores={cores} topic partitions={args.partitions} "
          f"value bytes={120} scratch={scratch}")

    def parquet(i):
        df.write.mode("overwrite").parquet(str(scratch / "parquet"))

    def kafkalog(codec, fsync=True, batch_size=None):
        def run(i):
            tag = ("" if fsync else "-nofsync") + (f"-b{batch_size}" if batch_size else "")
            root = scratch / f"kafkalog-{codec}{tag}-{i}"
            shutil.rmtree(root, ignore_errors=True)
            w = df.write.format("kafkalog").option("path", str(root)).option("topic", "bench") \
                .option("partitions", str(args.partitions)).option("compression", codec) \
                .option("fsync", str(fsync).lower())
            if batch_size:
                w = w.option("batch.size", str(batch_size))
            w.mode("append").save()
        return run

    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    writers = [("parquet", parquet)] + [(f"kafkalog {c}", kafkalog(c)) for c in codecs]
    if args.nofsync and "none" in codecs:
        writers.append(("kafkalog none nofsync", kafkalog("none", fsync=False)))
    if args.producer_batches and "none" in codecs:
        writers.append(("kafkalog none 16k batch", kafkalog("none", batch_size=16384)))
    if args.floors:
        for source in _floor_sources():
            spark.dataSource.register(source)

        def python_noop(i):
            df.write.format("bench_python_noop").mode("append").save()

        def python_write_fsync(i):
            root = scratch / f"python-write-fsync-{i}"
            shutil.rmtree(root, ignore_errors=True)
            df.write.format("bench_python_write_fsync").option("path", str(root)) \
                .mode("append").save()

        writers += [("python no-op", python_noop), ("python write+fsync", python_write_fsync)]
    for _, fn in writers:
        fn(-1)                                      # warm-up (JIT, Python workers)
    # Interleaved rounds: each round runs every writer once, so a change in machine load
    # hits all of them alike; medians and per-round ratios are reported.
    times = {label: [] for label, _ in writers}
    ratios = {label: [] for label, _ in writers[1:]}
    for i in range(args.repeat):
        for label, fn in writers:
            os.sync()           # untimed: no writer pays for an earlier one's dirty pages
            t0 = time.perf_counter()
            fn(i)
            times[label].append(time.perf_counter() - t0)
        for label in ratios:
            ratios[label].append(times["parquet"][-1] / times[label][-1])
    med = {label: statistics.median(ts) for label, ts in times.items()}
    for label, ts in times.items():
        print(f"{label:<24} median {med[label]:7.3f} s  {args.rows / med[label] / 1e6:6.2f} "
              f"M rows/s  best {min(ts):.3f} s  (runs: {', '.join(f'{x:.2f}' for x in ts)})",
              flush=True)
    pq_bytes = _tree_bytes(scratch / "parquet", "*.parquet")
    print(f"parquet          bytes written {pq_bytes / 1e6:8.1f} MB")
    for c in codecs:
        size = _tree_bytes(scratch / f"kafkalog-{c}-0", "*.log")
        print(f"kafkalog {c:<7} bytes written {size / 1e6:8.1f} MB")
    if args.floors:
        size = _tree_bytes(scratch / "python-write-fsync-0", "*")
        print(f"python write+fsync bytes written {size / 1e6:6.1f} MB")
    for label, rs in ratios.items():
        print(f"ratio {label} / parquet throughput: median {statistics.median(rs):.2f}x "
              f"(per round: {', '.join(f'{r:.2f}' for r in rs)})")
    os.sync()
    new, synced, cached = page_cache_rates(scratch)
    new_pieces = page_cache_rates(scratch, chunk=1 << 20)[0]
    print(f"page cache: pwrite into new pages {new:.2f} GB/s in 8 MiB writes, "
          f"{new_pieces:.2f} GB/s in 1 MiB writes, their fdatasync {synced:.2f} GB/s, "
          f"pwrite over cached pages {cached:.2f} GB/s")
    none_bytes = _tree_bytes(scratch / "kafkalog-none-0", "*.log") if "none" in codecs else 0
    steal = disk_write_steal(scratch, max(none_bytes, 64 << 20), cores) \
        if none_bytes else None
    if steal is not None:
        print(f"disk writes under CPU load: {none_bytes / 1e6:.1f} MB (kafkalog none's bytes) "
              f"written and fdatasynced while {cores} cores ran busy loops lost "
              f"{steal[0]:.2f} core-s to CPU steal (median of 3; {steal[1]:.2f} core-s "
              f"without the fdatasync), about {steal[0] / cores:.2f} s of a {cores}-core "
              f"write's wall time that Parquet (no fsync) does not pay; they were on disk "
              f"{steal[2]:.2f} s after the first was written (best of 3, "
              f"{none_bytes / steal[2] / 1e6:.0f} MB/s), against Parquet's median "
              f"{med['parquet']:.2f} s for its whole write")
    if not args.dir:
        shutil.rmtree(scratch, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()

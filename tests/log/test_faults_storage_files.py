"""Real disk-full and I/O errors on the files besides the log (a job's ``--summary-json``,
the report's JSON and HTML, a manifest, consumer_offsets' tables written by pyarrow's
Parquet writer) and on segment reads, with the one rule (``errors.storage_errno``) that
makes each our StorageError naming the errno and the file.

The faults come from the kernel: ENOSPC from a size-limited tmpfs filled so that only so
many bytes are free (a sweep of free sizes: nothing fits, part fits, all fits), EIO from a
FUSE passthrough (``tests/log/eiofs.py``) failing one system call (write, fsync, rename,
read) below pyarrow and us. After each failure the destination is the old file whole (or,
where the run got far enough, the new one whole), never empty or cut, and no temporary
file is left beside it.
"""
from __future__ import annotations

import errno
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.errors import (
    LogLayoutError,
    StorageError,
    as_storage_error,
    storage_errno,
    unwrap,
)
from spark_kafkalog.log import read_table
from spark_kafkalog.log.diagnose.manifest import save_manifest
from spark_kafkalog.log.write import write_table
from spark_kafkalog.report import write_outputs
from tests.log.eiofs import eio_fs, fuse_unavailable, set_rules
from tests.log.faulting import can_mount, fill, small_fs

needs_mount = pytest.mark.skipif(not can_mount(), reason="mounting a small filesystem "
                                 "needs root (CI runs as root)")


def needs_fuse():
    why = fuse_unavailable()
    if why is None:
        return
    if os.environ.get("CI"):            # `make test` installs it: missing is a failure there
        pytest.fail(f"FUSE is unavailable in CI: {why}")
    pytest.skip(why)


def big_doc(tag: str, n: int = 1500) -> dict:
    """A document of some 100 KiB as JSON (more than the free space of most sweep
    points)."""
    return {"tag": tag, "rows": [{"i": i, "note": f"{tag}-{i}-" + "x" * 20} for i in range(n)]}


def load(path: str):
    with open(path) as f:
        return json.load(f)


# ---- the rule itself, on errors the kernel and pyarrow really raise ------------------------
@needs_mount
def test_the_rule_on_real_errors_of_each_layer(tmp_path):
    with small_fs(256) as mnt:
        fill(mnt, 0)
        with pytest.raises(OSError) as py_err:        # Python's own file object
            with open(f"{mnt}/a", "wb") as f:
                f.write(b"x" * 65536)
        with pytest.raises(OSError) as arrow_err:     # pyarrow's writer: errno in its text
            pq.write_table(pa.table({"a": list(range(20000))}), f"{mnt}/b.parquet")
    assert "[errno 28]" in str(arrow_err.value).lower(), str(arrow_err.value)
    for err in (py_err.value, arrow_err.value):
        assert storage_errno(err) == errno.ENOSPC
        ours = as_storage_error(err, "/some/file", "write")
        assert isinstance(ours, StorageError) and ours.errno == errno.ENOSPC
        assert "ENOSPC" in str(ours) and "/some/file" in str(ours)
        status, line = jobkit.exit_status(err)        # one escaping unwrapped: exit 4
        assert status == jobkit.EXIT_FAILED and line.startswith("StorageError: ") \
            and "ENOSPC (No space left on device)" in line, line
    # a path that is wrong is bad input, not the storage failing
    with pytest.raises(OSError) as missing:
        open(tmp_path / "no" / "such", "rb")
    assert storage_errno(missing.value) is None
    assert jobkit.exit_status(missing.value)[0] == jobkit.EXIT_BAD_INPUT
    # a Python worker's traceback as Spark hands it back as text
    text = ("org.apache.spark.api.python.PythonException: Traceback (most recent call "
            "last):\n  File \"w.py\", line 1, in f\nOSError: [Errno 5] Input/output "
            "error: '/data/x.log'\n")
    got = unwrap(RuntimeError(text))
    assert isinstance(got, StorageError) and got.errno == errno.EIO
    assert "EIO" in str(got) and "/data/x.log" in str(got)
    # the JVM's (Spark's Parquet writer): no errno, the C library's text of ENOSPC
    jvm = RuntimeError("Job aborted.\nCaused by: java.io.IOException: "
                       f"{os.strerror(errno.ENOSPC)}\n\tat java.io.FileOutputStream")
    got = unwrap(jvm)
    assert isinstance(got, StorageError) and got.errno == errno.ENOSPC, got
    assert unwrap(RuntimeError("java.io.IOException: Mkdirs failed")) is None


# ---- ENOSPC: every file a job writes besides the log ----------------------------------------
def _emit(path, doc):
    out = io.StringIO()
    jobkit.emit(doc, "the job's line", path, out=out)
    return out.getvalue()


def _report(path, doc):
    write_outputs(doc, json_path=path)


def _manifest(path, doc):
    save_manifest(doc, path)


WRITERS = {"summary-json": _emit, "report-json": _report, "manifest": _manifest}


@needs_mount
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_full_disk_keeps_the_old_file(writer):
    write = WRITERS[writer]
    old, new = big_doc("old", 100), big_doc("new")
    with small_fs(1024) as mnt:
        path = f"{mnt}/out.json"
        write(path, old)
        size = len(json.dumps(new, indent=1))
        outcomes = []
        # from nothing free to room for all of it: the kernel refuses the create, a
        # write part way, or nothing
        for free in range(0, size + 40 * 1024, (size + 40 * 1024) // 8):
            filler = fill(mnt, free)
            try:
                printed = write(path, new)
                outcomes.append("ok")
                assert load(path) == new
                if writer == "summary-json":
                    assert printed == "the job's line\n"
            except StorageError as err:
                outcomes.append("ENOSPC")
                assert err.errno == errno.ENOSPC and "ENOSPC" in str(err), str(err)
                assert err.path and err.path.startswith(path), str(err)
                assert load(path) == old        # whole, not empty or cut
                assert jobkit.exit_status(err)[0] == jobkit.EXIT_FAILED
            assert sorted(os.listdir(mnt)) == ["filler", "out.json"], os.listdir(mnt)
            os.unlink(filler)
            write(path, old)
        print(f"{writer}: {outcomes}")
        assert "ENOSPC" in outcomes and "ok" in outcomes


@needs_mount
def test_full_disk_under_pyarrows_parquet_writer_in_consumer_offsets_output():
    """consumer_offsets' tables go through pyarrow's Parquet writer into a staging
    directory: a full disk is our StorageError naming the file (not pyarrow's bare
    OSError), and the old output stands once the staging is abandoned."""
    from spark_kafkalog.jobs.consumer_offsets import _Output, write_table as write_out

    table = pa.table({"group": [f"g{i}" for i in range(20000)],
                      "offset": pa.array(range(20000), pa.int64())})
    with small_fs(2048) as mnt:
        dest = f"{mnt}/offsets"
        first = _Output(dest)
        write_out(table.slice(0, 10), first, "commits", "parquet")
        first.commit()
        old = pq.read_table(f"{dest}/commits.parquet")
        outcomes = []
        for free in (0, 8 * 1024, 64 * 1024, 1024 * 1024):
            filler = fill(mnt, free)
            out = _Output(dest)
            try:
                write_out(table, out, "commits", "parquet")
                out.commit()
                outcomes.append("ok")
                assert pq.read_table(f"{dest}/commits.parquet").equals(table)
            except StorageError as err:
                out.abandon()
                outcomes.append("ENOSPC")
                assert err.errno == errno.ENOSPC, str(err)
                assert err.path.startswith(f"{mnt}/.offsets.kafkalog-new-"), str(err)
                assert pq.read_table(f"{dest}/commits.parquet").equals(old)
            assert sorted(os.listdir(mnt)) == ["filler", "offsets"], os.listdir(mnt)
            os.unlink(filler)
        print(f"consumer_offsets output: {outcomes}")
        assert outcomes[0] == "ENOSPC" and outcomes[-1] == "ok"


# ---- EIO from the kernel, through FUSE -----------------------------------------------------
@pytest.mark.parametrize("op,target", [("write", "out.json.tmp"), ("fsync", "out.json.tmp"),
                                       ("rename", "out.json.tmp"), ("fsyncdir", "/")])
def test_eio_on_the_summary_json(op, target):
    needs_fuse()
    old, new = big_doc("old", 10), big_doc("new", 10)
    with eio_fs() as (mnt, backing, rules):
        path = f"{mnt}/out.json"
        _emit(path, old)
        set_rules(rules, [{"op": op, "path": target, "errno": errno.EIO}])
        out = io.StringIO()
        with pytest.raises(StorageError) as info:
            jobkit.emit(new, "the job's line", path, out=out)
        err = info.value
        assert err.errno == errno.EIO and "EIO" in str(err), str(err)
        assert err.path and err.path.startswith(mnt), str(err)
        assert out.getvalue() == ""                 # no success line for a failed job
        assert jobkit.exit_status(err)[0] == jobkit.EXIT_FAILED
        set_rules(rules, [])
        # the directory fsync fails after the rename: the new file stands, whole
        assert load(path) == (new if op == "fsyncdir" else old)
        assert sorted(os.listdir(mnt)) == ["out.json"]


def test_eio_reading_a_segment_is_a_storage_error():
    """A segment whose read fails with EIO: our StorageError naming the segment, the
    position and EIO (not "cannot read segment" as a layout problem, bad input)."""
    needs_fuse()
    with eio_fs() as (mnt, backing, rules):
        root = f"{mnt}/log"
        write_table(root, "t", pa.table({"value": [b"v%d" % i for i in range(500)]}),
                    partitions=1)
        assert read_table(root, "t").num_rows == 500
        set_rules(rules, [{"op": "read", "path": "/t-0/00000000000000000000.log",
                           "errno": errno.EIO}])
        with pytest.raises(StorageError) as info:
            read_table(root, "t")
        err = info.value
        assert not isinstance(err, LogLayoutError)
        assert err.errno == errno.EIO and "EIO" in str(err), str(err)
        assert err.path.endswith("t-0/00000000000000000000.log"), str(err)
        assert jobkit.exit_status(err)[0] == jobkit.EXIT_FAILED
        set_rules(rules, [])
        assert read_table(root, "t").num_rows == 500


def test_eio_under_an_append_at_several_points():
    """EIO from the kernel on the n-th write, fsync or rename of a file under the log dir
    during an append (staging, segment, indexes, checkpoints, journal): our StorageError
    naming a file under the log dir and EIO, or (past the commit point) success; the
    log reads old or new; the same write run again lands once, nothing left behind."""
    needs_fuse()
    from spark_kafkalog.log.files import journal as jr
    from tests.log.faulting import assert_storage_error, leftovers
    from tests.log.test_faults_real_fs import is_new, rows, table
    import pyarrow.fs as pafs
    import shutil
    import warnings

    first, second = table(1, 400), table(2, 400)
    with eio_fs() as (mnt, backing, rules):
        base = f"{mnt}/base"
        write_table(base, "w", first, partitions=2)
        old = rows(base, "w")
        outcomes = []
        for op in ("write", "fsync", "rename"):
            for after in (0, 2, 5, 12):
                root = f"{mnt}/log"
                shutil.copytree(f"{backing}/base", f"{backing}/log")
                set_rules(rules, [{"op": op, "path": "/log/", "after": after,
                                   "errno": errno.EIO}])
                with warnings.catch_warnings(record=True):
                    warnings.simplefilter("always")
                    try:
                        write_table(root, "w", second, write_id="batch:eio")
                        outcome = "ok"
                    except StorageError as err:
                        assert_storage_error(err, errno.EIO, root)
                        outcome = "EIO"
                set_rules(rules, [])
                committed = jr.load(pafs.LocalFileSystem(), root, "w").is_committed(
                    "batch:eio")
                got = rows(root, "w")
                assert got == old if not committed else is_new(got, old, second), (op, after)
                write_table(root, "w", second, write_id="batch:eio")
                assert is_new(rows(root, "w"), old, second), (op, after)
                assert not leftovers(root), (op, after, leftovers(root))
                outcomes.append(f"{op}@{after}:{outcome}")
                shutil.rmtree(f"{backing}/log")
        print(f"append under EIO: {outcomes}")
        assert any(o.endswith(":EIO") for o in outcomes)

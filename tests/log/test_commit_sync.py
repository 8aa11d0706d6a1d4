"""How a commit makes its files durable (``AppendConfig.sync_method``): one syncfs of the
log dir's filesystem for a commit of many files, an fsync per file otherwise, and per-file
fsync wherever syncfs is unavailable or the file is on another filesystem. Durability
itself (a power loss) cannot be tested here; what each method calls, and that the log
written is the same, can."""
from __future__ import annotations

import ctypes
import errno
import os

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log.write import AppendConfig, flush
from tests.log.test_appender_util import R, read_kp, write

FS = pafs.LocalFileSystem()
needs_syncfs = pytest.mark.skipif(
    flush._libc_syncfs() is None, reason="no syncfs that reports errors (Linux < 5.8?)")


class Calls:
    """Counts syncfs calls (passing them on to the real one)."""

    def __init__(self, real):
        self.real = real
        self.fds: list[int] = []

    def __call__(self, fd):
        self.fds.append(fd)
        return self.real(fd)


def _parts(n_parts: int, n: int = 12) -> dict:
    return {p: [R(b"k%d" % i, b"v%d-%d" % (p, i) * 5, 1_700_000_000_000 + i)
                for i in range(n)] for p in range(n_parts)}


def _fsynced(monkeypatch) -> list[str]:
    """Paths os.fsync is called on, from now on."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_unknown_sync_method_is_refused():
    with pytest.raises(InvalidOptionError, match="syncMethod"):
        AppendConfig(sync_method="fdatasync")


@needs_syncfs
@pytest.mark.parametrize("method", ["syncfs", "fsync"])
def test_one_syncfs_replaces_the_fsync_of_each_file(tmp_path, monkeypatch, method):
    calls = Calls(flush._libc_syncfs())
    monkeypatch.setattr(flush, "_SYNCFS", calls)
    logs = {}
    for name in ("a", "b"):
        root = str(tmp_path / name)
        write(FS, root, "batch:w1", _parts(6), partitions=6, tasks=2)
        seen = _fsynced(monkeypatch)
        write(FS, root, "batch:w2", _parts(6), partitions=6, tasks=2,
              config=AppendConfig(sync_method=method if name == "a" else "fsync"))
        monkeypatch.undo()
        monkeypatch.setattr(flush, "_SYNCFS", calls)
        segment_files = [p for p in seen if "/t-" in p]
        if name == "a" and method == "syncfs":
            assert len(calls.fds) == 1 and segment_files == []
        else:
            # each .log and .timeindex (an .index the write adds no entry to is not touched)
            assert sum(p.endswith((".log", ".timeindex")) for p in segment_files) == 6 * 2
        calls.fds.clear()
        logs[name] = [read_kp(f"{root}/t-{p}") for p in range(6)]
    assert logs["a"] == logs["b"]


def test_auto_takes_syncfs_only_for_many_files_and_little_dirty(tmp_path, monkeypatch):
    root = str(tmp_path)
    monkeypatch.setattr(flush, "_libc_syncfs", lambda: (lambda fd: 0))
    monkeypatch.setattr(flush, "filesystem_type", lambda path: "ext4")
    monkeypatch.setattr(flush, "dirty_bytes", lambda: 10 << 20)
    many = 1000
    assert isinstance(flush.choose_syncer("auto", root, many), flush.FilesystemSyncer)
    assert isinstance(flush.choose_syncer("auto", root, flush.SYNCFS_MIN_FILES - 1),
                      flush.Syncer)
    assert isinstance(flush.choose_syncer("fsync", root, many), flush.Syncer)
    # a syncfs writes every dirty page of the filesystem: not worth it behind a lot of them
    monkeypatch.setattr(flush, "dirty_bytes",
                        lambda: many * flush.SYNCFS_DIRTY_BYTES_PER_FILE + 1)
    assert isinstance(flush.choose_syncer("auto", root, many), flush.Syncer)
    assert isinstance(flush.choose_syncer("syncfs", root, many), flush.FilesystemSyncer)
    monkeypatch.setattr(flush, "dirty_bytes", lambda: None)
    assert isinstance(flush.choose_syncer("auto", root, many), flush.Syncer)


def test_per_file_fsync_where_syncfs_is_unavailable_or_not_trusted(tmp_path, monkeypatch):
    root = str(tmp_path)
    monkeypatch.setattr(flush, "dirty_bytes", lambda: 0)
    monkeypatch.setattr(flush, "filesystem_type", lambda path: "fuse.sshfs")
    assert isinstance(flush.choose_syncer("syncfs", root, 1000), flush.Syncer)
    monkeypatch.setattr(flush, "filesystem_type", lambda path: "ext4")
    monkeypatch.setattr(flush, "_libc_syncfs", lambda: None)
    assert isinstance(flush.choose_syncer("syncfs", root, 1000), flush.Syncer)


def test_filesystem_type_reads_mountinfo(tmp_path):
    if not os.path.exists("/proc/self/mountinfo"):
        pytest.skip("no /proc")
    assert flush.filesystem_type(str(tmp_path))          # whatever it is, it is found
    if os.path.isdir("/dev/shm") and os.stat("/dev/shm").st_dev != os.stat(tmp_path).st_dev:
        assert flush.filesystem_type("/dev/shm") == "tmpfs"


@needs_syncfs
def test_a_file_on_another_filesystem_is_fsynced(tmp_path, monkeypatch):
    shm = "/dev/shm"
    if not os.path.isdir(shm) or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem")
    other = f"{shm}/kafkalog-test-{os.getpid()}"
    with open(other, "wb") as f:
        f.write(b"x")
    (tmp_path / "here").write_bytes(b"y")
    try:
        seen = _fsynced(monkeypatch)
        syncer = flush.FilesystemSyncer(str(tmp_path))
        syncer.fsync_and_close(os.open(other, os.O_RDONLY))
        syncer.fsync_and_close(os.open(tmp_path / "here", os.O_RDONLY))
        syncer.wait()
        assert seen == [other]
    finally:
        os.unlink(other)


@needs_syncfs
def test_a_syncfs_error_fails_the_wait(tmp_path):
    def failing(fd):
        ctypes.set_errno(errno.EIO)
        return -1
    syncer = flush.FilesystemSyncer(str(tmp_path))
    syncer._syncfs = failing
    syncer.fsync_dir(str(tmp_path))
    with pytest.raises(OSError) as info:
        syncer.wait()
    assert info.value.errno == errno.EIO
    syncer.wait()                                      # once: nothing left to do

"""Disk faults at a chosen system call: the fault-injection tests' harness.

Two ways to make a write path fail, each used where it is exact:

* :class:`FaultPlan`, the hook of ``spark_kafkalog.log.io.sysio`` (every create, write,
  fsync, truncate, rename, link, unlink, mkdir, directory fsync, syncfs and in-kernel copy
  of the writer, compaction and retention goes through it): records each call on a file
  under the log dir, and fails one chosen call with ``EIO`` or ``ENOSPC``; with
  ``full=True`` every later call that takes space (create, write, copy, link, mkdir)
  fails with ``ENOSPC`` too, as on a full disk, until :meth:`FaultPlan.free` (the
  rollback then cannot write either). Calls are keyed ``(op, file, n-th such call)``
  so a call made on a background thread (the commit's fsyncs) is the same call in
  every run, whatever the threads' order.
* :func:`small_fs`, a size-limited tmpfs or loop-mounted ext4 (root only), for true
  ``ENOSPC`` from the kernel wherever it comes (including pyarrow's own writes, which
  the hook does not see) and for the Spark-level cases, whose commit runs in a process
  the hook cannot reach.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import subprocess
import tempfile
import threading
import warnings

from spark_kafkalog.errors import KafkaLogError, StorageError
from spark_kafkalog.log.io import sysio

__all__ = ["FaultPlan", "injected", "count_calls", "small_fs", "can_mount",
           "assert_storage_error", "leftovers"]

#: the operations a full disk refuses (the others free space or only flush it)
SPACE_OPS = frozenset({"create", "write", "copy", "link", "mkdir"})
_TOKEN = re.compile(r"[0-9a-f]{8,}")


def _norm(root: str, path: str | None) -> str | None:
    if path is None:
        return None
    path = os.path.abspath(path)
    if path != root and not path.startswith(root + "/"):
        return None
    # write tokens and uuids differ between runs: the same call is the same key
    return _TOKEN.sub("*", os.path.relpath(path, root))


class FaultPlan:
    """The sysio fault hook for one run under ``root``: records every call on a file
    under it as ``(op, relative path, n)``; fails the call keyed ``fail`` with
    ``code``."""

    def __init__(self, root: str, fail: tuple | None = None, code: int = errno.EIO,
                 full: bool = False):
        self.root = os.path.abspath(root)
        self.fail = fail
        self.code = code
        self.full = full
        self.calls: list[tuple[str, str, int]] = []
        self.fired = False
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._full_now = False

    def __call__(self, op: str, path: str | None) -> None:
        rel = _norm(self.root, path)
        if rel is None or (op in ("unlink", "rename") and not os.path.lexists(path)):
            return      # not under the log dir, or a delete/rename of nothing: no call
        with self._lock:
            n = self._seen.get((op, rel), 0)
            self._seen[(op, rel)] = n + 1
            key = (op, rel, n)
            self.calls.append(key)
            if self._full_now and op in SPACE_OPS:
                raise OSError(errno.ENOSPC, "No space left on device (injected: full)", path)
            if key == self.fail and not self.fired:
                self.fired = True
                self._full_now = self.full
                raise OSError(self.code, f"{os.strerror(self.code)} (injected)", path)

    def free(self) -> None:
        """Space is freed: calls succeed again."""
        self._full_now = False


@contextlib.contextmanager
def injected(plan: FaultPlan):
    old = sysio.set_fault_hook(plan)
    try:
        yield plan
    finally:
        sysio.set_fault_hook(old)


def count_calls(root: str, fn) -> list[tuple[str, str, int]]:
    """The calls ``fn()`` makes on files under ``root``, in order (no fault)."""
    plan = FaultPlan(root)
    with injected(plan):
        fn()
    return plan.calls


def assert_storage_error(err: BaseException, code: int, root: str) -> None:
    """``err`` (or an error it was raised from or during) is our StorageError with errno
    ``code``, naming a file under ``root`` and the errno's name."""
    seen = []
    e: BaseException | None = err
    while e is not None and e not in seen:
        seen.append(e)
        if isinstance(e, StorageError) and e.errno == code:
            assert errno.errorcode[code] in str(e), str(e)
            assert e.path and os.path.abspath(e.path).startswith(os.path.abspath(root)), str(e)
            assert isinstance(err, StorageError), f"{type(err).__name__}: {err}"
            return
        e = e.__cause__ or e.__context__
    raise AssertionError(f"not our {errno.errorcode[code]} error: {type(err).__name__}: {err}")


#: names no finished or rolled-back operation may leave in a log dir
_LEFTOVER = re.compile(r"(^\.kafkalog-staging|\.tmp$|\.new$|\.cleaned$|\.swap$)")


def leftovers(root: str) -> list[str]:
    """Staging, temporary, ``.cleaned`` and ``.swap`` files anywhere under ``root``."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            if _LEFTOVER.search(name):
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


# ---- a small real filesystem ------------------------------------------------------------
def can_mount() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def small_fs(size_kib: int, kind: str = "tmpfs"):
    """A fresh filesystem of ``size_kib`` KiB mounted at a temporary directory
    (``tmpfs``, or ``ext4`` on a loop device: its syncfs and delayed allocation are
    a broker disk's); unmounted and removed afterwards. Root only."""
    mnt = tempfile.mkdtemp(prefix=f"kafkalog-{kind}-")
    image = None
    try:
        if kind == "tmpfs":
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", mnt],
                           check=True, capture_output=True)
        else:
            image = mnt + ".img"
            with open(image, "wb") as f:
                f.truncate(size_kib * 1024)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
                            image], check=True, capture_output=True)
            subprocess.run(["mount", "-o", "loop", image, mnt], check=True,
                           capture_output=True)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        with contextlib.suppress(OSError):
            os.rmdir(mnt)
        if image:
            with contextlib.suppress(OSError):
                os.unlink(image)


def fill(directory: str, leave_bytes: int) -> str:
    """Fill the filesystem of ``directory`` until about ``leave_bytes`` are free; returns
    the filler's path (delete it to free the space)."""
    path = os.path.join(directory, "filler")
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        want = max(free - leave_bytes, 0)
        chunk = b"\1" * 65536
        with contextlib.suppress(OSError):      # full before the count: as full as it gets
            while want > 0:
                want -= os.write(fd, chunk[:min(len(chunk), want)])
            os.fsync(fd)
    finally:
        os.close(fd)
    return path


def run_faulted(fn, plan: "FaultPlan"):
    """Run ``fn`` under ``plan``: ``("failed", err)`` or ``("ok", the messages of the
    warnings it gave)`` (past the commit point a write succeeds and warns of what failed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except KafkaLogError as err:
            return "failed", err
        except OSError as err:          # not ours: the assertion below names it
            return "failed", err
    return "ok", [str(w.message) for w in caught]


#: the two faults each call gets: EIO on that call alone, and ENOSPC on a disk that stays
#: full from that call on: ``(name, errno, full)``
MODES = [("EIO", errno.EIO, False), ("ENOSPC", errno.ENOSPC, True)]


def pick_calls(calls, every):
    """Every ``every``-th call, and each kind of call at least once."""
    chosen = {c for i, c in enumerate(calls) if i % every == 0}
    kinds = {}
    for c in calls:
        kinds.setdefault(c[0], c)
    return [c for c in calls if c in chosen or c in kinds.values()]

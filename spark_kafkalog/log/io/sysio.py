"""The local system calls that change files (create, write, fsync, truncate, rename, link,
unlink, mkdir, directory fsync, syncfs, in-kernel copy), each failing with
:class:`~spark_kafkalog.errors.StorageError` naming the operation, the file and the errno
(``ENOSPC``, ``EIO``, ...) instead of a bare ``OSError``. ``FileNotFoundError`` and
``FileExistsError`` pass through unchanged: callers decide on them.

The fault hook (tests, :func:`set_fault_hook`): called as ``hook(op, path)`` before each
operation; an ``OSError`` it raises fails that operation as the system call would. Off
(the default) it costs one global read per call. The environment variable
``SPARK_KAFKALOG_FAULTS`` (read once, at import) installs a counting hook in processes a
test cannot reach otherwise (jobs run as commands): ``<op>@<n>=<ERRNO>[,...]``, e.g.
``fsync@2=EIO`` fails the second fsync of the process, ``*@5=ENOSPC`` its fifth operation,
``*@5=KILL`` sends the process SIGKILL just before it (a crash at that point).
"""
from __future__ import annotations

import contextlib
import errno as _errno
import os
import signal
import threading
from typing import Callable

from spark_kafkalog.errors import StorageError, errno_text

__all__ = ["OPS", "set_fault_hook", "open_fd", "write_fully", "fsync", "ftruncate",
           "replace", "exchange", "link", "unlink", "makedirs", "rmdir", "utime", "fsync_dir",
           "syncfs", "copy_file_range", "storage_error", "remote", "WRITE_PIECE_BYTES"]

#: the operation names the hook sees
OPS = ("create", "open", "write", "fsync", "ftruncate", "rename", "link", "unlink", "mkdir",
       "rmdir", "utime", "fsync-dir", "syncfs", "copy")

#: the most one :func:`write_fully` system call writes (see there)
WRITE_PIECE_BYTES = 1024 * 1024

_hook: Callable[[str, str], None] | None = None


def set_fault_hook(hook: Callable[[str, str], None] | None):
    """Install ``hook`` (None: remove it); returns the previous one."""
    global _hook
    old, _hook = _hook, hook
    return old


_VERBS = {"create": "create", "open": "open", "write": "write to", "fsync": "fsync",
          "ftruncate": "truncate", "rename": "rename", "link": "link", "unlink": "delete",
          "mkdir": "create directory", "rmdir": "remove directory", "utime": "touch",
          "fsync-dir": "fsync directory", "syncfs": "syncfs the filesystem of",
          "copy": "copy into"}


def storage_error(op: str, path: str | None, err: OSError, detail: str = "") -> OSError:
    """The error to raise for ``err`` from ``op`` on ``path``: ``err`` itself when it is
    already ours or a missing/existing file, else a :class:`StorageError`."""
    if isinstance(err, (StorageError, FileNotFoundError, FileExistsError)):
        return err
    code = err.errno
    more = f" {detail}" if detail else ""
    if code is None:        # a remote filesystem's error (pyarrow's text says what)
        return StorageError(f"cannot {_VERBS.get(op, op)} file{more}: {err}", path=path)
    return StorageError(f"cannot {_VERBS.get(op, op)} file{more}: {errno_text(code)}",
                        path=path, errno=code)


@contextlib.contextmanager
def remote(op: str, path: str):
    """Around ``pyarrow.fs`` calls that change a file on a remote filesystem (object
    store, HDFS): an ``OSError`` left after the client's own retries is raised as
    :class:`StorageError` naming the object."""
    try:
        yield
    except OSError as err:
        raise storage_error(op, path, err) from err


def _call(op: str, path: str | None, fn: Callable, *args, detail: str = ""):
    """``fn(*args)`` as operation ``op`` on ``path``: the fault hook first, an OSError
    raised as :func:`storage_error` (``detail`` added to its message). The calls with
    rules of their own (a loop, a return code, a fallback errno) spell this out."""
    try:
        if _hook is not None:
            _hook(op, path)
        return fn(*args)
    except OSError as err:
        raise storage_error(op, path, err, detail) from err


def open_fd(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a file the writer changes (``create`` with ``O_CREAT``)."""
    return _call("create" if flags & os.O_CREAT else "open", path, os.open, path, flags, mode)


def write_fully(fd: int, data, position: int | None = None, path: str | None = None) -> None:
    """Write all of ``data`` to ``fd`` (at ``position`` with ``pwrite``; else at the file
    offset), at most :data:`WRITE_PIECE_BYTES` per system call: a write of 2 MiB or more
    gets 2 MiB page-cache folios, which were ~4x slower to fill on the machine measured
    (docs/PERFORMANCE.md, log/io). ``path`` names the file in an error."""
    view = memoryview(data).cast("B")
    try:
        while view:
            if _hook is not None:
                _hook("write", path)
            piece = view[:WRITE_PIECE_BYTES]
            n = os.write(fd, piece) if position is None else os.pwrite(fd, piece, position)
            view = view[n:]
            if position is not None:
                position += n
    except OSError as err:
        raise storage_error("write", path, err,
                            "" if position is None else f"at position {position}") from err


def fsync(fd: int, path: str | None) -> None:
    _call("fsync", path, os.fsync, fd)


def ftruncate(fd: int, size: int, path: str | None) -> None:
    _call("ftruncate", path, os.ftruncate, fd, size, detail=f"to {size} bytes")


def replace(src: str, dst: str) -> None:
    """``os.replace``; the error names the source and says where to."""
    _call("rename", src, os.replace, src, dst, detail=f"to {dst}")


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2
_renameat2 = None


def exchange(a: str, b: str) -> bool:
    """Swap the paths ``a`` and ``b`` (two directories, say) in one step: Linux's
    ``renameat2(RENAME_EXCHANGE)``, so no reader ever finds neither. False where the C
    library or the filesystem has no such call (then the caller renames twice)."""
    global _renameat2
    if _renameat2 is None:
        import ctypes

        fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", False)
        if fn:
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
        _renameat2 = (fn, ctypes.get_errno) if fn else False
    if not _renameat2:
        return False
    fn, get_errno = _renameat2
    try:
        if _hook is not None:
            _hook("rename", a)
        if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
            code = get_errno()
            if code in (_errno.ENOSYS, _errno.EINVAL, _errno.EOPNOTSUPP):
                return False
            raise OSError(code, os.strerror(code), a)
    except OSError as err:
        raise storage_error("rename", a, err, f"in exchange with {b}") from err
    return True


def link(src: str, dst: str) -> None:
    _call("link", dst, os.link, src, dst, detail=f"to {src}")


def unlink(path: str) -> None:
    _call("unlink", path, os.unlink, path)


def makedirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``."""
    # not _call: the hook sees a mkdir only where the directory is missing
    try:
        if _hook is not None and not os.path.isdir(path):
            _hook("mkdir", path)
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise storage_error("mkdir", path, err) from err


def rmdir(path: str) -> None:
    _call("rmdir", path, os.rmdir, path)


def utime(path: str) -> None:
    _call("utime", path, os.utime, path)


def fsync_dir(directory: str) -> None:
    """Make a local directory's entries (a create, rename or delete in it) durable."""
    try:        # the open is no operation the hook sees
        fd = os.open(directory or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as err:
        raise storage_error("fsync-dir", directory, err) from err
    try:
        _call("fsync-dir", directory, os.fsync, fd)
    finally:
        os.close(fd)


def syncfs(fn: Callable[[int], int], fd: int, path: str) -> None:
    """libc's ``syncfs`` (``fn``, from ctypes with ``use_errno``) of the filesystem
    holding ``path`` (open as ``fd``)."""
    try:
        if _hook is not None:
            _hook("syncfs", path)
        if fn(fd) != 0:
            import ctypes
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    except OSError as err:
        raise storage_error("syncfs", path, err) from err


def copy_file_range(src_fd: int, dst_fd: int, count: int, src_pos: int, dst_pos: int,
                    path: str) -> int:
    """``os.copy_file_range`` into ``path`` (``dst_fd``). The errors a caller falls back
    on (EXDEV, ENOSYS, EOPNOTSUPP, EINVAL) keep their errno, as every StorageError does."""
    return _call("copy", path, os.copy_file_range, src_fd, dst_fd, count, src_pos, dst_pos,
                 detail=f"at position {dst_pos}")


#: the "errno" of a rule that kills the process instead of failing the call
KILL = -9


class CountingFaults:
    """A hook that fails the ``n``-th call of an operation (``op`` ``*``: of any) with
    ``errno`` (:data:`KILL`: SIGKILLs the process before it); several rules, each
    counted on its own. Thread-safe."""

    def __init__(self, rules: list[tuple[str, int, int]]):
        self._rules = rules
        self._counts = [0] * len(rules)
        self._lock = threading.Lock()

    def __call__(self, op: str, path: str | None) -> None:
        with self._lock:
            for i, (want, n, code) in enumerate(self._rules):
                if want in ("*", op):
                    self._counts[i] += 1
                    if self._counts[i] == n:
                        if code == KILL:
                            os.kill(os.getpid(), signal.SIGKILL)
                        raise OSError(code, f"{os.strerror(code)} (injected)", path)


def _from_env(spec: str) -> CountingFaults:
    rules = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        try:
            where, _, name = item.partition("=")
            op, _, n = where.partition("@")
            name = name.strip().upper()
            code = KILL if name == "KILL" else getattr(_errno, name)
            if op not in OPS and op != "*":
                raise ValueError(op)
            rules.append((op, int(n), code))
        except (ValueError, AttributeError):
            raise ValueError(f"SPARK_KAFKALOG_FAULTS: cannot parse {item!r}: expected "
                             "<op>@<n>=<ERRNO or KILL> with op one of * " + " ".join(OPS)) from None
    return CountingFaults(rules)


if os.environ.get("SPARK_KAFKALOG_FAULTS"):
    _hook = _from_env(os.environ["SPARK_KAFKALOG_FAULTS"])

"""Page-cache and flush tuning of the write path, in one place: flushing staging files
behind the task writing them, dropping flushed pages from the page cache, asking for the
batch headers the commit reads back, and making the commit's files durable — fsyncs in
background threads, or for a commit of many files one ``syncfs`` of the log dir's
filesystem (:func:`choose_syncer`). None of it changes what is written or when it is
durable: everything the commit wrote is on disk before its commit point either way. A
killed process needs neither (the kernel keeps what was written); a power loss needs the
data before the journal's commit record, which a syncfs (ext4: the data written back,
then one journal commit and a device-cache flush) gives as the fsyncs do, with writeback
errors reported since Linux 5.8. Why each is done, measured, is in ``docs/PERFORMANCE.md``
(section ``log/write/flush.py``)."""
from __future__ import annotations

import errno
import mmap
import os
import queue
import threading
from typing import Iterable, Sequence

from spark_kafkalog.format import wire
from spark_kafkalog.log.io import sysio
from spark_kafkalog.log.write.config import DEFAULT_ADOPT_MIN_BYTES

#: a staging file as large as one the commit adopts (smaller ones are copied, so flushing
#: them early would write them twice) is flushed in the background from this size on,
#: then each time this many more bytes are staged in it
FLUSH_BEHIND_START = DEFAULT_ADOPT_MIN_BYTES
FLUSH_BEHIND_BYTES = 4 * 1024 * 1024
#: flushed staging pages are dropped from the page cache (in whole pages) only when the
#: file's batches average at least this many bytes (see :meth:`BehindFlush.drop_range`)
DROP_MIN_BATCH_BYTES = 64 * 1024
_CACHE_PAGE = mmap.PAGESIZE
#: bytes of a batch's header the commit reads back (baseOffset, length, magic)
HEADER_READ = wire.MAGIC_POS + 1
_FADVISE = getattr(os, "posix_fadvise", None)


class BehindFlush:
    """The flush-behind state of one staging file: how much of it was handed to the
    flusher, and which of its pages were dropped."""

    def __init__(self, path: str):
        self.path = path
        self.flushed = 0            # bytes handed to the flusher
        self._dropped = 0           # [0, _dropped) handed to the flusher to drop

    def grew(self, size: int, batches: int) -> None:
        """The file is now ``size`` bytes holding ``batches`` batches."""
        if size >= FLUSH_BEHIND_START and size - self.flushed >= FLUSH_BEHIND_BYTES:
            flusher().submit(self.path, self.drop_range(size, batches))
            self.flushed = size

    def finish(self, size: int, batches: int) -> None:
        """A file already being flushed (it will likely be adopted as a segment) gets its
        tail flushed too; the task does not wait for it."""
        if self.flushed and size > self.flushed:
            flusher().submit(self.path, self.drop_range(size, batches))
            self.flushed = size

    def drop_range(self, size: int, batches: int) -> list[tuple[int, int]]:
        """The byte range to drop from the page cache once what is staged now is flushed:
        from where the last range ended to the last whole page. None while the file's
        batches average under :data:`DROP_MIN_BATCH_BYTES`: then every few pages hold a
        header the commit reads back, which costs it more than the pages save."""
        lo, hi = self._dropped, size - size % _CACHE_PAGE
        if hi <= lo or size < DROP_MIN_BATCH_BYTES * batches:
            return []
        self._dropped = hi
        return [(lo, hi - lo)]


class _Flusher:
    """A daemon thread that ``fdatasync``s staging files behind the task writing them, then
    drops the ranges it is given from the page cache. Failures are ignored (the file may
    be gone: an aborted task); the commit's fsync is the one that counts. One per
    process (re-created after a fork)."""

    def __init__(self):
        self._pid = os.getpid()
        self._cv = threading.Condition()
        self._pending: list[str] = []
        self._drops: dict[str, list[tuple[int, int]]] = {}
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="kafkalog-flush-behind",
                                        daemon=True)
        self._thread.start()

    def submit(self, path: str, drop: Sequence[tuple[int, int]] = ()) -> None:
        """fdatasync ``path``, then drop the ``(offset, length)`` ranges of it from the
        page cache (clean by then: bytes written before this call)."""
        with self._cv:
            if path not in self._pending:
                self._pending.append(path)
            self._drops.setdefault(path, []).extend(drop)
            self._cv.notify()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until nothing is pending or being flushed (tests)."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending)
                path = self._pending.pop(0)
                drop = self._drops.pop(path, [])
                self._busy = True
            try:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                    for offset, length in drop if _FADVISE else ():
                        _FADVISE(fd, offset, length, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
            except OSError:
                pass
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()


_FLUSHER: _Flusher | None = None
_FLUSHER_LOCK = threading.Lock()


def flusher() -> _Flusher:
    global _FLUSHER
    with _FLUSHER_LOCK:
        if _FLUSHER is None or _FLUSHER._pid != os.getpid():
            _FLUSHER = _Flusher()
        return _FLUSHER


def will_need(fd: int, positions: Iterable[int]) -> None:
    """Ask for the pages holding the batch headers at ``positions`` of ``fd``, all at once
    (flush-behind may have dropped them), so they are read in parallel, not one fault at
    a time."""
    if _FADVISE:
        for position in positions:
            _FADVISE(fd, position, HEADER_READ, os.POSIX_FADV_WILLNEED)


def will_need_paths(wanted: Iterable[tuple[str, Iterable[int]]]) -> None:
    """:func:`will_need` for ``(path, header positions)`` pairs; files that cannot be opened
    are skipped (the commit reports what is wrong with them)."""
    if not _FADVISE:
        return
    for path, positions in wanted:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            will_need(fd, positions)
        finally:
            os.close(fd)


#: fsyncs a commit keeps in flight: they wait on the disk, not the CPU (the GIL is
#: released), and on ext4 concurrent fsyncs share one journal commit
SYNC_THREADS = 16


class Syncer:
    """fsyncs files in background threads (the kernel flushes in parallel with the
    copying of further data, and the fsyncs of many small files overlap each other);
    :meth:`wait` joins them and re-raises the first error. Each file handed over is
    closed by its thread. Threads start as files arrive, up to ``threads``."""

    def __init__(self, threads: int | None = None):
        self._max = threads or SYNC_THREADS
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fd, path = item
            try:
                sysio.fsync(fd, path)
            except BaseException as err:        # noqa: BLE001  (re-raised by wait)
                self._errors.append(err)
            finally:
                os.close(fd)

    def fsync_and_close(self, fd: int, path: str | None = None) -> None:
        """fsync and close ``fd`` (the file ``path``, named in an error)."""
        if len(self._threads) < self._max:
            t = threading.Thread(target=self._run, name="kafkalog-fsync", daemon=True)
            t.start()
            self._threads.append(t)
        self._queue.put((fd, path))

    def fsync_dir(self, directory: str) -> None:
        self.fsync_and_close(os.open(directory, os.O_RDONLY | os.O_DIRECTORY), directory)

    def wait(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join()
        self._threads = []
        if self._errors:
            err, self._errors = self._errors[0], []
            raise err


#: ``auto`` keeps per-file fsync for a commit of fewer files than this (a few ms at most)
SYNCFS_MIN_FILES = 64
#: ``auto`` takes syncfs only while the machine's dirty and in-writeback page cache, which
#: a syncfs may have to write too, is at most this much per file the commit writes (what
#: one file's fsync costs, in bytes the disk writes in the same time)
SYNCFS_DIRTY_BYTES_PER_FILE = 64 * 1024
#: filesystems whose syncfs commits their journal and flushes the device cache, as an
#: fsync does (FUSE, for one, does not pass a syncfs on to its server)
_SYNCFS_FS_TYPES = frozenset({"ext4", "xfs", "btrfs"})
_SYNCFS = None


def _libc_syncfs():
    """libc's ``syncfs`` when the kernel reports writeback errors through it (Linux 5.8
    on) and the system call is allowed, else None. Probed once per process, with a bad
    descriptor (flushes nothing)."""
    global _SYNCFS
    if _SYNCFS is None:
        _SYNCFS = False
        try:
            import ctypes
            release = tuple(int(x) for x in os.uname().release.split(".")[:2])
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.syncfs
            fn.argtypes = [ctypes.c_int]
            if os.uname().sysname == "Linux" and release >= (5, 8) and fn(-1) != 0 \
                    and ctypes.get_errno() == errno.EBADF:
                _SYNCFS = fn
        except (AttributeError, OSError, ValueError):
            pass
    return _SYNCFS or None


def filesystem_type(path: str) -> str | None:
    """The type of the mounted filesystem holding ``path`` (``/proc/self/mountinfo``,
    matched by device number), None when not found."""
    try:
        dev = os.stat(path).st_dev
        want = f"{os.major(dev)}:{os.minor(dev)}"
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == want and "-" in fields:
                    return fields[fields.index("-") + 1]
    except OSError:
        pass
    return None


def dirty_bytes() -> int | None:
    """The machine's dirty and in-writeback page cache (``/proc/meminfo``), None if
    unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            sizes = dict(line.split(":", 1) for line in f)
        return sum(int(sizes[k].split()[0]) * 1024 for k in ("Dirty", "Writeback"))
    except (OSError, KeyError, ValueError):
        return None


def choose_syncer(method: str, root: str, files: int) -> Syncer | FilesystemSyncer:
    """The syncer a commit writing about ``files`` files under the local log dir ``root``
    uses: ``method`` (one of :data:`~.config.SYNC_METHODS`) where the filesystem allows
    it, else per-file fsync."""
    if method == "fsync" or (method == "auto" and files < SYNCFS_MIN_FILES) \
            or _libc_syncfs() is None or filesystem_type(root) not in _SYNCFS_FS_TYPES:
        return Syncer()
    if method == "auto":
        dirty = dirty_bytes()
        if dirty is None or dirty > files * SYNCFS_DIRTY_BYTES_PER_FILE:
            return Syncer()
    return FilesystemSyncer(root)


class FilesystemSyncer:
    """A :class:`Syncer` that makes files durable with one ``syncfs`` of the log dir's
    filesystem in :meth:`wait`, instead of an fsync each: a file handed over is just
    closed (its dirty pages stay in the page cache until the syncfs writes them, with
    every other dirty page of that filesystem, and commits the filesystem's journal,
    which holds the new directory entries). A file on another filesystem (a mount under
    the log dir) is fsynced by a :class:`Syncer`. Writeback errors since the log dir was
    opened here (when the commit starts writing) are raised by :meth:`wait`, whichever
    file of that filesystem they came from."""

    def __init__(self, root: str):
        self._syncfs = _libc_syncfs()
        self._root = root
        self._fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        self._dev = os.fstat(self._fd).st_dev
        self._others: Syncer | None = None

    def fsync_and_close(self, fd: int, path: str | None = None) -> None:
        try:
            same = os.fstat(fd).st_dev == self._dev
        except BaseException:
            os.close(fd)
            raise
        if same:
            os.close(fd)
        else:
            if self._others is None:
                self._others = Syncer()
            self._others.fsync_and_close(fd, path)

    def fsync_dir(self, directory: str) -> None:
        self.fsync_and_close(os.open(directory, os.O_RDONLY | os.O_DIRECTORY), directory)

    def wait(self) -> None:
        """syncfs (and join the fsyncs of other filesystems' files); raises the first
        error. Once: the descriptor is closed."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            if self._others is not None:
                self._others.wait()
        finally:
            try:
                sysio.syncfs(self._syncfs, fd, self._root)
            finally:
                os.close(fd)


def fsync_dir(directory: str) -> None:
    """fsync a directory (the names created or removed in it), now."""
    sysio.fsync_dir(directory)

"""The writer's file operations beyond :mod:`spark_kafkalog.log.io`: list, truncate,
create, and a positional handle on a file it reads and patches (staging files, the active
segment). Segment and partition discovery reuse the read side's rules
(:mod:`spark_kafkalog.log.read.discovery`)."""
from __future__ import annotations

import contextlib
import os
import time

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import is_local, sysio, write_fully
from spark_kafkalog.log.model import Segment, parse_partition_dir_name
from spark_kafkalog.log.read.discovery import list_segments


def listdir(fs: pafs.FileSystem, path: str, prefix: str = "", *, stat: bool = True
            ) -> list[tuple[str, bool, int, float]]:
    """(name, is_dir, size, mtime seconds) of the entries of ``path`` whose names start
    with ``prefix`` ([] when absent). On local disk only those are stat'ed, and none with
    ``stat=False`` (size and mtime 0: a log dir of thousands of partitions is listed
    without a system call per partition)."""
    if is_local(fs):
        try:
            with os.scandir(path) as it:
                out = []
                for e in it:
                    if not e.name.startswith(prefix):
                        continue
                    if stat:
                        st = e.stat(follow_symlinks=True)
                        out.append((e.name, e.is_dir(), st.st_size, st.st_mtime))
                    else:
                        out.append((e.name, e.is_dir(), 0, 0.0))
                return out
        except FileNotFoundError:
            return []
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [(i.base_name, i.type == pafs.FileType.Directory, i.size or 0,
             i.mtime.timestamp() if i.mtime is not None else time.time()) for i in infos
            if i.base_name.startswith(prefix)]


def segments(fs: pafs.FileSystem, directory: str, *, exists: bool = False
             ) -> tuple[Segment, ...]:
    """The ``.log`` segments of a partition dir by base offset (none when the dir is
    absent; ``exists``: the caller has just listed it, so it is not looked up first).
    ``.swap`` files are not resolved: the writer never writes next to one."""
    if not exists and fs.get_file_info(directory).type != pafs.FileType.Directory:
        return ()
    return list_segments(fs, directory, resolve_swaps=False)[0]


def topic_partitions(fs: pafs.FileSystem, root: str, topic: str) -> list[int]:
    """Partition numbers of ``topic`` in log dir ``root`` (directories named exactly
    ``<topic>-<n>``; ``-delete``/``-future``/``-stray`` directories are not partitions)."""
    out = []
    for name, is_dir, _, _ in listdir(fs, root, f"{topic}-", stat=False):
        parsed = parse_partition_dir_name(name) if is_dir else None
        # the canonical spelling only: "t-01" is not partition 1 of "t" to this writer
        if parsed is not None and parsed[0] == topic and name == f"{topic}-{parsed[1]}":
            out.append(parsed[1])
    return sorted(out)


def truncate(path: str, size: int) -> None:
    fd = sysio.open_fd(path, os.O_WRONLY)
    try:
        sysio.ftruncate(fd, size, path)
        sysio.fsync(fd, path)
    finally:
        os.close(fd)


def write_new(fs: pafs.FileSystem, path: str, data: bytes, *, fsync: bool) -> None:
    """Create (or replace) ``path`` with ``data``; not atomic (callers make that safe)."""
    if is_local(fs):
        fd = sysio.open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            write_fully(fd, data, path=path)
            if fsync:
                sysio.fsync(fd, path)
        finally:
            os.close(fd)
    else:
        with sysio.remote("write", path), fs.open_output_stream(path) as f:
            f.write(data)


def make_dirs(fs: pafs.FileSystem, directory: str) -> None:
    if is_local(fs):
        sysio.makedirs(directory)
    else:
        fs.create_dir(directory, recursive=True)


def remove_empty_dir(fs: pafs.FileSystem, directory: str) -> None:
    if listdir(fs, directory, stat=False):
        return
    if is_local(fs):
        with contextlib.suppress(FileNotFoundError):
            sysio.rmdir(directory)
    else:
        fs.delete_dir(directory)


class FileHandle:
    """Positional reads of one file the writer works on (local: pread, and with
    ``writable`` pwrite through :attr:`fd`; elsewhere a RandomAccessFile). Unlike the
    reader's segment files it keeps no statistics and maps nothing: the commit patches
    staged batches in place before copying them."""

    def __init__(self, fs: pafs.FileSystem, path: str, *, writable: bool = False):
        self.path = path
        self.fd: int | None = None
        self._f = None
        if is_local(fs):
            self.fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        else:
            self._f = fs.open_input_file(path)

    def read(self, pos: int, n: int) -> bytes:
        if self.fd is not None:
            out = os.pread(self.fd, n, pos)
            if len(out) < n:
                # a short pread on a regular file only happens at EOF
                out += os.pread(self.fd, n - len(out), pos + len(out))
            return out
        return self._f.read_at(n, pos)

    def read_into(self, buf: bytearray | memoryview, pos: int) -> None:
        if self.fd is not None:
            view = memoryview(buf)
            while view:
                got = os.preadv(self.fd, [view], pos)
                if got <= 0:
                    raise LogLayoutError("file is shorter than its description",
                                         path=self.path, position=pos)
                view = view[got:]
                pos += got
        else:
            data = self._f.read_at(len(buf), pos)
            if len(data) != len(buf):
                raise LogLayoutError("file is shorter than its description", path=self.path,
                                     position=pos)
            buf[:] = data

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""Segment files renamed for delayed deletion: their names, the rename, how a reader
still finds a file it listed, and the purge.

Kafka (``LogFileUtils.DELETED_FILE_SUFFIX``, ``LogSegment.changeFileSuffixes``) deletes a
segment by renaming its files to ``<name>.deleted`` and removing them
``file.delete.delay.ms`` later; at startup (``LogLoader``) it removes every file whose
name ends in ``.deleted``. Retention and compaction do the same here, with two names:

- retention: Kafka's ``<name>.deleted``. It deletes below the new log start, a name
  never written again, and a reader off local disk finds the file by that name;
- compaction: ``<name>.<token>.deleted``, one token per compaction (the same when
  recovery redoes it). Its output takes the name of the first segment it replaces, which
  the next compaction within the delay deletes again: Kafka's name would replace a file a
  read listed but has not opened yet. Compaction is local only, where a reader finds a
  file by its inode (:func:`find_renamed`), so the name only has to be new.

A segment's files are renamed with one suffix, its ``.log`` last: a reader that found
the ``.log`` finds its indexes by the same suffix. Otherwise :func:`open_listed` and
:func:`read_listed` try Kafka's name, for a segment's files only (a missing journal or
checkpoint costs no second request). Discovery skips these files (``LEFTOVER_SUFFIXES``).
"""
from __future__ import annotations

import os
import posixpath
import re
import time
from typing import Callable, Iterable

import pyarrow.fs as pafs

from spark_kafkalog.log.io import sysio
from spark_kafkalog.log.io.fs import (delete_file, file_size, fsync_dir, is_local, list_dir,
                                      read_small_file)
from spark_kafkalog.log.model.names import DELETED_SUFFIX

__all__ = ["DELETED_SUFFIX", "FILE_DELETE_DELAY_MS", "deleted_name", "split_deleted",
           "rename_for_deletion",
           "purge_deleted_files", "same_file", "find_renamed", "open_listed", "read_listed"]

#: Kafka's ``file.delete.delay.ms`` default
FILE_DELETE_DELAY_MS = 60_000
#: a segment's files (``<20-digit offset>.<kind>``): only these are ever renamed
_SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")


def _nothing(_: str) -> None:
    pass


def deleted_name(path: str, token: str | None = None) -> str:
    """Where :func:`rename_for_deletion` puts ``path`` (see the module doc)."""
    return f"{path}.{token}{DELETED_SUFFIX}" if token else path + DELETED_SUFFIX


def split_deleted(name: str) -> tuple[str, str]:
    """``(name before the rename, the suffix it added)`` of a file name under either form
    of :func:`deleted_name` (``("<name>", ".deleted")`` or ``("<name>",
    ".<token>.deleted")``; the token form only for a segment's files); ``(name, "")`` for
    a name that is not one."""
    if not name.endswith(DELETED_SUFFIX):
        return name, ""
    stem = name[:-len(DELETED_SUFFIX)]
    head, dot, token = stem.rpartition(".")
    if dot and token and _SEGMENT_FILE.match(head):
        return head, name[len(head):]
    return stem, DELETED_SUFFIX


def rename_for_deletion(fs: pafs.FileSystem, paths: Iterable[str], token: str | None = None,
                        after: Callable[[str], None] = _nothing) -> None:
    """Rename each of ``paths`` that exists (a segment's files in order, ``.log`` last;
    all in one directory) to :func:`deleted_name`, its modification time set to now (the
    purge counts the delay from it), then fsync the directory. ``after(path)`` follows
    each rename."""
    local = is_local(fs)
    renamed = False
    for path in paths:
        target = deleted_name(path, token)
        if local:
            try:
                sysio.replace(path, target)
            except FileNotFoundError:
                continue
            sysio.utime(target)
        else:
            if file_size(fs, path) is None:
                continue
            fs.move(path, target)
        renamed = True
        after(path)
    if local and renamed:
        fsync_dir(posixpath.dirname(path))


def purge_deleted_files(fs: pafs.FileSystem, directory: str, delay_ms: int,
                        now_ms: float | None = None,
                        after: Callable[[str], None] = _nothing) -> tuple[int, int, int]:
    """Remove the ``.deleted`` files of ``directory`` renamed at least ``delay_ms`` ago
    (by their modification time); ``after(name)`` follows each removal. Returns ``(files
    removed, bytes removed, files left for later)``."""
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    files = nbytes = left = 0
    for info in list_dir(fs, directory):
        if info.type != pafs.FileType.File or not info.base_name.endswith(DELETED_SUFFIX):
            continue
        mtime = info.mtime.timestamp() * 1000 if info.mtime is not None else 0
        # a delay of 0 removes at once: a rename in this very millisecond has an
        # mtime a fraction past a clock read just before it
        if delay_ms > 0 and now_ms - mtime < delay_ms:
            left += 1
            continue
        if not delete_file(fs, info.path, missing_ok=True):
            continue
        files += 1
        nbytes += int(info.size or 0)
        after(info.base_name)
    return files, nbytes, left


def same_file(path: str, file_id: tuple) -> bool:
    """Whether the local file at ``path`` is the one a listing saw as ``file_id`` (device,
    inode: a rename keeps them)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == tuple(file_id)


def find_renamed(path: str, file_id: tuple) -> str | None:
    """Where the local file a listing saw at ``path`` as ``file_id`` is now that it was
    renamed for deletion under either name, or None (purged)."""
    directory, name = posixpath.split(path)
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    return next((f"{directory}/{n}" for n in names
                 if n != name and split_deleted(n)[0] == name
                 and same_file(f"{directory}/{n}", file_id)), None)


def open_listed(fs: pafs.FileSystem, path: str, open_file: Callable | None = None):
    """``open_file(path)`` (default ``fs.open_input_file``) for a file a reader listed;
    when a segment's file is gone from ``path``, Kafka's deleted name for it.
    FileNotFoundError when neither exists."""
    open_file = open_file or fs.open_input_file
    try:
        return open_file(path)
    except FileNotFoundError:
        if not _SEGMENT_FILE.match(posixpath.basename(path)):
            raise
        try:
            return open_file(deleted_name(path))
        except OSError:
            pass
        raise


def read_listed(fs: pafs.FileSystem, path: str, limit: int) -> bytes | None:
    """:func:`~spark_kafkalog.log.io.fs.read_small_file` of a file a reader listed, under
    Kafka's deleted name when a segment's file is gone from ``path``."""
    data = read_small_file(fs, path, limit)
    if data is None and _SEGMENT_FILE.match(posixpath.basename(path)):
        data = read_small_file(fs, deleted_name(path), limit)
    return data

"""Reading the segments a snapshot listed, even after a compaction replaced them.

A compaction (:mod:`spark_kafkalog.log.write.replace`) renames each replaced segment file
to ``<name>.<token>.deleted`` (kept for ``file.delete.delay.ms``), renames ``.swap`` files
into place, and may put a new file under an old name. A read opens each segment it
listed through :func:`open_segment`, which checks that the file under the listed name
still is the one listed (on a local filesystem by device and inode, which a rename
keeps; elsewhere by size, the last segment allowed to have grown) and otherwise opens
the listed file under its new name. :func:`pin_segments` does the same for a partition's
index files before a read seeks. When the listed file is gone for good it raises
:class:`~spark_kafkalog.errors.LogLayoutError` caused by ``FileNotFoundError``, which the
planning side answers by taking the snapshot again.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import replace

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import SegmentFile, file_size
from spark_kafkalog.log.model import PartitionDir, Segment

__all__ = ["pin_segments", "open_segment", "DELETED"]

DELETED = ".deleted"
SWAP = ".swap"
_INDEX_FIELDS = ("index_path", "timeindex_path", "txnindex_path")


def _matches(fs: pafs.FileSystem, path: str | None, seg: Segment, last: bool) -> bool:
    if path is None:
        return False
    if seg.file_id is not None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == tuple(seg.file_id)
    size = file_size(fs, path)
    return size is not None and (size >= seg.size if last else size == seg.size)


def _moved(seg: Segment, log_path: str) -> Segment:
    """``seg`` with its files under the names ``log_path`` implies (same suffix scheme)."""
    paths = {}
    for name in _INDEX_FIELDS:
        p = getattr(seg, name)
        if p is None:
            paths[name] = None
            continue
        p = _unswapped(p)                       # a .swap renamed into place
        if log_path.endswith(DELETED):          # <stem>.log.<token>.deleted
            p += log_path[len(_unswapped(seg.path)):]
        paths[name] = p if os.path.exists(p) else None
    return replace(seg, path=log_path, swap=False, **paths)


def _unswapped(path: str) -> str:
    return path[:-len(SWAP)] if path.endswith(SWAP) else path


def _pin(fs: pafs.FileSystem, seg: Segment, last: bool) -> Segment:
    if seg.file_id is None:
        # not listed on local disk: replacing segments needs atomic renames
        # (write.replace refuses other filesystems), so nothing renames them there, and
        # checking would cost a request per segment on an object store
        return seg
    if _matches(fs, seg.path, seg, last):
        return seg
    plain = _unswapped(seg.path)
    candidates = [plain] if plain != seg.path else []
    directory, name = posixpath.split(plain)
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    candidates += [f"{directory}/{n}" for n in sorted(names)
                   if n.startswith(name + ".") and n.endswith(DELETED)]
    for path in candidates:
        if _matches(fs, path, seg, last):
            return _moved(seg, path)
    raise LogLayoutError("segment listed by this read was replaced (by a compaction) and "
                         "its old copy is gone: read again", path=seg.path) \
        from FileNotFoundError(seg.path)


def pin_segments(fs: pafs.FileSystem, p: PartitionDir, start_offset: int,
                 end_offset: int) -> PartitionDir:
    """``p`` with each segment that may hold offsets in ``[start_offset, end_offset)``
    pointing at the files the listing saw (see the module doc)."""
    segs = list(p.segments)
    changed = False
    n = len(segs)
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < n else None
        if (nxt is not None and nxt <= start_offset) or seg.base_offset >= end_offset:
            continue
        pinned = _pin(fs, seg, i == n - 1)
        if pinned is not seg:
            segs[i] = pinned
            changed = True
    return replace(p, segments=tuple(segs)) if changed else p


def open_segment(fs: pafs.FileSystem, seg: Segment, last: bool, stats,
                 memory_map: bool = False) -> SegmentFile:
    """Open ``seg``'s ``.log`` for reading: the file that was listed, under whatever
    name a compaction has given it since."""
    if seg.file_id is None:         # not a local listing: see _pin
        return SegmentFile(fs, seg.path, seg.size, stats, memory_map)
    try:
        f = SegmentFile(fs, seg.path, seg.size, stats, memory_map)
    except LogLayoutError as err:
        if not isinstance(err.__cause__, FileNotFoundError):
            raise
        f = None
    if f is not None:
        # checked after opening: a rename between the check and the open would
        # otherwise go unseen (this way it only sends us to the new name)
        if _matches(fs, seg.path, seg, last):
            return f
        f.close()
    pinned = _pin(fs, seg, last)
    return SegmentFile(fs, pinned.path, seg.size, stats, memory_map)

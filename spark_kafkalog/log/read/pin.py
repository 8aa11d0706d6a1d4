"""Reading the segments a snapshot listed, even after a compaction replaced them.

A compaction (:mod:`spark_kafkalog.log.write.replace`) renames each replaced segment's
files for delayed deletion (:mod:`spark_kafkalog.log.io.deleted`), renames ``.swap``
files into place, and may put a new file under an old name; retention renames the
segments it deletes. A read opens each segment it listed on local disk through
:func:`open_segment`, which checks that the file under the listed name still is the one
listed (by device and inode, which a rename keeps) and otherwise opens the listed file
under its new name. :func:`pin_segments` does the same for a partition's index files
before a read seeks. When the listed file is gone for good it raises
:class:`~spark_kafkalog.errors.LogLayoutError` caused by ``FileNotFoundError``, which the
planning side answers by taking the snapshot again (a Spark task, which cannot, by listing
the partition again: :mod:`.purged`). Off local disk nothing is checked
(a segment's files fall back to their deleted name in :mod:`~spark_kafkalog.log.io`).
"""
from __future__ import annotations

import os
from dataclasses import replace

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import SegmentFile, find_renamed, same_file
from spark_kafkalog.log.model import PartitionDir, Segment

__all__ = ["pin_segments", "open_segment", "unswapped"]

SWAP = ".swap"
_INDEX_FIELDS = ("index_path", "timeindex_path", "txnindex_path")


def unswapped(path: str) -> str:
    """``path`` without a compaction's ``.swap`` suffix (the name it is renamed to)."""
    return path[:-len(SWAP)] if path.endswith(SWAP) else path


def _moved(seg: Segment, log_path: str) -> Segment:
    """``seg`` with its files under the names ``log_path`` implies: a ``.swap`` renamed
    into place, then maybe renamed for deletion with one suffix for all its files."""
    suffix = log_path[len(unswapped(seg.path)):]
    paths = {}
    for name in _INDEX_FIELDS:
        p = getattr(seg, name)
        if p is not None:
            p = unswapped(p) + suffix
        paths[name] = p if p is not None and os.path.exists(p) else None
    return replace(seg, path=log_path, swap=False, **paths)


def _pin(seg: Segment) -> Segment:
    if seg.file_id is None:
        # not listed on local disk: there only retention renames, to the name the io
        # layer falls back to (log.io.deleted); checking would cost a request per
        # segment on an object store
        return seg
    if same_file(seg.path, seg.file_id):
        return seg
    plain = unswapped(seg.path)
    if plain != seg.path and same_file(plain, seg.file_id):
        return _moved(seg, plain)
    renamed = find_renamed(plain, seg.file_id)
    if renamed is not None:
        return _moved(seg, renamed)
    raise LogLayoutError("segment listed by this read was replaced or deleted and its old "
                         "copy is gone: read again", path=seg.path) \
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
        pinned = _pin(seg)
        if pinned is not seg:
            segs[i] = pinned
            changed = True
    return replace(p, segments=tuple(segs)) if changed else p


def open_segment(fs: pafs.FileSystem, seg: Segment, stats,
                 memory_map: bool = False) -> SegmentFile:
    """Open ``seg``'s ``.log`` for reading: the file that was listed, under whatever
    name a compaction or retention has given it since."""
    if seg.file_id is None:         # not a local listing: see _pin
        return SegmentFile(fs, seg.path, seg.size, stats, memory_map)
    try:
        f = SegmentFile(fs, seg.path, seg.size, stats, memory_map)
        # checked after opening (the open file itself where it can be): a rename
        # between the check and the open would otherwise go unseen
        if f.is_file(seg.file_id):
            return f
        f.close()
    except LogLayoutError as err:
        if not isinstance(err.__cause__, FileNotFoundError):
            raise
    return SegmentFile(fs, _pin(seg).path, seg.size, stats, memory_map)

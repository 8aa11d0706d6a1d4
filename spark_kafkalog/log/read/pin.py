"""Reading the segments a snapshot listed, even after a compaction replaced them.

A compaction (:mod:`spark_kafkalog.log.write.replace`) renames replaced segment files to
``<name>.deleted`` and keeps them for ``file.delete.delay.ms``, and may put a new file
under an old name. A read planned on the old listing checks, before it reads, that each
segment it needs still is the file it listed (same size; the last segment may have
grown by appends) and otherwise reads the ``.deleted`` copy (or, for a listed
``.swap``, the file it was renamed to). When neither is there any more it raises
:class:`~spark_kafkalog.errors.LogLayoutError` caused by ``FileNotFoundError``, which the
planning side answers by taking the snapshot again.
"""
from __future__ import annotations

import os
from dataclasses import replace

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import file_size, is_local
from spark_kafkalog.log.model import PartitionDir, Segment

__all__ = ["pin_segments"]

DELETED = ".deleted"
SWAP = ".swap"


def _size(fs: pafs.FileSystem, path: str) -> int | None:
    if is_local(fs):
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None
    return file_size(fs, path)


def _moved(path: str | None, how: str) -> str | None:
    if path is None:
        return None
    if how == "deleted":
        return path + DELETED
    return path[:-len(SWAP)] if path.endswith(SWAP) else path


def _pin(fs: pafs.FileSystem, seg: Segment, last: bool) -> Segment:
    def fits(size: int | None) -> bool:
        return size is not None and (size >= seg.size if last else size == seg.size)

    if fits(_size(fs, seg.path)):
        return seg
    for how in (("swapped", "deleted") if seg.swap else ("deleted",)):
        path = _moved(seg.path, how)
        if fits(_size(fs, path)):
            paths = {}
            for name in ("index_path", "timeindex_path", "txnindex_path"):
                moved = _moved(getattr(seg, name), how)
                paths[name] = moved if moved is not None and _size(fs, moved) is not None \
                    else None
            return replace(seg, path=path, swap=False, **paths)
    raise LogLayoutError("segment listed by this read was replaced (by a compaction) and "
                         "its old copy is gone: read again", path=seg.path) \
        from FileNotFoundError(seg.path)


def pin_segments(fs: pafs.FileSystem, p: PartitionDir, start_offset: int,
                 end_offset: int) -> PartitionDir:
    """``p`` with each segment that may hold offsets in ``[start_offset, end_offset)``
    pointing at the file the listing saw (see the module doc)."""
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

"""Many small slices in one kernel call: what a packed Spark task mostly reads.

A topic of thousands of small partitions packs hundreds of slices into one task, each a
range inside one small segment. :func:`small_range` says whether a slice is such a range;
:func:`read_small` reads the segments of a run of them whole and decodes them with one
call (:func:`~spark_kafkalog.format.decode_segments`) into ONE record batch, with none of
the per-slice set-up, windows and columns of :func:`~.reader.read_partition`.

Contract: for a run it accepts, the rows are exactly what ``read_partition`` of each
slice gives (read_uncommitted), in slice order. It accepts a run only when each segment
is what ``read_partition``'s scan would pass as it stands (whole batches, CRCs, control
keys, offsets in order and inside the segment, the range ending in it); otherwise it
returns None and the caller reads those slices through ``read_partition``, which applies
the corruption policy and raises the errors naming file, position and offset.
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.format import decode_segments
from spark_kafkalog.log.io import read_whole_local
from spark_kafkalog.log.model import PartitionDir
from spark_kafkalog.log.read.pin import open_segment
from spark_kafkalog.log.read.reader import SMALL_SEGMENT_BYTES
from spark_kafkalog.log.read.scan import ReadStats

__all__ = ["small_range", "read_small"]

# offsets inside one segment are base + int32 (as scan.py checks them)
_SEGMENT_SPAN = 1 << 31


def small_range(p: PartitionDir, start_offset: int, end_offset: int,
                start_position: tuple[int, int] | None = None,
                max_bytes: int = SMALL_SEGMENT_BYTES) -> tuple | None:
    """The range ``[start_offset, end_offset)`` of ``p`` as an item for :func:`read_small`
    when it lies in one segment of at most ``max_bytes`` (and SMALL_SEGMENT_BYTES), which
    ``read_partition`` would start reading in (the position hint, if any, in it too);
    None otherwise (an empty range included)."""
    segs = p.segments
    if start_offset >= end_offset or not segs:
        return None
    i = p.segment_index_for(start_offset) if len(segs) > 1 else 0
    seg = segs[i]
    if seg.size > max_bytes or seg.size > SMALL_SEGMENT_BYTES:
        return None
    if start_position is not None and start_position[0] != seg.base_offset:
        return None
    if i + 1 < len(segs):
        nxt = segs[i + 1].base_offset
        if end_offset > nxt:
            return None
        # read_partition would read on into the next segment unless the range ends here
        return (seg, p.topic, p.partition, start_offset, end_offset, seg.base_offset, nxt,
                end_offset - 1)
    return (seg, p.topic, p.partition, start_offset, end_offset, seg.base_offset,
            seg.base_offset + _SEGMENT_SPAN, None)


def read_small(fs: pafs.FileSystem, items: Sequence[tuple], *, include_headers: bool = True,
               memory_map: bool = False) -> pa.RecordBatch | None:
    """The rows of the :func:`small_range` items, in order, as one record batch of
    ``record_schema(include_headers)``; None when any of them must be read through
    ``read_partition`` instead (see the module doc). Reads each segment whole (at most
    SMALL_SEGMENT_BYTES) and holds the run's segments at once: the caller bounds a
    run's bytes."""
    local = isinstance(fs, pafs.LocalFileSystem)
    segments = []
    for seg, topic, partition, lo, hi, seg_base, seg_hi, reach in items:
        data = None
        if local and seg.file_id is not None:
            data = read_whole_local(seg.path, seg.size, seg.file_id)
        if data is None:
            try:
                f = open_segment(fs, seg, ReadStats(), memory_map)
                try:
                    data = f.read(0, seg.size)
                finally:
                    f.close()
            except KafkaLogError:
                return None
        segments.append((data, topic, partition, lo, hi, seg_base, seg_hi, reach))
    try:
        return decode_segments(segments, include_headers=include_headers)
    except KafkaLogError:
        # records that do not decode: read_partition applies the policy and names the file
        return None

"""The one file-access layer of ``log/``: local files or ``pyarrow.fs`` (s3, gcs, hdfs).

Everything above it asks here to resolve a URI, list a directory, read a range or a
small file, write fully, replace a file atomically (right on every filesystem), delete,
and fsync a directory, and run per-partition work concurrently on remote
filesystems (:func:`map_io`); ranged segment reads (pread or memory maps) are in
:mod:`.segment_file`.
"""
from spark_kafkalog.log.io.fs import (
    DELETED_SUFFIX,
    FILESYSTEM_OPTIONS,
    WRITE_PIECE_BYTES,
    delete_file,
    file_size,
    fsync_dir,
    is_local,
    join,
    list_dir,
    open_segment_file,
    read_range,
    read_small_file,
    resolve_filesystem,
    write_atomic,
    write_fully,
)
from spark_kafkalog.log.io.parallel import map_io
from spark_kafkalog.log.io.segment_file import SegmentFile

__all__ = ["DELETED_SUFFIX", "FILESYSTEM_OPTIONS", "WRITE_PIECE_BYTES", "SegmentFile",
           "delete_file", "file_size", "fsync_dir", "is_local", "join", "list_dir", "map_io",
           "open_segment_file", "read_range", "read_small_file",
           "resolve_filesystem", "write_atomic", "write_fully"]

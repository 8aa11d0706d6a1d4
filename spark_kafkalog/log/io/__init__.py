"""The one file-access layer of ``log/``: local files or ``pyarrow.fs`` (s3, gcs, hdfs).

Everything above it asks here to resolve a URI, list a directory, read a range or a
small file, write fully, replace a file atomically (right on every filesystem), delete,
and fsync a directory, and run per-partition work concurrently on remote
filesystems (:func:`map_io`); ranged segment reads (pread or memory maps) are in
:mod:`.segment_file`, segment files renamed for delayed deletion in :mod:`.deleted`, the
system calls that change local files (their errors, the fault hook) in :mod:`.sysio`.
"""
from spark_kafkalog.log.io.deleted import (
    FILE_DELETE_DELAY_MS,
    find_renamed,
    open_listed,
    purge_deleted_files,
    read_listed,
    rename_for_deletion,
    same_file,
    split_deleted,
)
from spark_kafkalog.log.io.fs import (
    FILESYSTEM_OPTIONS,
    WRITE_PIECE_BYTES,
    delete_file,
    file_size,
    fsync_dir,
    fsync_file,
    is_local,
    join,
    list_dir,
    read_range,
    read_small_file,
    resolve_filesystem,
    write_atomic,
    write_fully,
    write_local_atomic,
)
from spark_kafkalog.log.io import sysio
from spark_kafkalog.log.io.parallel import map_io
from spark_kafkalog.log.io.segment_file import SegmentFile, read_whole_local

__all__ = ["FILE_DELETE_DELAY_MS", "FILESYSTEM_OPTIONS", "WRITE_PIECE_BYTES",
           "SegmentFile", "delete_file", "file_size", "find_renamed", "fsync_dir", "fsync_file",
           "is_local", "join", "list_dir", "map_io", "open_listed", "purge_deleted_files",
           "read_listed", "read_range", "read_small_file", "rename_for_deletion",
           "read_whole_local", "resolve_filesystem", "same_file", "split_deleted", "sysio",
           "write_atomic", "write_fully", "write_local_atomic"]

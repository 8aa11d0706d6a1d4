"""Moved to :mod:`spark_kafkalog.log.files.index`; this name stays only until the write
path (``log/write/``) imports from there. Do not add to it."""
from spark_kafkalog.log.files.index import (
    DEFAULT_MAX_INDEX_BYTES,
    INT32_MAX,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexBuilder,
    build_indexes,
)

__all__ = ["DEFAULT_MAX_INDEX_BYTES", "INT32_MAX", "OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE",
           "IndexBuilder", "build_indexes"]

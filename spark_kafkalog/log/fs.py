"""Moved to :mod:`spark_kafkalog.log.io`; this name stays only until the write path
(``log/write/``) imports from there. Do not add to it."""
from spark_kafkalog.log.io.fs import write_fully

__all__ = ["write_fully"]

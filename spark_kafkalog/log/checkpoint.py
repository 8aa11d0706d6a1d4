"""Moved to :mod:`spark_kafkalog.log.files.checkpoint`; this name stays only until the
write path (``log/write/``) imports from there. Do not add to it."""
from spark_kafkalog.log.files.checkpoint import read_checkpoint, write_checkpoint

__all__ = ["read_checkpoint", "write_checkpoint"]

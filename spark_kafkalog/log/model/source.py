"""What the read functions need of a set of log dirs (``LogDirs`` is the implementation)."""
from __future__ import annotations

from typing import Protocol

import pyarrow.fs as pafs

from spark_kafkalog.log.model.segment import PartitionDir

__all__ = ["LogSource"]


class LogSource(Protocol):
    """Log dirs as seek/state/isolation/reader use them: the filesystem the partitions'
    paths are in, and the root checkpoints' entries for a partition."""
    filesystem: pafs.FileSystem

    def checkpointed_high_watermark(self, p: PartitionDir) -> int | None: ...

    def checkpointed_log_start_offset(self, p: PartitionDir) -> int | None: ...

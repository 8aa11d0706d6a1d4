"""Kafka's storage layout, read through ``pyarrow.fs`` (local, s3, gcs, hdfs).

Public API (the Spark layer and the CLI use these names; see /work/briefs/LOG_API.md):

- filesystems: :func:`resolve_filesystem`
- layout: :class:`LogDirs`, :class:`PartitionDir`, :class:`Segment`,
  :class:`PartitionState` (``LogDirs.state``), ``LogDirs.offset_for_timestamp``
- reading: :func:`read_partition`, :func:`read_table`, :func:`split_points`,
  :class:`ReadStats`
- snapshots and commits: :func:`topic_states` (every partition of a topic at one
  journal state), :func:`topic_snapshot`, :func:`latest_offsets` (a stream's
  latestOffset), :func:`list_commits` / :class:`Commit` (versions to read as of)
- inspection: :func:`inspect_partition`, :func:`inspect_log_dirs`; for one file,
  :func:`partition_of_segment` + :func:`scan_windows` (batch headers, window by window)
- files: :func:`read_offset_index`, :func:`read_time_index`, :func:`read_txn_index`,
  :func:`read_checkpoint`, :func:`write_checkpoint`, :func:`read_producer_snapshot`,
  :func:`read_leader_epoch_checkpoint`

Nothing here knows about Spark. Everything that crosses to executors pickles.
"""
from spark_kafkalog.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
    read_leader_epoch_checkpoint,
    write_checkpoint,
)
from spark_kafkalog.log.fs import resolve_filesystem
from spark_kafkalog.log.index import (
    OffsetIndex,
    TimeIndex,
    read_offset_index,
    read_time_index,
)
from spark_kafkalog.log.inspect import (
    PartitionInfo,
    Problem,
    SegmentInfo,
    inspect_log_dirs,
    inspect_partition,
)
from spark_kafkalog.log.layout import (
    LogDirs,
    PartitionDir,
    Segment,
    is_internal_topic,
    parse_partition_dir_name,
    partition_of_segment,
)
from spark_kafkalog.log.reader import list_commits, read_partition, read_table
from spark_kafkalog.log.seek import offset_for_timestamp, split_points
from spark_kafkalog.log.segment import (
    ReadStats,
    SkippedRange,
    TornTailWarning,
    Window,
    scan_windows,
)
from spark_kafkalog.log.snapshot import Commit, TopicSnapshot, topic_snapshot
from spark_kafkalog.log.state import (
    PartitionState,
    latest_offsets,
    partition_state,
    topic_states,
)
from spark_kafkalog.log.txn import AbortedTxns, read_producer_snapshot, read_txn_index

__all__ = [
    "AbortedTxns", "Commit", "TopicSnapshot", "latest_offsets", "list_commits",
    "topic_snapshot", "topic_states", "LEADER_EPOCH_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT", "LogDirs",
    "OffsetIndex", "PartitionDir", "PartitionInfo", "PartitionState", "Problem",
    "RECOVERY_POINT_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "ReadStats", "Segment",
    "SegmentInfo", "SkippedRange", "TimeIndex", "TornTailWarning", "inspect_log_dirs",
    "inspect_partition", "is_internal_topic", "offset_for_timestamp",
    "parse_partition_dir_name", "partition_of_segment", "partition_state", "read_checkpoint",
    "read_leader_epoch_checkpoint", "read_offset_index", "read_partition",
    "read_producer_snapshot", "read_table", "read_time_index", "read_txn_index",
    "resolve_filesystem", "scan_windows", "split_points", "Window", "write_checkpoint",
]

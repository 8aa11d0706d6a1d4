"""Kafka's storage layout, read through ``pyarrow.fs`` (local, s3, gcs, hdfs).

Sub-packages (see docs/ARCHITECTURE.md): ``model`` (partition dirs, segments, state,
names; no I/O), ``io`` (the one file-access layer), ``files`` (index, txn index,
snapshot and checkpoint files), ``read`` (discovery, scan, seek, isolation, state,
reader, snapshot), ``write`` (the writer), ``diagnose`` (inspect, verify, dump). The names below are the public API the Spark
layer and the CLI use. Nothing here knows about Spark; what crosses to executors pickles.
A read of a topic takes one snapshot (:func:`topic_states`): every partition at the
same committed write; :func:`list_commits` lists the versions a read can ask for.
"""
from spark_kafkalog.log.diagnose.findings import Problem
from spark_kafkalog.log.diagnose.inspect import (
    PartitionInfo,
    SegmentInfo,
    inspect_log_dirs,
    inspect_partition,
)
from spark_kafkalog.log.files.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
    read_leader_epoch_checkpoint,
    write_checkpoint,
)
from spark_kafkalog.log.files.index import (
    OffsetIndex,
    TimeIndex,
    read_offset_index,
    read_time_index,
)
from spark_kafkalog.log.files.txn import AbortedTxns, read_producer_snapshot, read_txn_index
from spark_kafkalog.log.io import resolve_filesystem
from spark_kafkalog.log.model import (
    PartitionDir,
    PartitionState,
    Segment,
    is_internal_topic,
    parse_partition_dir_name,
)
from spark_kafkalog.log.read.coordinator import (
    read_cluster_metadata,
    read_group_state,
    read_transaction_state,
)
from spark_kafkalog.log.read.discovery import LogDirs, partition_of_segment
from spark_kafkalog.log.read.reader import list_commits, read_partition
from spark_kafkalog.log.read.typed_table import read_table
from spark_kafkalog.log.read.scan import (
    ReadStats,
    SkippedRange,
    TornTailWarning,
    Window,
    scan_windows,
)
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.log.read.seek import offset_for_timestamp, split_points
from spark_kafkalog.log.read.snapshot import Commit, TopicSnapshot, topic_snapshot
from spark_kafkalog.log.read.state import (
    latest_offsets,
    partition_state,
    topic_states,
)

__all__ = [
    "AbortedTxns", "Commit", "TopicSnapshot", "latest_offsets", "list_commits",
    "topic_snapshot", "topic_states", "LEADER_EPOCH_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT", "LogDirs",
    "OffsetIndex", "PartitionDir", "PartitionInfo", "PartitionState", "Problem",
    "RECOVERY_POINT_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "ReadStats", "Segment",
    "SegmentInfo", "SkippedRange", "TimeIndex", "TornTailWarning", "inspect_log_dirs",
    "inspect_partition", "is_internal_topic", "offset_for_timestamp",
    "parse_partition_dir_name", "partition_of_segment", "partition_state", "read_checkpoint",
    "read_leader_epoch_checkpoint", "read_offset_index", "read_partition",
    "read_cluster_metadata", "read_group_state", "read_producer_snapshot", "read_registry",
    "read_table",
    "read_transaction_state",
    "read_time_index", "read_txn_index",
    "resolve_filesystem", "scan_windows", "split_points", "Window", "write_checkpoint",
]

"""The log's model: partition dirs, segments, partition state and Kafka's naming rules.

Plain values and pure functions; nothing here reads a file.
"""
from spark_kafkalog.log.model.names import (
    HIDDEN_TOPICS,
    INTERNAL_TOPICS,
    METADATA_TOPIC,
    is_internal_topic,
    is_legal_topic,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from spark_kafkalog.log.model.segment import PartitionDir, Segment
from spark_kafkalog.log.model.source import LogSource
from spark_kafkalog.log.model.state import DataLoss, PartitionState

__all__ = ["DataLoss", "HIDDEN_TOPICS", "INTERNAL_TOPICS", "LogSource", "METADATA_TOPIC", "PartitionDir",
           "PartitionState", "Segment", "is_internal_topic", "is_legal_topic",
           "parse_partition_dir_name", "parse_segment_file_name"]

"""Log maintenance a broker's log manager and cleaner do, offline over a log dir at rest
and under the writer's lock: compaction (:mod:`.compact`, decisions in :mod:`.cleaner`,
each group's new segment written by :mod:`.cleaned_segment`), landed whole through the
writer's journal (:mod:`spark_kafkalog.log.write.replace`), and retention
(:mod:`.retention`)."""
from spark_kafkalog.log.maintain.compact import (
    Compaction,
    CompactSettings,
    PartitionCompaction,
    check_compactable,
    compact_partition,
    compact_topic,
)

__all__ = ["Compaction", "CompactSettings", "PartitionCompaction", "check_compactable",
           "compact_partition", "compact_topic"]

"""Names in a broker's log dir: topics, partition directories, segment files.

Kafka's rules (``Topic.validate``, ``LocalLog.parseTopicPartitionName``, ``LogFileUtils``):
a topic is 1-249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``; a partition dir is
``<topic>-<partition>`` split at the LAST ``-``; a segment file is the base offset as 20
digits plus a suffix. Pure functions, no I/O.
"""
from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["METADATA_TOPIC", "INTERNAL_TOPICS", "HIDDEN_TOPICS", "MAX_TOPIC_LENGTH",
           "WRITE_PROTECTED_TOPICS", "is_internal_topic", "is_legal_topic",
           "internal_write_refusal",
           "parse_partition_dir_name", "parse_segment_file_name", "DELETED_SUFFIX",
           "LEFTOVER_SUFFIXES"]

METADATA_TOPIC = "__cluster_metadata"
#: topics a listing leaves out unless asked for by name (the KRaft metadata log)
HIDDEN_TOPICS = frozenset({METADATA_TOPIC})
#: internal topics a consumer's pattern subscription excludes by default
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", METADATA_TOPIC,
                             "__share_group_state"})
#: topics only a broker (or its tiered-storage plugin) writes: a broker refuses a
#: client's produce to them (``ReplicaManager``: "Cannot append to internal topic")
WRITE_PROTECTED_TOPICS = INTERNAL_TOPICS | {"__remote_log_metadata"}
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(rf"[a-zA-Z0-9._-]{{1,{MAX_TOPIC_LENGTH}}}")
_SKIP_DIR_SUFFIXES = ("-delete", "-future", "-stray")
_REMOTE_INDEX_CACHE = "remote-log-index-cache"
_SEGMENT_FILE = re.compile(r"^(\d+)\.(log|index|timeindex|txnindex|snapshot)(\.swap)?$")
#: Kafka's suffix for a file waiting for its delayed deletion (see log.io.deleted)
DELETED_SUFFIX = ".deleted"
#: files a broker leaves behind in a partition dir that are not part of the log
LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".cleaned", ".tmp")


def is_internal_topic(topic: str) -> bool:
    """Kafka's internal topics (excluded from pattern subscriptions by default)."""
    return topic in INTERNAL_TOPICS


def internal_write_refusal(topic: str, allow: str) -> str | None:
    """Why a write into ``topic`` is refused (None when it is not a broker's internal
    topic); ``allow``: how the caller says the write is deliberate."""
    if topic not in WRITE_PROTECTED_TOPICS:
        return None
    return (f"topic {topic!r} is an internal topic: only the broker writes it (a broker "
            f"refuses a client's append to it, \"Cannot append to internal topic\"); if "
            f"this write is deliberate (restoring a copy of it), set {allow}")


def is_legal_topic(topic: str) -> bool:
    """Whether ``topic`` is a name Kafka accepts (Topic.validate: 1-249 characters of
    ``[a-zA-Z0-9._-]``, not ``.`` or ``..``; so no path escapes the log dir)."""
    return bool(_LEGAL_TOPIC.fullmatch(topic)) and topic not in (".", "..")


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for a current partition dir name, None for anything else
    (``-delete``/``-future``/``-stray`` dirs, ``remote-log-index-cache``, names that are
    not ``<legal topic>-<non-negative int>``)."""
    if not name or "-" not in name or name == _REMOTE_INDEX_CACHE:
        return None
    if name.endswith(_SKIP_DIR_SUFFIXES):
        return None
    topic, _, part = name.rpartition("-")
    if not topic or not part.isdigit() or not part.isascii():
        return None
    if not is_legal_topic(topic):
        return None
    partition = int(part)
    if partition > 0x7FFFFFFF:
        return None
    return topic, partition


@lru_cache(maxsize=1 << 14)     # the same names recur in every partition dir
def parse_segment_file_name(name: str) -> tuple[int, str, bool] | None:
    """``(base offset, kind, is swap)`` of a segment file name (kind: log, index,
    timeindex, txnindex, snapshot), None for any other name."""
    m = _SEGMENT_FILE.match(name)
    if m is None:
        return None
    return int(m.group(1)), m.group(2), m.group(3) is not None

"""The coordinators' internal topics of a log dir, decoded: ``__consumer_offsets`` into
committed offsets and group metadata, ``__transaction_state`` into transactions
(:mod:`spark_kafkalog.format.coordinator` does the bytes).

Each partition is read in bounded windows up to what a consumer sees (the high
watermark; under read_committed, the default, the last stable offset, and the records
of aborted transactional offset commits are left out, as the group coordinator does).
"""
from __future__ import annotations

from typing import Callable, Mapping

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.format.cluster_metadata_tables import MetadataState
from spark_kafkalog.format.coordinator import GroupState, TransactionState
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.reader import read_partition
from spark_kafkalog.log.read.scan import ReadStats

__all__ = ["CLUSTER_METADATA", "CONSUMER_OFFSETS", "TRANSACTION_STATE",
           "read_cluster_metadata", "read_group_state", "read_transaction_state"]

CLUSTER_METADATA = "__cluster_metadata"
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"


def _feed(state, path, topic: str, isolation_level: str, filesystem_options,
          progress: Callable[[str], None] | None):
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    stats = ReadStats()
    for p in logdirs.partitions(topic):
        st = logdirs.state(p, isolation_level=isolation_level, timestamps=False)
        before = state.records
        try:
            for rb in read_partition(logdirs, p, start_offset=st.log_start_offset,
                                     end_offset=st.upper_bound,
                                     isolation_level=isolation_level,
                                     include_headers=False, stats=stats):
                state.add(rb)
                state.bytes_read = stats.bytes_read
        except KafkaLogError as e:
            raise e.at(path=e.path or p.path) from e
        if progress is not None:
            progress(f"{topic}-{p.partition}: {state.records - before} records")
    return state


def read_group_state(path, *, latest: bool = True, as_of: int | None = None,
                     isolation_level: str = "read_committed",
                     filesystem_options: Mapping | None = None,
                     progress: Callable[[str], None] | None = None) -> GroupState:
    """``__consumer_offsets`` of the log dir(s) at ``path`` (a URI, a list, or a
    :class:`LogDirs`) as a :class:`GroupState`: ``.commits()``, ``.groups()``,
    ``.other_records()`` (Arrow tables). ``latest``: one row per key, tombstones
    deleting; else every record. ``as_of`` (epoch ms): records written after it are
    ignored. ``progress`` is called with a line per partition read.

    Raises LogLayoutError when the log dirs hold no ``__consumer_offsets``;
    CoordinatorRecordError (naming the partition dir and record offset) for a key or
    value that does not decode."""
    return _feed(GroupState(latest=latest, as_of=as_of), path, CONSUMER_OFFSETS,
                 isolation_level, filesystem_options, progress)


def read_transaction_state(path, *, latest: bool = True, as_of: int | None = None,
                           isolation_level: str = "read_committed",
                           filesystem_options: Mapping | None = None,
                           progress: Callable[[str], None] | None = None
                           ) -> TransactionState:
    """``__transaction_state`` as a :class:`TransactionState` (``.transactions()``);
    arguments and errors as :func:`read_group_state`."""
    return _feed(TransactionState(latest=latest, as_of=as_of), path, TRANSACTION_STATE,
                 isolation_level, filesystem_options, progress)


def read_cluster_metadata(path, *, filesystem_options: Mapping | None = None
                          ) -> MetadataState:
    """The KRaft ``__cluster_metadata`` log of the metadata log dir at ``path`` (the
    ``metadata.log.dir``, or a ``log.dirs`` entry holding ``__cluster_metadata-0``) as a
    :class:`MetadataState`: ``.records()``, ``.of(type)``, ``.topics()``, ``.configs()``,
    ``.features()``, ``.brokers()``, ``.producer_ids()`` (Arrow tables). The whole log is
    read (a KRaft log has no high watermark checkpoint); snapshots (``.checkpoint``) are
    not: records a snapshot replaced and the log no longer holds are not seen."""
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options,
                                                             include_internal=True)
    state = MetadataState()
    for p in logdirs.partitions(CLUSTER_METADATA):
        st = logdirs.state(p, timestamps=False)
        try:
            for rb in read_partition(logdirs, p, start_offset=st.log_start_offset,
                                     end_offset=st.log_end_offset, include_headers=False):
                state.add(rb)
        except KafkaLogError as e:
            raise e.at(path=e.path or p.path) from e
    return state

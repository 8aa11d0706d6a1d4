"""What a write is configured with: segment and index sizes, save modes, the topics it
goes to, the names Kafka gives segment files, and the crash tests' fault hook."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format import wire
from spark_kafkalog.log.files.index import DEFAULT_MAX_INDEX_BYTES
from spark_kafkalog.log.files.lock import DEFAULT_LOCK_TIMEOUT_S

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
#: see :attr:`AppendConfig.adopt_min_bytes`
DEFAULT_ADOPT_MIN_BYTES = 16 * 1024 * 1024
#: staged bytes copied per read/patch/write step (bounds the driver's memory)
COPY_WINDOW_BYTES = 8 * 1024 * 1024
#: a window of staged batches at least this large is patched in the staging file and
#: copied by the kernel (``copy_file_range``); a smaller one is read, patched and
#: written from memory (fewer system calls: a write to thousands of small partitions
#: has thousands of small runs)
KERNEL_COPY_MIN_BYTES = 256 * 1024
#: orphaned staging files (a job whose driver died before commit) older than this are
#: deleted by recovery
STAGING_TTL_S = 24 * 3600
#: an abandoned write's marker (``abort_write``) is deleted by any later write's sweep once
#: older than this: long after Spark has killed the failed job's remaining tasks (their
#: Python workers go within ``spark.python.task.killTimeout``, 2 s by default)
ABORTED_MARKER_TTL_S = 600

MODES = ("append", "overwrite", "errorifexists", "ignore")
#: how a commit makes what it wrote durable before its commit point: ``fsync`` each file
#: (and each directory that gained a name); ``syncfs`` the log dir's filesystem once
#: (Linux >= 5.8 on a local ext4, xfs or btrfs; elsewhere per file); ``auto`` syncfs for a
#: commit of many files when little else waits to be written (:func:`.flush.choose_syncer`)
SYNC_METHODS = ("auto", "fsync", "syncfs")
#: how a write's records get their offsets: assigned from the log end, or kept as staged
OFFSET_MODES = ("assign", "preserve")

#: called with the name of each step of a commit (``"locked"``, ``"begun"``, ``"append"``,
#: ``"synced"``, ``"committed:<topic>"``, ...): the crash tests kill the process there
Fault = Callable[[str], None]


def no_fault(_point: str) -> None:
    return None


def watcher(hook: Fault) -> Fault:
    """Mark ``hook`` as one that only watches the steps (timing them) and never stops the
    process there: the commit then writes each window in one piece, as with no hook
    (see :func:`splits_writes`)."""
    hook.splits_writes = False
    return hook


no_fault = watcher(no_fault)


def splits_writes(fault: Fault) -> bool:
    """Whether the commit writes each window in two halves with the ``append-partial``
    step between them (for a hook that may kill the process there: the crash tests)."""
    return getattr(fault, "splits_writes", True)


def segment_file(directory: str, base_offset: int, suffix: str = ".log") -> str:
    """``<dir>/<20-digit zero-padded base offset><suffix>``, as Kafka names segments."""
    return f"{directory}/{base_offset:020d}{suffix}"


def partition_dir(root: str, topic: str, partition: int) -> str:
    return f"{root.rstrip('/')}/{topic}-{partition}"


def norm_root(root: str) -> str:
    return root.rstrip("/") or "/"


@dataclass(frozen=True)
class AppendConfig:
    """How segments are written. ``no_append=None`` picks append for local filesystems
    and new-segment-per-commit elsewhere."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES
    no_append: bool | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S
    fsync: bool = True
    #: how ``fsync`` is done, one of :data:`SYNC_METHODS`
    sync_method: str = "auto"
    #: a staged section in a file of its own (``StagingWriter(per_partition_files=True)``)
    #: at least this large becomes a new segment by renaming the file into the partition
    #: directory, instead of being copied into the active segment (local filesystems)
    adopt_min_bytes: int = DEFAULT_ADOPT_MIN_BYTES

    def __post_init__(self):
        if self.segment_bytes < wire.V2_HEADER_SIZE:
            raise InvalidOptionError(f"option 'segment.bytes': {self.segment_bytes} is too "
                                     "small for one record batch")
        if self.index_interval_bytes < 0:
            raise InvalidOptionError("option 'index.interval.bytes' must be >= 0")
        if self.sync_method not in SYNC_METHODS:
            raise InvalidOptionError(f"option 'syncMethod': {self.sync_method!r} is not one "
                                     f"of {', '.join(SYNC_METHODS)}")


@dataclass(frozen=True)
class TopicSpec:
    """A topic a write goes to: the partition count to create it with when it does not
    exist (None: the largest partition staged + 1, for rows that each named their
    partition), and the count the rows were partitioned for (None: no check)."""

    topic: str
    partitions_if_new: int | None = 1
    expected_partitions: int | None = None

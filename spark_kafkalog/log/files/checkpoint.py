"""Kafka's text checkpoint files, read and written exactly as the broker does (format
below)."""
# Every checkpoint file (``CheckpointFile`` in Kafka's server-common) is UTF-8 text::
#
#     <version>            line 1, an int; 0 for every file read here
#     <entry count>        line 2, an int
#     <entry>              one line per entry, fields separated by whitespace
#
# An empty file (or one with only the version line) holds no entries. Entries by file:
#
# - ``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``,
#   ``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint`` (at a log-dir root):
#   ``<topic> <partition> <offset>`` (OffsetCheckpointFile).
# - ``leader-epoch-checkpoint`` (in a partition dir): ``<epoch> <start offset>``, in epoch
#   order, epochs and start offsets both increasing (LeaderEpochCheckpointFile).
#
# The broker writes them to ``<name>.tmp``, fsyncs and renames; :func:`write_checkpoint`
# does the same (see :func:`spark_kafkalog.log.io.write_atomic`).
from __future__ import annotations

import posixpath
from typing import Mapping

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import file_size, read_small_file, write_atomic

__all__ = [
    "CHECKPOINT_VERSION", "REPLICATION_OFFSET_CHECKPOINT", "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT", "CLEANER_OFFSET_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT",
    "parse_checkpoint", "format_checkpoint", "read_checkpoint", "write_checkpoint",
    "advance_checkpoint",
    "parse_leader_epoch_checkpoint", "read_leader_epoch_checkpoint", "MAX_CHECKPOINT_BYTES",
    "format_leader_epoch_checkpoint", "write_leader_epoch_checkpoint",
    "leader_epochs_from_start", "leader_epochs_at", "truncate_leader_epochs",
]

CHECKPOINT_VERSION = 0
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

# A checkpoint lists at most every partition of a broker's log dir: a few MiB is plenty.
MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024


def _lines(data: bytes, path: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LogLayoutError(f"checkpoint file is not UTF-8 text (byte {err.start})",
                             path=path, position=err.start) from err
    # Java's BufferedReader.readLine splits on \n, \r and \r\n; so does splitlines for these.
    return text.splitlines()


def _int_line(line: str, lineno: int, path: str, what: str) -> int:
    try:
        return int(line.strip())
    except ValueError:
        raise LogLayoutError(f"malformed checkpoint line {lineno} ({what}): {line!r}",
                             path=path) from None


def _entries(data: bytes, path: str, fields: int) -> list[list[str]]:
    """Validate version and count lines; return each entry split into ``fields`` fields."""
    lines = _lines(data, path)
    if not lines:
        return []
    version = _int_line(lines[0], 1, path, "version")
    if version != CHECKPOINT_VERSION:
        raise LogLayoutError(f"unrecognised checkpoint version {version}, expected "
                             f"{CHECKPOINT_VERSION}", path=path)
    if len(lines) < 2:
        return []
    expected = _int_line(lines[1], 2, path, "entry count")
    entries = []
    for lineno, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if len(parts) != fields:
            raise LogLayoutError(f"malformed checkpoint line {lineno}: {line!r} (expected "
                                 f"{fields} fields)", path=path)
        entries.append(parts)
    if len(entries) != expected:
        raise LogLayoutError(f"checkpoint file announces {expected} entries but holds "
                             f"{len(entries)}", path=path)
    return entries


def parse_checkpoint(data: bytes, path: str = "<checkpoint>") -> dict[tuple[str, int], int]:
    """Parse an OffsetCheckpointFile: ``{(topic, partition): offset}``."""
    result: dict[tuple[str, int], int] = {}
    for lineno, (topic, partition, offset) in enumerate(_entries(data, path, 3), start=3):
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError:
            raise LogLayoutError(f"malformed checkpoint line {lineno}: "
                                 f"{topic} {partition} {offset}", path=path) from None
    return result


def format_checkpoint(mapping: Mapping[tuple[str, int], int]) -> bytes:
    """The bytes Kafka writes for ``mapping`` (entries sorted for reproducibility)."""
    lines = [str(CHECKPOINT_VERSION), str(len(mapping))]
    for topic in {topic for topic, _ in mapping}:      # each name once, not per partition
        if not topic or any(c.isspace() for c in topic):
            raise LogLayoutError(f"cannot checkpoint topic name {topic!r}")
    for (topic, partition), offset in sorted(mapping.items()):
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_checkpoint(fs: pafs.FileSystem, path: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from an offset checkpoint file; ``{}`` when the file
    does not exist or is empty. Malformed content raises LogLayoutError naming the file."""
    data = read_small_file(fs, path, MAX_CHECKPOINT_BYTES)
    if data is None:
        return {}
    return parse_checkpoint(data, path)


def write_checkpoint(fs: pafs.FileSystem, path: str,
                     mapping: Mapping[tuple[str, int], int]) -> None:
    """Atomically replace an offset checkpoint file (tmp, fsync, rename)."""
    write_atomic(fs, path, format_checkpoint(mapping))


def advance_checkpoint(fs: pafs.FileSystem, path: str, topic: str,
                       offsets: Mapping[int, int]) -> None:
    """Move ``topic``'s entries of the offset checkpoint at ``path`` up to ``offsets``
    (``{partition: offset}``): an entry never goes down, other entries stay, a missing
    file starts empty, and the file is written only when an entry changed. The caller
    holds the root's :class:`~spark_kafkalog.log.files.lock.CheckpointLock`."""
    current = read_checkpoint(fs, path) if file_size(fs, path) is not None else {}
    merged = dict(current)
    for p, v in offsets.items():
        merged[(topic, p)] = max(int(current.get((topic, p), -1)), v)
    if merged != current:
        write_checkpoint(fs, path, merged)


def parse_leader_epoch_checkpoint(data: bytes, path: str = "<checkpoint>"
                                  ) -> list[tuple[int, int]]:
    """``[(epoch, start_offset), ...]`` in file order."""
    result = []
    for lineno, (epoch, offset) in enumerate(_entries(data, path, 2), start=3):
        try:
            result.append((int(epoch), int(offset)))
        except ValueError:
            raise LogLayoutError(f"malformed checkpoint line {lineno}: {epoch} {offset}",
                                 path=path) from None
    return result


def read_leader_epoch_checkpoint(fs: pafs.FileSystem, path: str) -> list[tuple[int, int]]:
    """Entries of a partition's ``leader-epoch-checkpoint``; ``[]`` when absent."""
    data = read_small_file(fs, path, MAX_CHECKPOINT_BYTES)
    if data is None:
        return []
    return parse_leader_epoch_checkpoint(data, path)


def format_leader_epoch_checkpoint(entries: list[tuple[int, int]]) -> bytes:
    """The bytes Kafka writes for ``[(epoch, start_offset), ...]`` (in the given order)."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{int(epoch)} {int(start)}" for epoch, start in entries]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_leader_epoch_checkpoint(fs: pafs.FileSystem, path: str,
                                  entries: list[tuple[int, int]]) -> None:
    """Atomically replace a partition's ``leader-epoch-checkpoint`` (tmp, fsync, rename)."""
    write_atomic(fs, path, format_leader_epoch_checkpoint(entries))


def leader_epochs_from_start(entries: list[tuple[int, int]], log_start: int,
                             path: str = "<checkpoint>") -> list[tuple[int, int]]:
    """The entries once the log start offset moved to ``log_start``: Kafka's
    ``LeaderEpochFileCache.truncateFromStart``. Going up the epochs, every entry starting at
    or below ``log_start`` goes; the last of them comes back starting at ``log_start``
    (the epoch the new first offset belongs to). Entries must increase in both fields (a
    file the broker wrote); anything else raises LogLayoutError naming ``path``."""
    for (e0, s0), (e1, s1) in zip(entries, entries[1:]):
        if e1 <= e0 or s1 <= s0:
            raise LogLayoutError(f"leader epoch entry ({e1}, {s1}) does not follow "
                                 f"({e0}, {s0}): epochs and start offsets must both "
                                 "increase", path=path, offset=s1)
    below = [e for e in entries if e[1] <= log_start]
    if not below:
        return list(entries)
    return [(below[-1][0], log_start)] + entries[len(below):]


def leader_epochs_at(fs: pafs.FileSystem, directory: str, log_start: int
                     ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """``(entries, entries once the log starts at log_start)`` of the partition dir's
    ``leader-epoch-checkpoint`` (:func:`leader_epochs_from_start`); None when it has
    none. A malformed file raises LogLayoutError naming it: callers check before they
    move a log start, so the truncation after it cannot fail."""
    path = posixpath.join(directory, LEADER_EPOCH_CHECKPOINT)
    data = read_small_file(fs, path, MAX_CHECKPOINT_BYTES)
    if data is None:
        return None
    entries = parse_leader_epoch_checkpoint(data, path)
    return entries, leader_epochs_from_start(entries, log_start, path)


def truncate_leader_epochs(fs: pafs.FileSystem, directory: str, log_start: int) -> bool:
    """Truncate the partition dir's ``leader-epoch-checkpoint`` from the start at
    ``log_start`` (Kafka's ``truncateFromStart``, which a broker also redoes from the
    log-start checkpoint when it loads the log), one atomic write, only when that
    changes it: idempotent. True when it wrote."""
    epochs = leader_epochs_at(fs, directory, log_start)
    if epochs is None or epochs[1] == epochs[0]:
        return False
    write_leader_epoch_checkpoint(fs, posixpath.join(directory, LEADER_EPOCH_CHECKPOINT),
                                  epochs[1])
    return True

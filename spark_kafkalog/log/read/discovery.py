"""Log-dir discovery: topics, partitions and segments as a broker's startup finds them.

A broker's ``log.dirs`` holds, per root::

    <root>/replication-offset-checkpoint        high watermarks
    <root>/log-start-offset-checkpoint          log start offsets
    <root>/recovery-point-offset-checkpoint, cleaner-offset-checkpoint, meta.properties
    <root>/<topic>-<partition>/                 one dir per partition replica
        <20-digit base offset>.log               a segment
        <base>.index / .timeindex / .txnindex    its indexes
        <offset>.snapshot                        producer state as of offset
        leader-epoch-checkpoint, partition.metadata

Rules (LogManager.loadLogs, LocalLog.parseTopicPartitionName, LogLoader):

- the partition number follows the LAST ``-`` (topics may contain ``-``, ``.``, ``_``);
- ``<topic>-<p>.<id>-delete`` / ``-future`` / ``-stray`` dirs are not the partition's
  current replica and are skipped (a ``-future`` copy loses to the regular dir);
- files at a root, ``remote-log-index-cache`` and dirs that are not ``<topic>-<int>``
  are skipped; the KRaft metadata log ``__cluster_metadata-0`` is listed only when asked
  for by name or with ``include_internal=True``;
- in a partition dir, ``.deleted`` and ``.cleaned`` files are leftovers and ignored; a
  ``<base>.log.swap`` completes an interrupted compaction or split: it replaces the
  segments whose base offsets fall in ``[swap base, swap next offset)`` (swaps at or above
  the smallest ``.cleaned`` offset belong to an unfinished split and are ignored) — the
  reader never sees both a swap and a segment it replaces;
- the same partition as a regular dir in two roots is an error (Kafka refuses to start).
"""
from __future__ import annotations

import logging
import os
import posixpath
from typing import Iterable, Mapping, Sequence

import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError, as_storage_error
from spark_kafkalog.log.files.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
)
from spark_kafkalog.log.io import is_local, join, list_dir, map_io, resolve_filesystem
from spark_kafkalog.log.model import (
    HIDDEN_TOPICS,
    PartitionDir,
    PartitionState,
    Segment,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from spark_kafkalog.log.model.names import LEFTOVER_SUFFIXES
from spark_kafkalog.log.read.scan import segment_next_offset
from spark_kafkalog.log.read.seek import offset_for_timestamp
from spark_kafkalog.log.read.state import partition_state

__all__ = ["LogDirs", "list_segments", "partition_of_segment"]

log = logging.getLogger(__name__)

#: listings of one partition dir in a row while segment files vanish under them (each
#: retention or compaction step renames a few; the snapshot's own retries come after)
_RELISTS = 5


def _dir_files(fs: pafs.FileSystem, path: str, infos) -> list[tuple[str, str, object]]:
    """``(name, path, info)`` of the files in directory ``path``. On local disk ``info``
    is an ``os.DirEntry`` (no ``stat`` until a size is asked for: only segments need
    one), else the ``pyarrow.fs.FileInfo`` of ``infos`` or of a listing."""
    if infos is None and is_local(fs):
        try:
            with os.scandir(path) as it:
                return [(e.name, f"{path}/{e.name}", e) for e in it if e.is_file()]
        except FileNotFoundError as err:
            raise LogLayoutError("log directory does not exist", path=path) from err
        except OSError as err:
            raise (as_storage_error(err, path, "list")
                   or LogLayoutError(f"cannot list directory: {err}", path=path)) from err
    return [(i.base_name, i.path, i) for i in (list_dir(fs, path) if infos is None else infos)
            if i.type == pafs.FileType.File]


def _subdirs(fs: pafs.FileSystem, path: str) -> list[tuple[str, str]]:
    """``(name, path)`` of the directories in ``path``. On local disk from the entries'
    types (``os.scandir``: no ``stat`` of each, as a ``pyarrow`` listing makes)."""
    if is_local(fs):
        try:
            with os.scandir(path) as it:
                return [(e.name, posixpath.join(path, e.name)) for e in it if e.is_dir()]
        except FileNotFoundError as err:
            raise LogLayoutError("log directory does not exist", path=path) from err
        except OSError as err:
            raise (as_storage_error(err, path, "list")
                   or LogLayoutError(f"cannot list directory: {err}", path=path)) from err
    return [(i.base_name, i.path) for i in list_dir(fs, path)
            if i.type == pafs.FileType.Directory]


def _size(info) -> int:
    return info.stat().st_size if isinstance(info, os.DirEntry) else int(info.size or 0)


def list_segments(fs: pafs.FileSystem, path: str, *, resolve_swaps: bool = True,
                  infos: Iterable[pafs.FileInfo] | None = None
                  ) -> tuple[tuple[Segment, ...], tuple[tuple[int, str], ...]]:
    """Segments and producer snapshots of one partition dir, as a broker would load them.

    Files are grouped by base offset; a ``.log`` makes a segment and its index files are
    attached when present. Orphan index files, ``.deleted``/``.cleaned``/``.tmp`` leftovers
    and unrelated files are ignored. Valid ``.swap`` segments replace what they swap
    out (see the module docstring); computing a swap's extent reads its batch headers.
    ``infos``: the directory's listing when the caller has just made it (else the
    directory is listed, again when a file it named vanished before it was looked at)."""
    if infos is not None:
        return _segments(fs, path, _dir_files(fs, path, infos), resolve_swaps)
    return _listed(fs, path, resolve_swaps)[1:]


def _listed(fs: pafs.FileSystem, path: str, resolve_swaps: bool = True
            ) -> tuple[list, tuple[Segment, ...], tuple[tuple[int, str], ...]]:
    """``(files, segments, snapshots)`` of a fresh listing of the partition dir
    ``path``. A segment file the listing named but that was gone when it was looked at
    (renamed for deletion by retention or a compaction between the two) makes it list
    the directory again, up to :data:`_RELISTS` times; then the LogLayoutError (caused
    by FileNotFoundError) goes to the caller, whose snapshot is taken again."""
    listings = 0
    while True:
        files = _dir_files(fs, path, None)
        listings += 1
        try:
            return (files,) + _segments(fs, path, files, resolve_swaps)
        except LogLayoutError as err:
            if listings >= _RELISTS or not isinstance(err.__cause__, FileNotFoundError):
                raise


def _segments(fs: pafs.FileSystem, path: str, files: list, resolve_swaps: bool = True
              ) -> tuple[tuple[Segment, ...], tuple[tuple[int, str], ...]]:
    """:func:`list_segments` of the listing ``files`` (:func:`_dir_files`)."""
    logs: dict[int, tuple[str, object]] = {}            # base -> (path, info)
    indexes: dict[tuple[int, str], str] = {}
    swap_logs: dict[int, tuple[str, object]] = {}
    swap_indexes: dict[tuple[int, str], str] = {}
    snapshots: list[tuple[int, str]] = []
    min_cleaned: int | None = None
    for name, file_path, info in files:
        if name.endswith(LEFTOVER_SUFFIXES):
            if name.endswith(".cleaned"):
                digits = name.split(".", 1)[0]
                if digits.isdigit():
                    off = int(digits)
                    min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            continue
        parsed = parse_segment_file_name(name)
        if parsed is None:
            if name.endswith(".log"):
                log.warning("ignoring %s: not a <base offset>.log segment name", file_path)
            continue
        base, kind, swap = parsed
        if kind == "snapshot":
            if not swap:
                snapshots.append((base, file_path))
        elif kind == "log":
            (swap_logs if swap else logs)[base] = (file_path, info)
        else:
            (swap_indexes if swap else indexes)[(base, kind)] = file_path

    local = is_local(fs)

    def make(base: int, found: tuple[str, object], idx: Mapping[tuple[int, str], str],
             swap: bool) -> Segment:
        file_path, info = found
        file_id = None
        if isinstance(info, os.DirEntry):
            try:
                st = info.stat()
            except FileNotFoundError as err:
                # renamed (retention, compaction) or deleted after the directory was
                # read: its size is unknown, and listed as 0 bytes it would be a segment
                # holding nothing, a gap before the next one (reported as data loss)
                raise LogLayoutError("segment file was renamed or deleted while its "
                                     "directory was listed: list it again",
                                     path=file_path) from err
            size = st.st_size
            file_id = (st.st_dev, st.st_ino)
        else:
            size = _size(info)
            if local:
                try:
                    st = os.stat(file_path)
                    file_id = (st.st_dev, st.st_ino)
                except FileNotFoundError:
                    pass
        return Segment(base, file_path, size, idx.get((base, "index")),
                       idx.get((base, "timeindex")), idx.get((base, "txnindex")), swap,
                       file_id)

    segments = {base: make(base, info, indexes, False) for base, info in logs.items()}
    if swap_logs and resolve_swaps:
        valid = {b: i for b, i in swap_logs.items() if min_cleaned is None or b < min_cleaned}
        for b in sorted(set(swap_logs) - set(valid)):
            log.warning("ignoring %s: swap file of an unfinished segment split "
                        "(at or above the smallest .cleaned offset %s)", swap_logs[b][0],
                        min_cleaned)
        if valid:
            swaps = [make(b, i, swap_indexes, True) for b, i in sorted(valid.items())]
            lo = min(s.base_offset for s in swaps)
            hi = max(segment_next_offset(fs, s) for s in swaps)
            replaced = [b for b in segments if lo <= b < hi]
            if replaced:
                log.warning("%s: swap segments %s replace segments %s (an interrupted "
                            "compaction, completed as a broker's startup would)", path,
                            [s.base_offset for s in swaps], sorted(replaced))
            for b in replaced:
                del segments[b]
            for s in swaps:
                segments[s.base_offset] = s
    ordered = tuple(segments[b] for b in sorted(segments))
    return ordered, tuple(sorted(snapshots))


def partition_of_segment(fs: pafs.FileSystem, log_path: str) -> PartitionDir:
    """A PartitionDir holding only the segment ``log_path`` (a ``<base>.log`` or
    ``.log.swap`` file) and its index files when present next to it: for tools that look
    at one file (``kafkalog dump``). Topic and partition come from the directory name
    when it is a partition dir ("" and 0 otherwise); the segment is treated as the
    partition's last (a batch cut by its end is a torn tail)."""
    info = fs.get_file_info(log_path)
    if info.type != pafs.FileType.File:
        raise LogLayoutError("no such segment file", path=log_path)
    name = posixpath.basename(log_path)
    parsed = parse_segment_file_name(name)
    if parsed is None or parsed[1] != "log":
        raise LogLayoutError("not a segment file name (<20-digit base offset>.log)",
                             path=log_path)
    base, _kind, swap = parsed
    directory = posixpath.dirname(log_path)
    stem = name.split(".", 1)[0]
    suffix = ".swap" if swap else ""
    found = {}
    for kind in ("index", "timeindex", "txnindex"):
        path = posixpath.join(directory, f"{stem}.{kind}{suffix}")
        if fs.get_file_info(path).type == pafs.FileType.File:
            found[kind] = path
    parsed = parse_partition_dir_name(posixpath.basename(directory)) or ("", 0)
    seg = Segment(base, log_path, int(info.size or 0), found.get("index"),
                  found.get("timeindex"), found.get("txnindex"), swap)
    return PartitionDir(parsed[0], parsed[1], posixpath.dirname(directory), directory, (seg,))


class LogDirs:
    """One or more log-dir roots on one filesystem.

    ``roots`` is a URI, a comma-separated string of URIs or a sequence of URIs (JBOD: a
    broker's several ``log.dirs``, or several brokers' copies of distinct partitions).
    ``filesystem`` may be given to read through a specific ``pyarrow.fs.FileSystem``
    (e.g. one that counts bytes); the roots are then paths inside it.

    Picklable: it holds the filesystem, the roots and the options; listing caches are
    dropped when pickled and rebuilt lazily on the other side.
    """

    def __init__(self, roots: str | Sequence[str], filesystem_options: Mapping | None = None,
                 *, include_internal: bool = False,
                 filesystem: pafs.FileSystem | None = None):
        if isinstance(roots, str):
            uris = [r.strip() for r in roots.split(",") if r.strip()]
        else:
            uris = [str(r).strip() for r in roots if str(r).strip()]
        if not uris:
            raise InvalidOptionError("path: no log directory given")
        self.filesystem_options = dict(filesystem_options or {})
        self.include_internal = bool(include_internal)
        resolved_roots = []
        fs = filesystem
        for uri in uris:
            if filesystem is not None:
                root = uri.rstrip("/") or "/"
            else:
                this_fs, root = resolve_filesystem(uri, self.filesystem_options)
                if fs is None:
                    fs = this_fs
                elif not fs.equals(this_fs):
                    raise InvalidOptionError(
                        f"path: all log dirs must be on one filesystem; {uri!r} is on "
                        f"{this_fs.type_name}, {uris[0]!r} on {fs.type_name}")
            if root not in resolved_roots:
                resolved_roots.append(root)
        self.filesystem: pafs.FileSystem = fs
        self.roots: tuple[str, ...] = tuple(resolved_roots)
        self._reset_caches()

    def _reset_caches(self) -> None:
        self._dirs: dict[str, dict[int, tuple[str, str]]] | None = None
        self._partitions: dict[str, list[PartitionDir]] = {}
        self._one: dict[tuple[str, int], PartitionDir] = {}   # listed alone (partition())
        self._checkpoints: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
        self._journals: dict = {}       # topic -> snapshot.Journals (journals())
        self._names: dict[tuple[str, int], tuple[str, ...]] = {}    # see listed_names

    def __getstate__(self):
        return {"filesystem": self.filesystem, "roots": self.roots,
                "filesystem_options": self.filesystem_options,
                "include_internal": self.include_internal}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset_caches()

    def __repr__(self) -> str:
        return f"LogDirs({list(self.roots)!r}, filesystem={self.filesystem.type_name})"

    # ---- discovery ---------------------------------------------------------------------

    def _scan_roots(self) -> dict[str, dict[int, tuple[str, str]]]:
        """topic -> partition -> (root, dir path), for every current partition dir."""
        if self._dirs is not None:
            return self._dirs
        found: dict[str, dict[int, tuple[str, str]]] = {}
        for root in self.roots:
            for name, path in _subdirs(self.filesystem, root):
                parsed = parse_partition_dir_name(name)
                if parsed is None:
                    log.debug("skipping %s: not a current partition directory", path)
                    continue
                topic, partition = parsed
                previous = found.setdefault(topic, {}).get(partition)
                if previous is not None:
                    raise LogLayoutError(
                        f"partition {topic}-{partition} is present in two log dirs, "
                        f"{previous[1]} and {path}; a broker refuses to start like "
                        "this: remove the stale copy or pass only one of the roots",
                        path=path)
                found[topic][partition] = (root, path)
        self._dirs = found
        return found

    def topics(self) -> list[str]:
        """Sorted topic names (without ``__cluster_metadata`` unless include_internal)."""
        names = self._scan_roots().keys()
        return sorted(t for t in names if self.include_internal or t not in HIDDEN_TOPICS)

    def _topic_dirs(self, topic: str) -> dict[int, tuple[str, str]]:
        dirs = self._scan_roots().get(topic)
        if not dirs:
            present = self.topics()
            there = (f"it has {', '.join(present[:10])}{', ...' if len(present) > 10 else ''}"
                     if present else "it holds no topic")
            raise LogLayoutError(f"topic {topic!r} not found in log dirs "
                                 f"{', '.join(self.roots)} ({there})")
        return dirs

    def partition_roots(self, topic: str) -> dict[int, str]:
        """partition -> the root holding it, from the roots' listing alone (no partition
        dir is listed). LogLayoutError when no root holds the topic."""
        return {q: root for q, (root, _) in self._topic_dirs(topic).items()}

    def journals(self, topic: str):
        """The topic's journals with their pending writes' decisions
        (:class:`~spark_kafkalog.log.read.snapshot.Journals`), read once per ``LogDirs``
        after the root checkpoints and before any of the topic's partition dirs is
        listed: every byte the journal calls committed is then in the listing."""
        j = self._journals.get(topic)
        if j is None:
            from spark_kafkalog.log.read.snapshot import load_journals

            roots = sorted(set(self.partition_roots(topic).values()))
            j = self._journals[topic] = load_journals(self, topic, roots)
        return j

    def _list_partition(self, topic: str, partition: int, root: str, path: str
                        ) -> PartitionDir:
        key = (topic, partition)
        p = self._one.get(key)
        if p is None:
            j = self.journals(topic)    # the journal before the segments
            files, segments, snapshots = _listed(self.filesystem, path)
            if j.swap_groups(root, partition) is not None:
                self._names[key] = tuple(sorted(name for name, _, _ in files))
            p = self._one[key] = PartitionDir(topic, partition, root, path, segments,
                                              snapshots)
        return p

    def listed_names(self, topic: str, partition: int) -> tuple[str, ...] | None:
        """Every file name the listing of the partition's dir held, when its journal
        had a compaction's swap in flight (see
        :func:`~spark_kafkalog.log.read.snapshot.listing_settled`); None otherwise."""
        return self._names.get((topic, partition))

    def partitions(self, topic: str) -> list[PartitionDir]:
        """The topic's partitions, sorted by number, gathered from every root. A hidden
        topic (``__cluster_metadata``) is returned when asked for by name. Raises
        LogLayoutError when no root holds the topic."""
        cached = self._partitions.get(topic)
        if cached is not None:
            return cached
        dirs = self._topic_dirs(topic)
        self.journals(topic)            # once, before the listings (which may run in threads)
        result = map_io(self.filesystem, lambda q: self._list_partition(topic, q, *dirs[q]),
                        sorted(dirs))
        self._partitions[topic] = result
        return result

    def forget(self, topic: str) -> None:
        """Drop the topic's cached listing and journal: the next read lists it again
        (a new snapshot; see :mod:`spark_kafkalog.log.read.snapshot`)."""
        self._partitions.pop(topic, None)
        self._journals.pop(topic, None)
        for key in [k for k in self._one if k[0] == topic]:
            del self._one[key]
            self._names.pop(key, None)

    def partition(self, topic: str, partition: int) -> PartitionDir:
        """One partition (only its directory is listed); LogLayoutError when absent."""
        dirs = self._scan_roots().get(topic) or {}
        if partition not in dirs:
            raise LogLayoutError(f"partition {topic}-{partition} not found in log dirs "
                                 f"{', '.join(self.roots)}")
        return self._list_partition(topic, partition, *dirs[partition])

    def adopt(self, dirs: Mapping[str, Mapping[int, tuple[str, str]]],
              checkpoints: Mapping[tuple[str, str], dict] | None = None) -> None:
        """Use a listing of the roots (``topic -> partition -> (root, dir path)``) and
        checkpoint contents (``(root, file name) -> entries``) the caller has just read
        itself (the stream poller reads them with their stamps) instead of reading them
        again. For a fresh ``LogDirs``, before anything is read through it."""
        self._dirs = {t: dict(parts) for t, parts in dirs.items()}
        self._checkpoints.update(checkpoints or {})

    def all_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionDir]:
        """Partitions of the given topics (default: every listed topic), topic order."""
        return [p for t in (self.topics() if topics is None else topics)
                for p in self.partitions(t)]

    # ---- checkpoints -------------------------------------------------------------------

    def checkpoint(self, root: str, name: str) -> dict[tuple[str, int], int]:
        """A root-level offset checkpoint file (``{}`` when absent), cached."""
        key = (root, name)
        cached = self._checkpoints.get(key)
        if cached is None:
            cached = read_checkpoint(self.filesystem, join(root, name))
            self._checkpoints[key] = cached
        return cached

    def checkpointed_high_watermark(self, p: PartitionDir) -> int | None:
        return self.checkpoint(p.root, REPLICATION_OFFSET_CHECKPOINT).get((p.topic, p.partition))

    def checkpointed_log_start_offset(self, p: PartitionDir) -> int | None:
        return self.checkpoint(p.root, LOG_START_OFFSET_CHECKPOINT).get((p.topic, p.partition))

    # ---- state and seeking (see read/state.py) -----------------------------------------

    def state(self, p: PartitionDir, *, isolation_level: str = "read_uncommitted",
              read_past_high_watermark: bool = False, on_corruption: str = "fail",
              timestamps: bool = True) -> PartitionState:
        """Offsets and bounds of a partition as a consumer would see them; see
        :func:`spark_kafkalog.log.read.state.partition_state` (``timestamps=False`` skips the
        time range, which planning does not need)."""
        return partition_state(self, p, isolation_level=isolation_level,
                               read_past_high_watermark=read_past_high_watermark,
                               on_corruption=on_corruption, timestamps=timestamps)

    def topic_states(self, topic: str, partitions: Iterable[int] | None = None, **kwargs):
        """``(snapshot, partition dirs, {partition: state})`` of a topic at one snapshot;
        see :func:`spark_kafkalog.log.read.state.topic_states`."""
        from spark_kafkalog.log.read.state import topic_states

        return topic_states(self, topic, partitions, **kwargs)

    def offset_for_timestamp(self, p: PartitionDir, timestamp_ms: int, **kwargs) -> int | None:
        """Earliest offset whose record timestamp is >= ``timestamp_ms`` (Kafka's
        offsetsForTimes); None when there is none. Reads the index files and the bytes
        from the position they point to. Keywords: see
        :func:`spark_kafkalog.log.read.seek.offset_for_timestamp`."""
        return offset_for_timestamp(self, p, timestamp_ms, **kwargs)

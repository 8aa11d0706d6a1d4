"""What a live log holds now, cheaply: the stream reader's poll of the log dirs.

One :meth:`LiveLog.poll` lists each log-dir root once (partition dirs, checkpoint files
and our writer's journals come with their sizes and mtimes), reads each selected topic's
journal (one snapshot per topic, taken before any partition dir is looked at), then
stats every selected partition's directory and active segment in one batched call (on
an object store, whose directories have no stamps: lists each selected partition dir).
A partition's bounds (log start, upper bound: the high watermark clamped to the last
complete batch, the last stable offset under read_committed) are recomputed through the
log layer (``partition_state``, with that snapshot) only when something it depends on
changed: the segment list, the active segment's size or mtime, the root checkpoint
entries or what the topic's journal says of the partition. A
file modified within :data:`RACY_SECONDS` of the last computation is not trusted (an
append to a preallocated file in the same clock tick leaves size and mtime unchanged),
as git treats "racily clean" files.

Bytes after the last complete batch of the active segment (a batch being written, a
preallocated zero tail) are the normal, in-flight end of a live log: the log layer's torn
tail warning is silenced here, where it would repeat on every poll.
"""
from __future__ import annotations

import functools
import logging
import os
import stat
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace

import pyarrow.fs as pafs

from spark_kafkalog.errors import KafkaLogError, LogLayoutError
from spark_kafkalog.log import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    PartitionDir,
    TornTailWarning,
    is_internal_topic,
    parse_partition_dir_name,
    partition_state,
    read_checkpoint,
)
from spark_kafkalog.log.io import list_dir, map_io
from spark_kafkalog.log.read.snapshot import topic_snapshot
from spark_kafkalog.log.files.journal import journal_path
from spark_kafkalog.log.read.discovery import list_segments
from spark_kafkalog.spark.options import Assign, ReadOptions, Subscribe, SubscribePattern

#: a file modified this close to a computation is recomputed on the next poll
RACY_SECONDS = 0.1
_HIDDEN = ("__cluster_metadata",)


@dataclass(frozen=True)
class LivePartition:
    """One partition as of a poll: its directory (segment sizes as of the poll) and its
    :class:`PartitionState` (``log_start_offset``, ``upper_bound``, ...)."""
    topic: str
    partition: int
    partition_dir: PartitionDir
    state: object

    @property
    def log_start(self) -> int:
        return self.state.log_start_offset

    @property
    def upper(self) -> int:
        return self.state.upper_bound


@dataclass
class _Cached:
    key: tuple
    dir_key: tuple
    racy: bool
    live: LivePartition


class _QuietTail(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "the log ends with" not in record.getMessage()


@contextmanager
def quiet_tail():
    """Silence the log layer's torn-tail warning (the in-flight end of a live log)."""
    logger = logging.getLogger(TornTailWarning.__module__)   # the scanner's logger
    filt = _QuietTail()
    logger.addFilter(filt)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            yield
    finally:
        logger.removeFilter(filt)


def _stamp(info: pafs.FileInfo) -> tuple:
    if info.type == pafs.FileType.NotFound:
        return (None, None)
    return (info.size, info.mtime_ns)


_MISSING = (None, None)
#: the root-level checkpoints a poll reads (by its listing's stamps): what a read is
#: bounded by, and what the data-loss check holds the log to
_ROOT_CHECKPOINTS = (REPLICATION_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                     RECOVERY_POINT_CHECKPOINT)


@functools.lru_cache(maxsize=4096)
def _journal_name(topic: str) -> str:
    """The file name of our writer's journal of ``topic`` in a log-dir root."""
    return journal_path("", topic).rsplit("/", 1)[-1]


def _list(fs, root: str) -> list[tuple[str, bool, str, tuple]]:
    """``(name, is_dir, path, (size, mtime_ns))`` of the entries of a log-dir root (local
    disks through ``os.scandir``: a tenth of the cost of the generic listing)."""
    try:
        if isinstance(fs, pafs.LocalFileSystem):
            out = []
            with os.scandir(root) as it:
                for e in it:
                    st = e.stat()
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if not is_dir and not stat.S_ISREG(st.st_mode):
                        continue
                    out.append((e.name, is_dir, f"{root.rstrip('/')}/{e.name}",
                                (st.st_size, st.st_mtime_ns)))
            return out
        infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=False))
    except (FileNotFoundError, OSError) as err:
        raise LogLayoutError(f"cannot list log dir: {err}", path=root) from err
    return [(i.base_name, i.type == pafs.FileType.Directory, i.path, _stamp(i))
            for i in infos if i.type in (pafs.FileType.File, pafs.FileType.Directory)]


def _stats(fs, paths: list[str]) -> list[tuple]:
    """``(size, mtime_ns)`` of each path, ``(None, None)`` when it does not exist."""
    if isinstance(fs, pafs.LocalFileSystem):
        out = []
        for path in paths:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                out.append(_MISSING)
                continue
            out.append((st.st_size, st.st_mtime_ns))
        return out
    return [_stamp(i) for i in fs.get_file_info(paths)] if paths else []


class LiveLog:
    """The poller. Not picklable state: it lives in the driver-side reader only."""

    def __init__(self, opts: ReadOptions, clock=time.time):
        self.opts = opts
        self.clock = clock
        self._cache: dict[tuple[str, int], _Cached] = {}
        self._ckpt: dict[str, tuple[tuple, dict, dict, dict]] = {}
        self.logdirs = None

    def _open(self):
        from spark_kafkalog.spark.reader import open_logdirs
        return open_logdirs(self.opts)      # fresh caches, shared filesystem

    def _select(self, dirs: dict[tuple[str, int], tuple[str, str]]) -> list[tuple[str, int]]:
        strategy = self.opts.strategy
        if isinstance(strategy, SubscribePattern):
            return sorted(tp for tp in dirs
                          if not is_internal_topic(tp[0]) and tp[0] not in _HIDDEN
                          and strategy.matches(tp[0]))
        if isinstance(strategy, Subscribe):
            topics = set(strategy.topics)
            have = {t for t, _ in dirs}
            missing = sorted(topics - have)
            if missing:
                raise LogLayoutError(f"subscribe: topic {missing[0]} not found in log dir(s) "
                                     f"{self.opts.path} (topics there: "
                                     f"{', '.join(sorted(have)) or 'none'})")
            return sorted(tp for tp in dirs if tp[0] in topics)
        assert isinstance(strategy, Assign)
        missing = [tp for tp in strategy.partitions if tp not in dirs]
        if missing:
            t, p = missing[0]
            raise LogLayoutError(f"assign: partition {t}-{p} not found in log dir(s) "
                                 f"{self.opts.path}")
        return sorted(strategy.partitions)

    def _checkpoints(self, fs, root: str, files: dict[str, tuple]) -> tuple:
        """``(stamp, high watermarks, log starts, recovery points)`` of a root, read again
        only when the listing's stamp of one of the three files changed (or is racy)."""
        stamp = tuple(files.get(n, _MISSING) for n in _ROOT_CHECKPOINTS)
        cached = self._ckpt.get(root)
        if cached is None or cached[0] != stamp or self._is_racy(stamp):
            base = root.rstrip('/')
            hw = read_checkpoint(fs, f"{base}/{REPLICATION_OFFSET_CHECKPOINT}")
            ls = read_checkpoint(fs, f"{base}/{LOG_START_OFFSET_CHECKPOINT}")
            try:
                rp = read_checkpoint(fs, f"{base}/{RECOVERY_POINT_CHECKPOINT}")
            except KafkaLogError:
                rp = {}     # an unreadable recovery point promises nothing (as load_journals)
            cached = (stamp, hw, ls, rp)
            self._ckpt[root] = cached
        return cached

    def _is_racy(self, stamps, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        limit = (now - RACY_SECONDS) * 1e9
        return any(m is not None and m >= limit for _, m in stamps)

    def poll(self) -> dict[tuple[str, int], LivePartition]:
        """Every selected partition as it is now, in (topic, partition) order. A
        subscribed topic or assigned partition that is not there raises
        :class:`LogLayoutError`, as for batch reads."""
        logdirs = self._open()
        self.logdirs = logdirs
        fs = logdirs.filesystem
        dirs: dict[tuple[str, int], tuple[str, str]] = {}
        root_files: dict[str, dict[str, tuple]] = {}
        for root in logdirs.roots:
            files = {}
            for name, is_dir, path, stamp in _list(fs, root):
                if not is_dir:
                    files[name] = stamp
                    continue
                tp = parse_partition_dir_name(name)
                if tp is None:
                    continue
                if tp in dirs:
                    raise LogLayoutError(f"partition {tp[0]}-{tp[1]} is present in two log "
                                         f"dirs, {dirs[tp][1]} and {path}", path=path)
                dirs[tp] = (root, path)
            root_files[root] = files
        selected = self._select(dirs)
        checkpoints = {root: self._checkpoints(fs, root, files)
                       for root, files in root_files.items()}
        by_topic: dict[str, dict[int, tuple[str, str]]] = {}
        for (t, q), where in dirs.items():
            by_topic.setdefault(t, {})[q] = where
        logdirs.adopt(by_topic, {(root, name): entries
                                 for root, (_, *entries_of) in checkpoints.items()
                                 for name, entries in zip(_ROOT_CHECKPOINTS, entries_of)})
        # each topic's journal before any of its partition dirs is looked at: every byte
        # it calls committed is then in what the poll sees (one snapshot per topic)
        snaps = {t: topic_snapshot(logdirs, t) for t in sorted({t for t, _ in selected})}
        local = isinstance(fs, pafs.LocalFileSystem)
        if local:
            # one batched stat: each partition dir, and the active segment we know of
            paths = []
            for tp in selected:
                paths.append(dirs[tp][1])
                cached = self._cache.get(tp)
                segs = cached.live.partition_dir.segments if cached else ()
                paths.append(segs[-1].path if segs else dirs[tp][1])
            stamps = _stats(fs, paths)
            looks = [(stamps[2 * i], stamps[2 * i + 1], None) for i in range(len(selected))]
        else:
            # an object store's "directory" has no stamp: one listing per partition dir
            # (a request each) gives every segment's size and time
            def look(tp):
                infos = list_dir(fs, dirs[tp][1])
                return tuple(sorted((i.base_name, *_stamp(i)) for i in infos)), None, infos

            looks = map_io(fs, look, selected)
        now = self.clock()

        def one(i: int) -> LivePartition:
            tp = selected[i]
            dir_stamp, last_stamp, infos = looks[i]
            root, path = dirs[tp]
            journal = root_files[root].get(_journal_name(tp[0]), _MISSING)
            ck_stamp, hw, ls, _ = checkpoints[root]
            return self._partition(logdirs, tp, root, path, dir_stamp, last_stamp, infos,
                                   journal, snaps[tp[0]], ck_stamp, hw.get(tp), ls.get(tp),
                                   now)

        with quiet_tail():
            out = dict(zip(selected, map_io(fs, one, range(len(selected)))))
        for tp in list(self._cache):
            if tp not in out:
                del self._cache[tp]
        return out

    def _partition(self, logdirs, tp, root, path, dir_stamp, last_stamp, infos, journal,
                   snap, ck_stamp, hw, ls, now) -> LivePartition:
        """``infos``: the partition dir's listing (object stores; ``dir_stamp`` is then
        made of it), None on local disk (``dir_stamp``, ``last_stamp``: stats of the
        dir and of the active segment)."""
        cached = self._cache.get(tp)
        dir_key = (path, dir_stamp)
        if cached is not None and cached.dir_key == dir_key and not cached.racy:
            pdir = cached.live.partition_dir
            if pdir.segments and last_stamp is not None and last_stamp[0] is not None \
                    and pdir.segments[-1].size != last_stamp[0]:
                last = replace(pdir.segments[-1], size=int(last_stamp[0]))
                pdir = replace(pdir, segments=pdir.segments[:-1] + (last,))
        else:
            segments, snapshots = list_segments(logdirs.filesystem, path, infos=infos)
            pdir = PartitionDir(tp[0], tp[1], root, path, segments, snapshots)
            if segments and infos is None:
                last_stamp = _stats(logdirs.filesystem, [segments[-1].path])[0]
        if infos is not None:
            last_stamp = next((_stamp(i) for i in infos if pdir.segments
                               and i.path == pdir.segments[-1].path), _MISSING)
        bound = snap.bound(tp[1])
        key = (tuple((s.base_offset, s.size) for s in pdir.segments), last_stamp, bound,
               hw, ls, ck_stamp)
        if cached is not None and cached.key == key and not cached.racy:
            if cached.live.partition_dir is not pdir:
                cached.live = replace(cached.live, partition_dir=pdir)
            return cached.live
        opts = self.opts
        state = partition_state(logdirs, pdir, isolation_level=opts.isolation_level,
                                read_past_high_watermark=opts.read_past_high_watermark,
                                on_corruption=opts.on_corruption,
                                window_bytes=opts.window_bytes, timestamps=False,
                                snapshot=snap)
        live = LivePartition(tp[0], tp[1], pdir, state)
        racy = self._is_racy([dir_stamp if infos is None else _MISSING, last_stamp,
                              journal, *ck_stamp], now)
        self._cache[tp] = _Cached(key, dir_key, racy, live)
        return live

"""What a live log holds now, cheaply: the stream reader's poll of the log dirs.

One :meth:`LiveLog.poll` lists each log-dir root once (partition dirs, checkpoint files
and our writer's journals come with their sizes and mtimes) and stats every selected
partition's directory and active segment in one batched call. A partition's bounds (log
start, upper bound: the high watermark clamped to the last complete batch, the last
stable offset under read_committed) are recomputed through the log layer
(``partition_state``) only when something it depends on changed: the segment list, the
active segment's size or mtime, the root checkpoint entries or the topic's journal. A
file modified within :data:`RACY_SECONDS` of the last computation is not trusted (an
append to a preallocated file in the same clock tick leaves size and mtime unchanged),
as git treats "racily clean" files.

Bytes after the last complete batch of the active segment (a batch being written, a
preallocated zero tail) are the normal, in-flight end of a live log: the log layer's torn
tail warning is silenced here, where it would repeat on every poll.
"""
from __future__ import annotations

import logging
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    PartitionDir,
    TornTailWarning,
    is_internal_topic,
    parse_partition_dir_name,
    partition_state,
    read_checkpoint,
)
from spark_kafkalog.log.journal import journal_path
from spark_kafkalog.log.layout import list_segments
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
    logger = logging.getLogger("spark_kafkalog.log.segment")
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
    mtime = info.mtime_ns if info.mtime_ns is not None else None
    return (info.size, mtime)


class LiveLog:
    """The poller. Not picklable state: it lives in the driver-side reader only."""

    def __init__(self, opts: ReadOptions, clock=time.time):
        self.opts = opts
        self.clock = clock
        self._cache: dict[tuple[str, int], _Cached] = {}
        self._ckpt: dict[str, tuple[tuple, dict, dict]] = {}
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

    def _checkpoints(self, fs, root: str, files: dict[str, pafs.FileInfo]) -> tuple:
        stamp = tuple(_stamp(files[n]) if n in files else (None, None)
                      for n in (REPLICATION_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT))
        cached = self._ckpt.get(root)
        if cached is None or cached[0] != stamp or self._is_racy(stamp):
            hw = read_checkpoint(fs, f"{root.rstrip('/')}/{REPLICATION_OFFSET_CHECKPOINT}")
            ls = read_checkpoint(fs, f"{root.rstrip('/')}/{LOG_START_OFFSET_CHECKPOINT}")
            cached = (stamp, hw, ls)
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
        root_files: dict[str, dict[str, pafs.FileInfo]] = {}
        for root in logdirs.roots:
            try:
                infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=False))
            except (FileNotFoundError, OSError) as err:
                raise LogLayoutError(f"cannot list log dir: {err}", path=root) from err
            files = {}
            for info in infos:
                if info.type == pafs.FileType.File:
                    files[info.base_name] = info
                    continue
                if info.type != pafs.FileType.Directory:
                    continue
                tp = parse_partition_dir_name(info.base_name)
                if tp is None:
                    continue
                if tp in dirs:
                    raise LogLayoutError(f"partition {tp[0]}-{tp[1]} is present in two log "
                                         f"dirs, {dirs[tp][1]} and {info.path}",
                                         path=info.path)
                dirs[tp] = (root, info.path)
            root_files[root] = files
        selected = self._select(dirs)
        # one batched stat: each partition dir, and the active segment we know of
        paths = []
        for tp in selected:
            paths.append(dirs[tp][1])
            cached = self._cache.get(tp)
            segs = cached.live.partition_dir.segments if cached else ()
            paths.append(segs[-1].path if segs else dirs[tp][1])
        infos = fs.get_file_info(paths) if paths else []
        now = self.clock()
        out: dict[tuple[str, int], LivePartition] = {}
        with quiet_tail():
            for i, tp in enumerate(selected):
                root, path = dirs[tp]
                dir_stamp, last_stamp = _stamp(infos[2 * i]), _stamp(infos[2 * i + 1])
                files = root_files[root]
                jname = journal_path(root, tp[0]).rsplit("/", 1)[-1]
                journal = _stamp(files[jname]) if jname in files else (None, None)
                ck_stamp, hw, ls = self._checkpoints(fs, root, files)
                out[tp] = self._partition(logdirs, tp, root, path, dir_stamp, last_stamp,
                                          journal, ck_stamp, hw.get(tp), ls.get(tp), now)
        for tp in list(self._cache):
            if tp not in out:
                del self._cache[tp]
        return out

    def _partition(self, logdirs, tp, root, path, dir_stamp, last_stamp, journal,
                   ck_stamp, hw, ls, now) -> LivePartition:
        cached = self._cache.get(tp)
        dir_key = (path, dir_stamp)
        if cached is not None and cached.dir_key == dir_key and not cached.racy:
            pdir = cached.live.partition_dir
            if pdir.segments and last_stamp[0] is not None \
                    and pdir.segments[-1].size != last_stamp[0]:
                last = replace(pdir.segments[-1], size=int(last_stamp[0]))
                pdir = replace(pdir, segments=pdir.segments[:-1] + (last,))
        else:
            segments, snapshots = list_segments(logdirs.filesystem, path)
            pdir = PartitionDir(tp[0], tp[1], root, path, segments, snapshots)
            if segments:
                last_stamp = _stamp(logdirs.filesystem.get_file_info(segments[-1].path))
        key = (tuple((s.base_offset, s.size) for s in pdir.segments), last_stamp, journal,
               hw, ls, ck_stamp)
        if cached is not None and cached.key == key and not cached.racy:
            if cached.live.partition_dir is not pdir:
                cached.live = replace(cached.live, partition_dir=pdir)
            return cached.live
        opts = self.opts
        state = partition_state(logdirs, pdir, isolation_level=opts.isolation_level,
                                read_past_high_watermark=opts.read_past_high_watermark,
                                on_corruption=opts.on_corruption,
                                window_bytes=opts.window_bytes, timestamps=False)
        live = LivePartition(tp[0], tp[1], pdir, state)
        racy = self._is_racy([dir_stamp, last_stamp, journal, *ck_stamp], now)
        self._cache[tp] = _Cached(key, dir_key, racy, live)
        return live

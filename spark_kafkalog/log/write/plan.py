"""Planning a commit: where every staged batch goes. Offsets are assigned in staging
order from each partition's log end (or, with ``offsets="preserve"``, each batch keeps
its staged base offset: see :func:`_preserved_order`); a segment is rolled (a new
``<base offset>.log`` with its indexes) when the next batch would take it past ``segment.bytes`` or overflow a
relative offset or a full index, as ``LogSegment.shouldRoll`` does; a large section
staged in a file of its own may become a segment as a whole (adopted). The plan also
makes the journal's :class:`~.journal.PendingWrite` (what undoing the write needs)."""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import (
    BadRowError,
    CommitConflictError,
    InternalError,
    InvalidOptionError,
    LogLayoutError,
)
from spark_kafkalog.log.io import write_atomic
from spark_kafkalog.log.files.index import (
    INT32_MAX,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexBuilder,
)
from spark_kafkalog.log.write import config
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.config import (
    AppendConfig,
    TopicSpec,
    partition_dir,
    segment_file,
)
from spark_kafkalog.log.io import is_local
from spark_kafkalog.log.write.staged_tables import TablesCache
from spark_kafkalog.log.write.staging import StagedFile, StagedSection
from spark_kafkalog.log.write.tail import Active, inspect_partition


@dataclass
class Run:
    """Where a run of staged batches goes."""

    seg_index: int                     # into PartPlan.segments
    dst_position: int
    staged: int                        # index into the staged file list
    src_position: int
    batch_rows: slice                  # rows of that file's batch table
    bases: np.ndarray                  # the base offset each batch gets
    src_path: str = ""                 # the file holding the bytes
    adopt: bool = False                # the whole file becomes the segment (renamed)
    sizes: np.ndarray | None = None    # each batch's size
    nbytes: int = 0                    # their sum


@dataclass
class Gather:
    """Consecutive small runs of one partition (a section of each of many staging files)
    written to one segment through one buffer: piece ``k`` is ``lengths[k]`` bytes at
    ``src_positions[k]`` of ``src_paths[k]``; ``sizes`` and ``bases`` are every batch's,
    piece after piece. Planned with a few vector operations, not a :class:`Run` each."""

    seg_index: int
    dst_position: int
    src_paths: list[str]
    src_positions: np.ndarray
    lengths: np.ndarray
    sizes: np.ndarray
    bases: np.ndarray
    nbytes: int
    adopt: bool = False


@dataclass
class SegPlan:
    base: int
    existing: bool                     # the partition's active segment, appended to
    start_size: int                    # its size before the write
    end_size: int = 0
    builder: IndexBuilder | None = None
    continuing_index: bool = False     # index files exist and are appended to
    adopted_bytes: int = 0             # > 0: starts as a renamed staging file this long


@dataclass
class PartPlan:
    topic: str
    partition: int
    directory: str
    create_dir: bool
    start: int
    end: int = 0
    segments: list[SegPlan] = field(default_factory=list)
    runs: list[Run | Gather] = field(default_factory=list)
    active: Active | None = None
    planned_bytes: int = 0
    timeindex_tail: bytes = b""        # the close entry the append replaces (for rollback)
    segment_count: int = 0             # segments before the write
    log_start: int | None = None       # the log start offset the commit moves to, if any

    def undo(self, no_append: bool) -> jr.PartitionUndo:
        """This partition's part of the journal's pending record."""
        a = self.active
        return jr.PartitionUndo(
            start=self.start, end=self.end, active_base=a.base if a is not None else None,
            log_size=a.log_size if a is not None else 0,
            index_size=a.index_size if a is not None else 0,
            timeindex_size=a.timeindex_size if a is not None else 0,
            timeindex_tail=self.timeindex_tail, created_dir=self.create_dir,
            planned_bytes=self.planned_bytes,
            segments=[[s.base, s.start_size, s.end_size] for s in self.segments
                      if s.end_size > s.start_size],
            no_append=no_append)


@dataclass
class WritePlan:
    """Every partition a commit writes, by topic, and the staged files' batch tables."""

    tables: TablesCache
    topics: dict[str, list[PartPlan]]
    no_append: bool
    overwrite: bool

    def pending(self, write_id: str, topic: str, coordinator: str) -> jr.PendingWrite:
        """The journal record of this write in flight, for ``topic``'s journal."""
        plans = self.topics[topic]
        return jr.PendingWrite(
            write_id=write_id, mode="overwrite" if self.overwrite else "append",
            coordinator=coordinator, topics=sorted(self.topics), begun_ms=jr.now_ms(),
            partitions={p.partition: p.undo(self.no_append) for p in plans},
            log_start={p.partition: p.log_start for p in plans
                       if p.log_start is not None})

    def close_files(self) -> None:
        """Close the active segments' files the append did not take (see
        :func:`plan_write`)."""
        for plans in self.topics.values():
            for p in plans:
                if p.active is not None:
                    p.active.close_files()

    def ranges(self) -> dict:
        return {t: {p.partition: (p.start, p.end) for p in plans}
                for t, plans in self.topics.items()}


def _new_seg(base: int, cfg: AppendConfig) -> SegPlan:
    return SegPlan(base=base, existing=False, start_size=0, end_size=0,
                   builder=IndexBuilder.for_new_segment(base, cfg.index_interval_bytes,
                                                        cfg.max_index_bytes))


def _preserved_order(plan: PartPlan, sections: list[tuple[int, StagedSection]],
                     tables: TablesCache) -> list[tuple[int, StagedSection]]:
    """For a write that keeps the staged offsets: the sections in offset order, checked
    (every batch's base offset above the previous batch's last offset, across sections
    too: tasks may hold consecutive ranges of a partition, not interleaved ones; the
    first at or past the log end offset). Sets the plan's start (and log start) for a
    partition that holds no record yet: its first offset, as a broker's log would."""
    if not sections:
        return sections
    firsts = [int(tables.table(i)["base_offset"][sec.batch_start]) for i, sec in sections]
    sections = [sections[k] for k in np.argsort(firsts, kind="stable")]
    bases = np.concatenate([tables.table(i)["base_offset"][
        sec.batch_start:sec.batch_start + sec.batch_count] for i, sec in sections])
    lasts = bases + np.concatenate([tables.table(i)["last_offset_delta"][
        sec.batch_start:sec.batch_start + sec.batch_count] for i, sec in sections])
    where = f"topic {plan.topic!r} partition {plan.partition}"
    bad = np.flatnonzero(bases[1:] <= lasts[:-1])
    if len(bad):
        k = int(bad[0]) + 1
        raise BadRowError(
            f"{where}: offsets must increase strictly, but offset {int(bases[k])} comes "
            f"after offset {int(lasts[k - 1])} (with offsets=preserve each task must give a "
            "partition's rows in offset order, and tasks must hold disjoint offset ranges: "
            "e.g. repartition by 'partition' and sortWithinPartitions('offset'))",
            path=plan.directory)
    first = int(bases[0])
    if first < plan.start:
        raise BadRowError(
            f"{where}: offset {first} is below the partition's log end offset "
            f"{plan.start} (offsets {first}..{int(lasts[-1])} written with offsets=preserve "
            "must be at or past the log end)", path=plan.directory)
    a = plan.active
    if a is None or (a.log_size == 0 and plan.segment_count == 1):
        # no record yet: the log starts at the first offset written (an empty segment
        # below it is deleted after the commit, as a broker's follower truncating fully)
        plan.start = first
        plan.log_start = first
    return sections


def _plan_partition(plan: PartPlan, sections: list[tuple[int, StagedSection]],
                    tables: TablesCache, cfg: AppendConfig, no_append: bool,
                    overwrite: bool, adopt: bool = False, preserve: bool = False) -> None:
    """Decide offsets, segment rolls and index entries for every staged batch of one
    partition, in staging order (the order of ``sections``), or with ``preserve`` at
    the staged base offsets, in offset order."""
    if preserve:
        sections = _preserved_order(plan, sections, tables)
    if overwrite:
        # the new log start: the old log end, or the first offset a preserving write keeps
        plan.log_start = plan.start
        if preserve and sections:
            t, sec = sections[0]
            plan.log_start = int(tables.table(t)["base_offset"][sec.batch_start])
    active = plan.active
    segs = plan.segments
    if active is not None:
        if active.log_size == 0 and active.base != plan.start:
            pass        # an empty segment below the first offset kept: deleted after commit
        elif active.log_size == 0:
            # an empty active segment is reused in every mode (its files are rewritten)
            segs.append(SegPlan(base=active.base, existing=True, start_size=0, end_size=0,
                                builder=IndexBuilder.for_new_segment(
                                    active.base, cfg.index_interval_bytes,
                                    cfg.max_index_bytes)))
        elif not (no_append or overwrite):
            if active.builder is None:
                raise InternalError("the active segment's indexes must be repaired before "
                                    "planning", path=segment_file(plan.directory, active.base))
            segs.append(SegPlan(base=active.base, existing=True,
                                start_size=active.log_size, end_size=active.log_size,
                                builder=active.builder, continuing_index=True))
    cur = segs[-1] if segs else None
    next_offset = plan.start
    for group in _section_groups(sections, adopt, cfg):
        b = _GroupBatches(group, tables, next_offset, preserve)
        m = len(b.sizes)
        staged_i, sec = group[0]
        if (len(group) == 1 and adopt and sec.path is not None
                and sec.size >= cfg.adopt_min_bytes
                and (cur is None or cur.base != int(b.bases[0]))):
            # The section's file becomes a segment of its own, if one segment holds it
            # all (a segment may not share its base offset with the one before).
            seg = _new_seg(int(b.bases[0]), cfg)
            if _batches_that_fit(seg, b.ends, b.lasts, 0, cfg) == m:
                seg.adopted_bytes = sec.size
                segs.append(seg)
                cur = seg
                cur.builder.add_batches(b.ends - b.sizes, b.lasts, b.max_ts)
                cur.end_size = sec.size
                b.add_runs(plan, len(segs) - 1, 0, m, 0, adopt=True)
                next_offset = int(b.lasts[-1]) + 1
                plan.planned_bytes += sec.size
                continue
        j = 0
        while j < m:
            # how many batches from j fit the current segment; a fresh one takes one
            k = 0 if cur is None else _batches_that_fit(cur, b.ends, b.lasts, j, cfg)
            if k == 0:
                cur = _new_seg(int(b.bases[j]), cfg)
                segs.append(cur)
                continue
            chunk = slice(j, j + k)
            chunk_sizes = b.sizes[chunk]
            positions = cur.end_size + np.cumsum(chunk_sizes) - chunk_sizes
            cur.builder.add_batches(positions, b.lasts[chunk], b.max_ts[chunk])
            b.add_runs(plan, len(segs) - 1, j, j + k, cur.end_size)
            cur.end_size += int(chunk_sizes.sum())
            j += k
        next_offset = int(b.lasts[-1]) + 1
        plan.planned_bytes += sum(sec.size for _, sec in group)
    plan.end = next_offset
    if overwrite and not any(s.base >= plan.start for s in segs):
        # an overwrite leaves a segment starting at the new log start even with no rows
        segs.append(_new_seg(plan.start, cfg))
    if not segs:
        # a partition with no segment yet gets its (empty) first one
        segs.append(_new_seg(plan.start, cfg))


def _section_groups(sections: list[tuple[int, StagedSection]], adopt: bool,
                    cfg: AppendConfig) -> list[list[tuple[int, StagedSection]]]:
    """``sections`` in order, in groups planned together: a section that may be adopted
    alone, each run of the others as one (a partition every task staged a little of is
    planned in one pass, not one per task)."""
    out: list[list[tuple[int, StagedSection]]] = []
    alone = True
    for item in sections:
        sec = item[1]
        may_adopt = adopt and sec.path is not None and sec.size >= cfg.adopt_min_bytes
        if may_adopt or alone:
            out.append([item])
        else:
            out[-1].append(item)
        alone = may_adopt
    return out


class _GroupBatches:
    """The batches of a group of sections, one after the other, with the base offsets
    they get (from ``next_offset``, or as staged with ``preserve``)."""

    def __init__(self, group: list[tuple[int, StagedSection]], tables: TablesCache,
                 next_offset: int, preserve: bool):
        self.group = group
        self.tables = tables
        self.bounds = [0, *itertools.accumulate(sec.batch_count for _, sec in group)]
        if len(group) == 1:
            i, sec = group[0]
            c = tables.columns(i)
            a, b = sec.batch_start, sec.batch_start + sec.batch_count

            def field(name: str) -> np.ndarray:
                return getattr(c, name)[a:b]
        else:
            # one gather from all files' columns: row r of the group is file row
            # first[k] + (r - bounds[k]) for the section k holding it
            joined, file_rows = tables.joined()
            counts = np.diff(self.bounds)
            first = file_rows[[i for i, _ in group]] + [sec.batch_start for _, sec in group]
            rows = np.repeat(first - self.bounds[:-1], counts) + np.arange(self.bounds[-1])

            def field(name: str) -> np.ndarray:
                return joined[name][rows]
        self.sizes = field("size")
        self.positions = field("position")
        n = field("count")
        if preserve:
            self.bases = field("base_offset")
        else:
            self.bases = next_offset + np.cumsum(n) - n
        self.lasts = self.bases + n - 1
        self.max_ts = field("max_timestamp")
        self.ends = np.cumsum(self.sizes)

    def add_runs(self, plan: PartPlan, seg_index: int, a: int, b: int, dst: int,
                 adopt: bool = False) -> None:
        """Runs for batches ``[a, b)``, written to segment ``seg_index`` from byte
        ``dst`` on: one per section they span."""
        bounds = self.bounds
        s = bisect.bisect_right(bounds, a) - 1
        done = int(self.ends[a - 1]) if a else 0
        if not adopt and bounds[s + 1] < b and self._gather(plan, seg_index, a, b, dst, s,
                                                              done):
            return
        while bounds[s] < b:
            lo, hi = max(a, bounds[s]), min(b, bounds[s + 1])
            staged_i, sec = self.group[s]
            end = int(self.ends[hi - 1])
            row = sec.batch_start - bounds[s]
            plan.runs.append(Run(
                seg_index=seg_index, dst_position=dst, staged=staged_i,
                src_position=sec.position + int(self.positions[lo]),
                batch_rows=slice(row + lo, row + hi), bases=self.bases[lo:hi],
                src_path=sec.path or self.tables.staged[staged_i].path, adopt=adopt,
                sizes=self.sizes[lo:hi], nbytes=end - done))
            dst += end - done
            done = end
            s += 1
            if s >= len(self.group):
                break


    def _gather(self, plan: PartPlan, seg_index: int, a: int, b: int, dst: int, s: int,
                done: int) -> bool:
        """Batches ``[a, b)`` (from section ``s`` on, several sections) as one
        :class:`Gather`, when every piece is small (under
        :data:`~.config.KERNEL_COPY_MIN_BYTES`) and all fit one copy window; else False
        (a :class:`Run` each, which apply groups likewise)."""
        nbytes = int(self.ends[b - 1]) - done
        if nbytes > config.COPY_WINDOW_BYTES:
            return False
        e = bisect.bisect_left(self.bounds, b, lo=s)     # sections s..e-1 hold [a, b)
        bounds = np.asarray(self.bounds[s:e + 1], dtype=np.int64)
        lo = np.maximum(bounds[:-1], a)
        hi = np.minimum(bounds[1:], b)
        ends = self.ends[hi - 1]
        lengths = ends - np.concatenate([[done], ends[:-1]])
        if int(lengths.max()) >= config.KERNEL_COPY_MIN_BYTES:
            return False
        group = self.group[s:e]
        paths = [sec.path or self.tables.staged[i].path for i, sec in group]
        starts = np.fromiter((sec.position for _, sec in group), np.int64, len(group))
        plan.runs.append(Gather(
            seg_index=seg_index, dst_position=dst, src_paths=paths,
            src_positions=starts + self.positions[lo], lengths=lengths,
            sizes=self.sizes[a:b], bases=self.bases[a:b], nbytes=nbytes))
        return True


def _batches_that_fit(cur: SegPlan, ends: np.ndarray, lasts: np.ndarray, j: int,
                      cfg: AppendConfig) -> int:
    """How many batches from ``j`` (``ends``: cumulative sizes) fit segment ``cur``, as
    ``LogSegment.shouldRoll`` decides: size, relative offset, index fullness. An empty
    segment takes at least one."""
    used = ends[j - 1] if j else 0
    k = int(np.searchsorted(ends[j:] - used, cfg.segment_bytes - cur.end_size,
                            side="right"))
    k = min(k, int(np.searchsorted(lasts[j:], cur.base + INT32_MAX, side="right")))
    room = min(cur.builder.max_index_bytes // OFFSET_ENTRY_SIZE
               - cur.builder.offset_entry_count,
               cur.builder.max_index_bytes // TIME_ENTRY_SIZE
               - cur.builder.time_entry_count)
    k = min(k, max(room, 0))
    if cur.end_size == 0 and k == 0 and room > 0:
        k = 1
    return k


def _partition_count(root: str, topic: str, spec: TopicSpec, parts: list[int],
                     staged_parts: list[int]) -> int | None:
    """How many partitions ``topic`` has (None: the log dir holds only some of them),
    checking the staged partitions against it."""
    if parts:
        n = len(parts)
        if parts != list(range(n)):
            # A broker's log dir may hold only some partitions of a topic (the others
            # live on other brokers): write only to the ones here.
            n = None
        if spec.expected_partitions is not None and n is not None \
                and spec.expected_partitions != n:
            raise CommitConflictError(
                f"topic {topic!r} has {n} partition{'' if n == 1 else 's'} but the rows were partitioned for "
                f"{spec.expected_partitions} (was it created by another writer "
                "meanwhile?)", path=root)
    else:
        n = spec.partitions_if_new
        if n is None:           # every row named its partition: as many as they reach
            n = staged_parts[-1] + 1 if staged_parts else 1
        if n < 1:
            raise InvalidOptionError(f"option 'partitions': topic {topic!r} needs at least "
                                     "one partition")
    for p in staged_parts:
        if n is not None and not 0 <= p < n:
            raise BadRowError(f"partition {p} is outside topic {topic!r}, which has "
                              f"{n} partition{'' if n == 1 else 's'} (0..{n - 1})")
        if n is None and p not in parts:
            raise BadRowError(
                f"partition {p} of topic {topic!r} has no directory in this log dir (it "
                f"holds partitions {parts[:20]}); write those partitions to the log dir "
                "that holds them", path=root)
    return n


def _repair_active(fs: pafs.FileSystem, directory: str, active: Active) -> None:
    """Replace a segment's damaged or untrimmed indexes with the ones Kafka's recovery
    would build (atomic per file)."""
    idx, tidx = active.rebuilt
    write_atomic(fs, segment_file(directory, active.base, ".index"), idx)
    write_atomic(fs, segment_file(directory, active.base, ".timeindex"), tidx)


def _plan_one(fs: pafs.FileSystem, root: str, topic: str, p: int, create: bool,
              sections: list[tuple[int, StagedSection]], tables: TablesCache,
              cfg: AppendConfig, no_append: bool, overwrite: bool,
              preserve: bool = False, keep_open: bool = False) -> PartPlan:
    directory = partition_dir(root, topic, p)
    segs, active, leo = (), None, 0
    keep_open = keep_open and not (no_append or overwrite)
    if not create:
        segs, active, leo = inspect_partition(fs, directory, cfg, keep_open=keep_open)
    try:
        if active is not None and active.rebuilt is not None and not no_append:
            active.close_files()
            _repair_active(fs, directory, active)
            segs, active, leo = inspect_partition(fs, directory, cfg, keep_open=keep_open)
            if active.builder is None and active.log_size:
                raise LogLayoutError("could not repair the active segment's indexes",
                                     path=directory)
        plan = PartPlan(topic=topic, partition=p, directory=directory, create_dir=create,
                        start=leo, active=active, segment_count=len(segs))
        if (active is not None and active.builder is not None and active.log_size
                and active.builder.drop_time_tail_bytes and not no_append
                and not overwrite):
            # the close entry the append replaces: read with the index's tail
            plan.timeindex_tail = active.timeindex_tail[-TIME_ENTRY_SIZE:]
        _plan_partition(plan, sections, tables, cfg, no_append, overwrite,
                        adopt=is_local(fs), preserve=preserve)
    except BaseException:
        if active is not None:
            active.close_files()
        raise
    return plan


def _fds_to_keep() -> int:
    """How many files planning may keep open for the append (3 a partition): half of
    what the process may open, less a margin."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 16
    return max(0, (soft - 256) // 2)


def plan_write(fs: pafs.FileSystem, root: str, staged: Sequence[StagedFile],
               specs: Mapping[str, TopicSpec], existing: Mapping[str, list[int]],
               cfg: AppendConfig, no_append: bool, overwrite: bool,
               preserve: bool = False) -> WritePlan:
    """Plan every partition the write touches (an overwrite touches all of a topic's).
    Repairs an active segment's damaged indexes first, as a broker's recovery would.
    ``preserve``: every batch keeps its staged base offset (see :func:`_preserved_order`).
    On local disk the active segments' files stay open for the append, as many as
    :func:`_fds_to_keep` allows (:meth:`WritePlan.close_files` closes what is left)."""
    tables = TablesCache(fs, staged)
    by_part: dict[tuple[str, int], list[tuple[int, StagedSection]]] = {}
    for i, sf in enumerate(staged):
        for sec in sf.sections:
            by_part.setdefault((sec.topic, sec.partition), []).append((i, sec))
    out = WritePlan(tables=tables, topics={}, no_append=no_append, overwrite=overwrite)
    keep = _fds_to_keep() // 3 if is_local(fs) else 0
    try:
        for t, spec in specs.items():
            parts = existing[t]
            staged_parts = sorted(p for (tt, p) in by_part if tt == t)
            n = _partition_count(root, t, spec, parts, staged_parts)
            if overwrite or not parts:
                touched = list(range(n)) if n is not None else list(parts)
            else:
                touched = staged_parts
            plans = out.topics[t] = []
            for p in touched:
                plans.append(_plan_one(fs, root, t, p, p not in parts,
                                       by_part.get((t, p), []), tables, cfg, no_append,
                                       overwrite, preserve, keep_open=keep > 0))
                keep -= 1
    except BaseException:
        out.close_files()
        raise
    return out

"""Filter pushdown: Spark's pushed filters -> a :class:`Pushdown` the planner and reader apply.

A filter is *accepted* (not returned to Spark) only when we apply it exactly:

- ``topic`` ``=`` / ``<=>`` / ``IN``: prunes topics at planning.
- ``partition`` ``=`` / ``IN`` / ``<`` ``<=`` ``>`` ``>=``: prunes topic-partitions.
- ``offset`` comparisons and ``=``: narrow each partition's offset range, which the reader
  honours row for row; ``offset IN (...)`` narrows the range to [min, max] and keeps an exact
  row filter.
- ``timestamp`` comparisons and ``=``: the lower bound moves each partition's start to the
  first offset with a timestamp at or after it (found through the time index, so earlier
  segments and byte ranges are never read); every timestamp bound is also applied to rows,
  since record timestamps need not grow with offsets.
- ``timestampType`` ``=`` / ``IN``: an exact row filter.
- ``IS NOT NULL`` on any of those columns (never null) is accepted and does nothing;
  ``IS NULL`` on them is accepted and makes the result empty.

Everything else (``key``, ``value``, ``headers``, ``NOT``, string matching, values of an
unexpected type) goes back to Spark unchanged, as the ``pushFilters`` contract requires (the
very same objects).
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Interval:
    """A closed integer interval [lo, hi]; empty when lo > hi."""
    lo: int = _INT_MIN
    hi: int = _INT_MAX

    def intersect(self, other: "Interval") -> "Interval":
        return Interval(max(self.lo, other.lo), min(self.hi, other.hi))

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def contains(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def unbounded(self) -> bool:
        return self.lo == _INT_MIN and self.hi == _INT_MAX


@dataclass(frozen=True)
class Pushdown:
    """The conjunction of every accepted filter. Picklable; ``NONE`` means no filter."""
    topics: frozenset[str] | None = None           # None: any topic
    partitions: frozenset[int] | None = None       # None: any partition (within the range)
    partition_range: Interval = Interval()
    offsets: Interval = Interval()
    offset_set: frozenset[int] | None = None       # exact row filter from offset IN
    timestamp_us: Interval = Interval()            # epoch microseconds, both ends inclusive
    timestamp_types: frozenset[int] | None = None  # exact row filter
    always_false: bool = False
    accepted: tuple[str, ...] = field(default=(), compare=False)   # for explain / tests

    # -- planning -------------------------------------------------------------------------
    def topic_allowed(self, topic: str) -> bool:
        return not self.always_false and (self.topics is None or topic in self.topics)

    def partition_allowed(self, partition: int) -> bool:
        if self.always_false or not self.partition_range.contains(partition):
            return False
        return self.partitions is None or partition in self.partitions

    def offset_bounds(self) -> tuple[int, int | None]:
        """[start, end) offsets every partition is narrowed to (end None = unbounded)."""
        lo = max(self.offsets.lo, 0)
        hi = None if self.offsets.hi == _INT_MAX else self.offsets.hi + 1
        return lo, hi

    def timestamp_lower_ms(self) -> int | None:
        """The smallest record timestamp (ms) a row may have, for time-index seeks."""
        if self.timestamp_us.lo == _INT_MIN:
            return None
        # ceil(us / 1000): a row with timestamp t ms passes t*1000 >= lo
        return -((-self.timestamp_us.lo) // 1000)

    @property
    def has_row_filter(self) -> bool:
        return (self.offset_set is not None or not self.timestamp_us.unbounded
                or self.timestamp_types is not None)

    @property
    def is_empty(self) -> bool:
        return (self.always_false or self.offsets.empty or self.timestamp_us.empty
                or self.partition_range.empty
                or (self.topics is not None and not self.topics)
                or (self.partitions is not None and not self.partitions)
                or (self.offset_set is not None and not self.offset_set)
                or (self.timestamp_types is not None and not self.timestamp_types))


NONE = Pushdown()


def _to_us(value) -> int | None:
    """A tz-aware datetime -> epoch microseconds, exactly (no float)."""
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        delta = value - _EPOCH
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _comparison_interval(f: Filter, v: int) -> Interval:
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return Interval(v, v)
    if isinstance(f, GreaterThan):
        return Interval(v + 1, _INT_MAX) if v < _INT_MAX else Interval(1, 0)
    if isinstance(f, GreaterThanOrEqual):
        return Interval(v, _INT_MAX)
    if isinstance(f, LessThan):
        return Interval(_INT_MIN, v - 1) if v > _INT_MIN else Interval(1, 0)
    if isinstance(f, LessThanOrEqual):
        return Interval(_INT_MIN, v)
    raise TypeError(type(f).__name__)   # callers only pass the comparison classes


_COMPARISONS = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan,
                LessThanOrEqual)
_NEVER_NULL = ("topic", "partition", "offset", "timestamp", "timestampType")


def push(filters: list[Filter], current: Pushdown = NONE) -> tuple[Pushdown, list[Filter]]:
    """Fold ``filters`` (ANDed) into ``current``; return the new pushdown and the filters
    Spark must still evaluate (the same objects, in order)."""
    pd = current
    rejected: list[Filter] = []
    for f in filters:
        new = _push_one(f, pd)
        if new is None:
            rejected.append(f)
        else:
            pd = replace(new, accepted=pd.accepted + (repr(f),))
    return pd, rejected


def _push_one(f: Filter, pd: Pushdown) -> Pushdown | None:
    attr = getattr(f, "attribute", None)
    if not isinstance(attr, tuple) or len(attr) != 1:
        return None
    col = attr[0]
    if isinstance(f, IsNotNull) and col in _NEVER_NULL:
        return pd
    if isinstance(f, IsNull) and col in _NEVER_NULL:
        return replace(pd, always_false=True)
    value = getattr(f, "value", None)

    if col == "topic":
        if isinstance(f, (EqualTo, EqualNullSafe)) and isinstance(value, str):
            names = frozenset([value])
        elif isinstance(f, In) and all(isinstance(v, str) for v in value):
            names = frozenset(value)
        else:
            return None
        return replace(pd, topics=names if pd.topics is None else pd.topics & names)

    if col == "partition":
        if isinstance(f, In) and all(_is_int(v) for v in value):
            s = frozenset(value)
            return replace(pd, partitions=s if pd.partitions is None else pd.partitions & s)
        if isinstance(f, _COMPARISONS) and _is_int(value):
            return replace(pd, partition_range=pd.partition_range.intersect(
                _comparison_interval(f, value)))
        return None

    if col == "offset":
        if isinstance(f, In) and value and all(_is_int(v) for v in value):
            s = frozenset(value)
            s = s if pd.offset_set is None else pd.offset_set & s
            bounds = Interval(min(s), max(s)) if s else Interval(1, 0)
            return replace(pd, offset_set=s, offsets=pd.offsets.intersect(bounds))
        if isinstance(f, _COMPARISONS) and _is_int(value):
            return replace(pd, offsets=pd.offsets.intersect(_comparison_interval(f, value)))
        return None

    if col == "timestamp":
        if isinstance(f, _COMPARISONS):
            us = _to_us(value)
            if us is None:
                return None
            return replace(pd, timestamp_us=pd.timestamp_us.intersect(
                _comparison_interval(f, us)))
        return None

    if col == "timestampType":
        if isinstance(f, (EqualTo, EqualNullSafe)) and _is_int(value):
            s = frozenset([value])
        elif isinstance(f, In) and all(_is_int(v) for v in value):
            s = frozenset(value)
        else:
            return None
        return replace(pd, timestamp_types=s if pd.timestamp_types is None
                       else pd.timestamp_types & s)
    return None


def row_mask(batch, pd: Pushdown):
    """The boolean mask of ``batch`` rows passing ``pd``'s row filters (None: all pass).
    Vectorised with pyarrow.compute; no per-row Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = None

    def both(m):
        return m if mask is None else pc.and_(mask, m)

    if pd.offset_set is not None:
        mask = both(pc.is_in(batch.column("offset"),
                             value_set=pa.array(sorted(pd.offset_set), pa.int64())))
    if not pd.timestamp_us.unbounded:
        # compare as int64 microseconds: exact, and no timezone casts
        ts = batch.column("timestamp").cast(pa.int64())
        if pd.timestamp_us.lo != _INT_MIN:
            mask = both(pc.greater_equal(ts, pa.scalar(pd.timestamp_us.lo, pa.int64())))
        if pd.timestamp_us.hi != _INT_MAX:
            mask = both(pc.less_equal(ts, pa.scalar(pd.timestamp_us.hi, pa.int64())))
    if pd.timestamp_types is not None:
        mask = both(pc.is_in(batch.column("timestampType"),
                             value_set=pa.array(sorted(pd.timestamp_types), pa.int32())))
    return mask

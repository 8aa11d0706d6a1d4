"""Every read and stream option of ``kafkalog`` is parsed here, and only here (the write
options are in ``write_options.py``, the value parsers both use in ``option_values.py``).

Spark hands a data source its options with lower-cased keys (``DataSource.options`` is a
case-insensitive dict); tests and jobs may pass mixed case, so every entry point lower-cases
first and rejects two spellings of one key.

Read options keep the names, defaults and precedence of Spark's Kafka source
(``KafkaSourceProvider``): exactly one of ``subscribe`` / ``subscribePattern`` / ``assign``;
``startingTimestamp`` beats ``startingOffsetsByTimestamp`` beats ``startingOffsets``
(likewise for the ending side); ``startingOffsets`` defaults to ``earliest`` for batch and
``latest`` for streaming; ``endingOffsets`` defaults to ``latest`` and is batch only.
Ours on top: ``path`` (log dirs), ``onCorruption``, ``readPastHighWatermark``,
``windowBytes``, ``maxPartitionBytes`` and ``fs.*`` filesystem options.

Every problem raises :class:`InvalidOptionError` whose message starts with the option's
name as the user spelled it in Spark's docs, so a Spark stack trace points at the culprit.
The parsed :class:`ReadOptions` is a frozen, picklable dataclass: it travels to
executors.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping, Union

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.spark.option_values import (
    duration_ms,
    json_int,
    lower_keys,
    parse_bool,
    parse_bytes,
    parse_choice,
    parse_fs_options,
    parse_int,
    parse_json_object,
    parse_paths,
    reject_broker_only,
    unknown_option,
)
from spark_kafkalog.spark.typed_options import TYPED_NAMES, TypedOptions, parse_typed_options

# -- the offset "specs" a range limit can be --------------------------------------------

#: Kafka's sentinels in offsets JSON: -2 earliest, -1 latest.
EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class Earliest:
    """The log start offset of every partition."""


@dataclass(frozen=True)
class Latest:
    """The upper bound a consumer may read to (high watermark / last stable offset)."""


@dataclass(frozen=True)
class SpecificOffsets:
    """``{"topic":{"0":23}}``: an offset per topic-partition; -2 earliest, -1 latest."""
    offsets: tuple[tuple[str, int, int], ...]     # (topic, partition, offset), sorted

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self.offsets}


@dataclass(frozen=True)
class SpecificTimestamps:
    """``{"topic":{"0":1700000000000}}``: per topic-partition, the earliest offset whose
    record timestamp is >= the given epoch milliseconds."""
    timestamps: tuple[tuple[str, int, int], ...]  # (topic, partition, timestamp_ms), sorted
    strategy: str                                 # no match: "error" | "latest"

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): ts for t, p, ts in self.timestamps}


@dataclass(frozen=True)
class GlobalTimestamp:
    """One timestamp (epoch ms) for every partition of every selected topic."""
    timestamp: int
    strategy: str                                 # no match: "error" | "latest"


OffsetSpec = Union[Earliest, Latest, SpecificOffsets, SpecificTimestamps, GlobalTimestamp]

# -- which topic-partitions ---------------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """A Java-style regex matched against the whole topic name (``Matcher.matches``).
    Internal topics (``__consumer_offsets``, ...) never match, as with a Kafka consumer's
    default ``exclude.internal.topics=true``."""
    pattern: str             # the user's text
    python_pattern: str      # translated for ``re.fullmatch``

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.python_pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[tuple[str, int], ...]       # (topic, partition), sorted


Strategy = Union[Subscribe, SubscribePattern, Assign]

ON_CORRUPTION = ("fail", "skip", "stop")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
MiB = 1024 * 1024


@dataclass(frozen=True)
class ReadOptions:
    """Everything the reader needs, validated. Picklable."""
    paths: tuple[str, ...]
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec | None            # None for streaming (endingOffsets not allowed)
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay: str | None = None
    on_corruption: str = "fail"
    read_past_high_watermark: bool = False
    window_bytes: int = 16 * MiB
    # Map local segment windows instead of reading them: a little faster, but a segment
    # truncated while mapped (a live broker's recovery, our writer's rollback) kills the
    # worker with SIGBUS, so only for logs nothing writes to (copies, backups).
    memory_map: bool = False
    #: the topic's remote tier (KIP-405): root URI and layout (see log/model/remote.py)
    remote_storage: str | None = None
    remote_layout: str | None = None
    max_partition_bytes: int = 128 * MiB
    # several small slices per task (see planning/packing.py)
    pack_partitions: bool = True
    # None: by filesystem (packing.default_open_cost)
    open_cost_bytes: int | None = None
    # read as of a journal commit (write id or commit number) or commit time (ms)
    as_of_commit: str | None = None
    as_of_timestamp: int | None = None
    filesystem_options: Mapping[str, str] = field(default_factory=dict)
    # whether the batch reader offers Spark filter pushdown (pushFilters); None: as the
    # session's spark.sql.python.filterPushdown.enabled says (see spark/datasource.py)
    push_filters: bool | None = None
    # streaming only: log bytes per micro-batch (cut at offset-index entries), None = no cap
    max_bytes_per_trigger: int | None = None
    #: valueFormat/keyFormat and their schema options (typed_options.py); None: binary
    typed: TypedOptions | None = None

    @property
    def path(self) -> str:
        """The log dirs as one comma-separated string (what ``LogDirs`` accepts)."""
        return ",".join(self.paths)


# -- option names (lower-cased) -------------------------------------------------------------

# Canonical spelling per lower-cased key, used in messages.
_READ_NAMES = {
    "path": "path", "paths": "paths",
    "subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign",
    "startingoffsets": "startingOffsets", "endingoffsets": "endingOffsets",
    "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
    "startingtimestamp": "startingTimestamp", "endingtimestamp": "endingTimestamp",
    "startingoffsetsbytimestampstrategy": "startingOffsetsByTimestampStrategy",
    "failondataloss": "failOnDataLoss", "includeheaders": "includeHeaders",
    "kafka.isolation.level": "kafka.isolation.level",
    "minpartitions": "minPartitions", "maxrecordsperpartition": "maxRecordsPerPartition",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger", "maxbytespertrigger": "maxBytesPerTrigger",
    "minoffsetspertrigger": "minOffsetsPerTrigger", "maxtriggerdelay": "maxTriggerDelay",
    "oncorruption": "onCorruption", "readpasthighwatermark": "readPastHighWatermark",
    "windowbytes": "windowBytes", "memorymap": "memoryMap", "maxpartitionbytes": "maxPartitionBytes",
    "pushfilters": "pushFilters",
    "asofcommit": "asOfCommit", "asoftimestamp": "asOfTimestamp",
    "packpartitions": "packPartitions", "opencostinbytes": "openCostInBytes",
    **TYPED_NAMES,
    "remotestorage": "remoteStorage", "remotelayout": "remoteLayout",
}


def _partition_key(name: str, topic: str, key: str, example: str) -> int:
    try:
        p = int(str(key), 10)
    except ValueError:
        raise InvalidOptionError(f"{name}: partition {key!r} of topic {topic!r} is not an "
                                 f"integer; expected e.g. {example}") from None
    if not 0 <= p < (1 << 31):
        raise InvalidOptionError(f"{name}: partition {p} of topic {topic!r} is out of range")
    return p


def _topic_name(name: str, topic) -> str:
    if not isinstance(topic, str) or not topic:
        raise InvalidOptionError(f"{name}: topic names must be non-empty strings, "
                                 f"got {topic!r}")
    return topic


_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'


def parse_partition_offsets(name: str, value: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topic":{"0":23}}`` -> sorted ((topic, partition, offset), ...)."""
    obj = parse_json_object(name, value, _OFFSETS_EXAMPLE)
    out = []
    for topic, parts in obj.items():
        _topic_name(name, topic)
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"{name}: topic {topic!r} must map to an object of "
                                     f"partition -> offset; expected e.g. {_OFFSETS_EXAMPLE}")
        for key, off in parts.items():
            p = _partition_key(name, topic, key, _OFFSETS_EXAMPLE)
            o = json_int(off)
            if o is None or o < -2 or o >= 1 << 63:
                raise InvalidOptionError(
                    f"{name}: offset for {topic}-{p} must be an integer >= 0, or -2 "
                    f"(earliest) or -1 (latest); got {off!r}")
            out.append((topic, p, o))
    return tuple(sorted(out))


def parse_partition_timestamps(name: str, value: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topic":{"0":1700000000000}}`` -> sorted ((topic, partition, ts_ms), ...).
    As with a broker's ListOffsets, -2 means earliest and -1 latest."""
    obj = parse_json_object(name, value, _TIMESTAMPS_EXAMPLE)
    out = []
    for topic, parts in obj.items():
        _topic_name(name, topic)
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"{name}: topic {topic!r} must map to an object of "
                                     f"partition -> timestamp; expected e.g. "
                                     f"{_TIMESTAMPS_EXAMPLE}")
        for key, ts in parts.items():
            p = _partition_key(name, topic, key, _TIMESTAMPS_EXAMPLE)
            t = json_int(ts)
            if t is None or t < -2 or t >= 1 << 63:
                raise InvalidOptionError(f"{name}: timestamp for {topic}-{p} must be epoch "
                                         f"milliseconds (an integer >= 0), got {ts!r}")
            out.append((topic, p, t))
    return tuple(sorted(out))


def _parse_assign(value: str) -> Assign:
    name = "assign"
    if not value.strip().startswith("{"):
        raise InvalidOptionError(f"assign: no topic-partitions to assign, the value is "
                                 f"{value!r}; expected e.g. {_ASSIGN_EXAMPLE}")
    obj = parse_json_object(name, value, _ASSIGN_EXAMPLE)
    out = set()
    for topic, parts in obj.items():
        _topic_name(name, topic)
        if not isinstance(parts, list):
            raise InvalidOptionError(f"assign: topic {topic!r} must map to a list of "
                                     f"partitions; expected e.g. {_ASSIGN_EXAMPLE}")
        for p in parts:
            n = json_int(p)
            if n is None or not 0 <= n < (1 << 31):
                raise InvalidOptionError(f"assign: partition {p!r} of topic {topic!r} is not "
                                         f"a partition number")
            out.add((topic, n))
    if not out:
        raise InvalidOptionError(f"assign: no topic-partitions to assign in {value!r}")
    return Assign(tuple(sorted(out)))


def java_regex_to_python(pattern: str) -> str:
    """Translate the few Java regex spellings Python spells differently; reject the
    constructs Python's ``re`` cannot express (Unicode classes ``\\p{..}``)."""
    if re.search(r"\\[pP]\{", pattern):
        raise InvalidOptionError(f"subscribePattern: Java character classes \\p{{...}} are "
                                 f"not supported, got {pattern!r}")
    # Java named group (?<name>...) is Python's (?P<name>...); leave (?<= and (?<! alone.
    translated = re.sub(r"\(\?<(?![=!])([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern)
    translated = re.sub(r"\\k<([A-Za-z][A-Za-z0-9]*)>", r"(?P=\1)", translated)
    try:
        re.compile(translated)
    except re.error as err:
        raise InvalidOptionError(f"subscribePattern is not a valid regular expression "
                                 f"({err}): {pattern!r}") from None
    return translated


def _strategy(opts: dict[str, str]) -> Strategy:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if not given:
        raise InvalidOptionError("subscribe: one of the options subscribe, subscribePattern, "
                                 "assign must be specified to choose what to read")
    if len(given) > 1:
        names = ", ".join(_READ_NAMES[k] for k in given)
        raise InvalidOptionError(f"{_READ_NAMES[given[0]]}: only one of subscribe, "
                                 f"subscribePattern, assign can be specified, got {names}")
    key = given[0]
    value = opts[key]
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise InvalidOptionError(f"subscribe: no topics to subscribe to, the value is "
                                     f"{value!r}")
        return Subscribe(topics)
    if key == "subscribepattern":
        pattern = value.strip()
        if not pattern:
            raise InvalidOptionError(f"subscribePattern: pattern to subscribe is empty, the "
                                     f"value is {value!r}")
        return SubscribePattern(pattern, java_regex_to_python(pattern))
    return _parse_assign(value)


def _range_limit(opts: dict[str, str], global_key: str, by_ts_key: str, offsets_key: str,
                 default: OffsetSpec, strategy: str) -> OffsetSpec:
    """Spark's ``getKafkaOffsetRangeLimit``: global timestamp, then per-partition
    timestamps, then offsets, then the default."""
    if global_key in opts:
        name = _READ_NAMES[global_key]
        text = opts[global_key].strip()
        ts = parse_int(name, text)
        if ts < 0:
            raise InvalidOptionError(f"{name} must be epoch milliseconds >= 0, got {text!r}")
        return GlobalTimestamp(ts, strategy)
    if by_ts_key in opts:
        name = _READ_NAMES[by_ts_key]
        return SpecificTimestamps(parse_partition_timestamps(name, opts[by_ts_key].strip()),
                                  strategy)
    if offsets_key in opts:
        name = _READ_NAMES[offsets_key]
        text = opts[offsets_key].strip()
        if text.lower() == "earliest":
            return Earliest()
        if text.lower() == "latest":
            return Latest()
        return SpecificOffsets(parse_partition_offsets(name, text))
    return default


# -- public entry points -----------------------------------------------------------------------

def parse_read_options(options: Mapping[str, str], *, streaming: bool | None = False
                       ) -> ReadOptions:
    """Validate the options of ``spark.read.format("kafkalog")`` (or ``readStream`` when
    ``streaming``) and return them parsed. Raises :class:`InvalidOptionError` naming the
    option for anything unknown, malformed or conflicting. ``streaming=None``: the mode
    is not known yet (``DataSource.schema()``, called for both): only the rules that
    hold in both modes are checked, and ``starting``/``ending`` are batch's."""
    either = streaming is None
    streaming = bool(streaming)
    opts = lower_keys(options)
    reject_broker_only(opts, ("kafka.isolation.level",))
    for key in opts:
        if key not in _READ_NAMES and not key.startswith("fs."):
            raise unknown_option(key, list(_READ_NAMES.values()), "source")

    paths = parse_paths(opts, many=True)
    strategy = _strategy(opts)

    strategy_name = "error"
    if "startingoffsetsbytimestampstrategy" in opts:
        strategy_name = parse_choice("startingOffsetsByTimestampStrategy",
                                opts["startingoffsetsbytimestampstrategy"], ("error", "latest"))

    if streaming:
        for key in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if key in opts:
                raise InvalidOptionError(f"{_READ_NAMES[key]} is not valid in streaming "
                                         f"queries")
    starting = _range_limit(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                            "startingoffsets", Latest() if streaming else Earliest(),
                            strategy_name)
    ending = None if streaming else _range_limit(
        opts, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets", Latest(),
        strategy_name)

    if not streaming and not either:
        # validateBatchOptions: a batch must start somewhere known and end somewhere known.
        # The two sides mirror each other (latest/-1 vs earliest/-2) with Spark's messages.
        if isinstance(starting, Latest):
            raise InvalidOptionError("startingOffsets can't be latest for batch queries")
        if isinstance(starting, SpecificOffsets):
            for t, p, o in starting.offsets:
                if o == LATEST:
                    raise InvalidOptionError(f"startingOffsets for {t}-{p} can't be latest "
                                             f"(-1) for batch queries")
        if isinstance(ending, Earliest):
            raise InvalidOptionError("endingOffsets can't be earliest for batch queries")
        if isinstance(ending, SpecificOffsets):
            for t, p, o in ending.offsets:
                if o == EARLIEST:
                    raise InvalidOptionError(f"endingOffsets for {t}-{p} can't be earliest "
                                             f"(-2) for batch queries")
        _check_limit_validity(starting, ending)

    min_partitions = None
    if "minpartitions" in opts:
        min_partitions = parse_int("minPartitions", opts["minpartitions"], minimum=1)
        if min_partitions >= 1 << 31:
            raise InvalidOptionError(f"minPartitions must fit an int, got {min_partitions}")
    max_records = None
    if "maxrecordsperpartition" in opts:
        max_records = parse_int("maxRecordsPerPartition", opts["maxrecordsperpartition"], minimum=1)
    max_per_trigger = min_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = parse_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"], minimum=1)
    if "minoffsetspertrigger" in opts:
        min_per_trigger = parse_int("minOffsetsPerTrigger", opts["minoffsetspertrigger"], minimum=0)
    if (max_per_trigger is not None and min_per_trigger is not None
            and min_per_trigger > max_per_trigger):
        raise InvalidOptionError(f"minOffsetsPerTrigger ({min_per_trigger}) is higher than "
                                 f"maxOffsetsPerTrigger ({max_per_trigger})")
    max_trigger_delay = None
    if "maxtriggerdelay" in opts:
        max_trigger_delay = opts["maxtriggerdelay"].strip()
        duration_ms("maxTriggerDelay", max_trigger_delay)
    max_bytes_per_trigger = None
    if "maxbytespertrigger" in opts:
        max_bytes_per_trigger = parse_bytes("maxBytesPerTrigger", opts["maxbytespertrigger"])
    memory_map = parse_bool("memoryMap", opts.get("memorymap", "false"))
    if streaming:
        if max_trigger_delay is not None and min_per_trigger is None:
            raise InvalidOptionError("maxTriggerDelay only bounds how long a trigger waits "
                                     "for minOffsetsPerTrigger; set minOffsetsPerTrigger "
                                     "too, or drop maxTriggerDelay")
        if min_per_trigger is not None and max_trigger_delay is None:
            max_trigger_delay = DEFAULT_MAX_TRIGGER_DELAY
        if memory_map:
            raise InvalidOptionError("memoryMap=true is not supported in streaming queries: "
                                     "a live log is truncated and rolled under the reader, "
                                     "and a truncated mapped file kills the worker (SIGBUS)")

    as_of_commit = opts.get("asofcommit", "").strip() or None
    as_of_timestamp = (parse_int("asOfTimestamp", opts["asoftimestamp"], minimum=0)
                       if "asoftimestamp" in opts else None)
    if as_of_commit is not None and as_of_timestamp is not None:
        raise InvalidOptionError("asOfCommit and asOfTimestamp: give only one")
    if streaming and (as_of_commit is not None or as_of_timestamp is not None):
        raise InvalidOptionError("asOfCommit/asOfTimestamp are not valid in streaming "
                                 "queries")

    return ReadOptions(
        paths=paths,
        strategy=strategy,
        starting=starting,
        ending=ending,
        fail_on_data_loss=parse_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=parse_bool("includeHeaders", opts.get("includeheaders", "false")),
        push_filters=(parse_bool("pushFilters", opts["pushfilters"]) if "pushfilters" in opts
                      else None),
        isolation_level=parse_choice("kafka.isolation.level",
                                opts.get("kafka.isolation.level", "read_uncommitted"),
                                ISOLATION_LEVELS),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay=max_trigger_delay,
        on_corruption=parse_choice("onCorruption", opts.get("oncorruption", "fail"), ON_CORRUPTION),
        read_past_high_watermark=parse_bool("readPastHighWatermark",
                                       opts.get("readpasthighwatermark", "false")),
        window_bytes=parse_bytes("windowBytes", opts.get("windowbytes", str(16 * MiB)),
                            minimum=64 * 1024),
        memory_map=memory_map,
        max_partition_bytes=parse_bytes("maxPartitionBytes",
                                   opts.get("maxpartitionbytes", str(128 * MiB)),
                                   minimum=1024),
        as_of_commit=as_of_commit, as_of_timestamp=as_of_timestamp,
        # the environment variable sets the default (e.g. to run a test suite unpacked)
        pack_partitions=parse_bool("packPartitions", opts.get(
            "packpartitions", os.environ.get("SPARK_KAFKALOG_PACK", "true"))),
        open_cost_bytes=(parse_bytes("openCostInBytes", opts["opencostinbytes"], minimum=0)
                         if "opencostinbytes" in opts else None),
        filesystem_options=parse_fs_options(opts),
        max_bytes_per_trigger=max_bytes_per_trigger,
        typed=parse_typed_options(opts),
        **_remote_options(opts, min_partitions, max_records, max_bytes_per_trigger,
                          (starting, ending)),
    )


def _remote_options(opts: dict, min_partitions, max_records, max_bytes, specs) -> dict:
    """``remoteStorage`` (the remote tier's root URI) and ``remoteLayout``, validated."""
    from spark_kafkalog.log.model.remote import RemoteLayout

    root = opts.get("remotestorage")
    layout = opts.get("remotelayout")
    if root is None:
        if layout is not None:
            raise InvalidOptionError("remoteLayout is given without remoteStorage")
        return {}
    if not str(root).strip():
        raise InvalidOptionError("remoteStorage: empty; give the remote tier's root URI")
    RemoteLayout.parse(layout)
    if min_partitions is not None or max_records is not None or max_bytes is not None:
        raise InvalidOptionError("remoteStorage cannot be combined with minPartitions, "
                                 "maxRecordsPerPartition or maxBytesPerTrigger yet")
    if any(isinstance(x, (SpecificTimestamps, GlobalTimestamp)) for x in specs):
        # the seek would use the local tier's time index only: refuse, never start late
        raise InvalidOptionError("remoteStorage cannot be combined with timestamp offsets "
                                 "(startingTimestamp, ...OffsetsByTimestamp) yet")
    return {"remote_storage": str(root).strip(), "remote_layout": layout}


#: Kafka source's maxTriggerDelay default
DEFAULT_MAX_TRIGGER_DELAY = "15m"


def _check_limit_validity(starting: OffsetSpec, ending: OffsetSpec | None) -> None:
    """Spark's ``checkOffsetLimitValidity``: specific start and end name the same
    partitions, and no start is after its end (sentinels aside)."""
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        s, e = starting.as_dict(), ending.as_dict()
        if set(s) != set(e):
            raise InvalidOptionError(
                f"endingOffsets: startingOffsets and endingOffsets must name the same "
                f"topic-partitions; starting has {_tp_list(s)}, ending has {_tp_list(e)}")
        for tp, so in s.items():
            eo = e[tp]
            if so >= 0 and eo >= 0 and so > eo:
                raise InvalidOptionError(f"startingOffsets for {tp[0]}-{tp[1]} ({so}) is "
                                         f"after its endingOffsets ({eo})")
    if isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        s, e = starting.as_dict(), ending.as_dict()
        if set(s) != set(e):
            raise InvalidOptionError(
                f"endingOffsetsByTimestamp: startingOffsetsByTimestamp and "
                f"endingOffsetsByTimestamp must name the same topic-partitions; starting "
                f"has {_tp_list(s)}, ending has {_tp_list(e)}")
        for tp, so in s.items():
            eo = e[tp]
            if so >= 0 and eo >= 0 and so > eo:
                raise InvalidOptionError(f"startingOffsetsByTimestamp for {tp[0]}-{tp[1]} "
                                         f"({so}) is after its endingOffsetsByTimestamp ({eo})")


def _tp_list(d) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(d)) + "]"

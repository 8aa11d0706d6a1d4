"""Every ``kafkalog`` option is parsed here, and only here.

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
The parsed results are frozen, picklable dataclasses: they travel to executors.
"""
from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Mapping, Union

from spark_kafkalog.errors import InvalidOptionError

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
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")

#: Default ``batch.size`` of the writer: 1 MiB per record batch, counted uncompressed (a
#: written batch never exceeds it, so every batch fits a broker's default
#: ``max.message.bytes``, 1048588, and a consumer's default ``max.partition.fetch.bytes``).
#: Not the Java producer's 16384: that bounds a client's per-partition buffer while it
#: waits to send, a latency trade-off a writer of whole DataFrames does not have. Each
#: batch costs a 61-byte header, a CRC pass, a per-batch step in every reader and, at
#: commit, a rewritten page on disk (its baseOffset is assigned under the writer lock):
#: with 16 KiB batches that is every fourth page of the log, which the commit's fsync then
#: writes back scattered (measured: 0.50 s for a 281 MB write, after the bytes had been
#: flushed; 0.02 s with 1 MiB batches). Set ``batch.size`` 16384 to get the producer's
#: batches.
DEFAULT_BATCH_SIZE = 1024 * 1024
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
    max_partition_bytes: int = 128 * MiB
    # several small slices per task (see planning/packing.py)
    pack_partitions: bool = True
    open_cost_bytes: int = 4 * MiB
    # read as of a journal commit (write id or commit number) or commit time (ms)
    as_of_commit: str | None = None
    as_of_timestamp: int | None = None
    filesystem_options: Mapping[str, str] = field(default_factory=dict)
    # whether the batch reader offers Spark filter pushdown (pushFilters); None: as the
    # session's spark.sql.python.filterPushdown.enabled says (see spark/datasource.py)
    push_filters: bool | None = None
    # streaming only: log bytes per micro-batch (cut at offset-index entries), None = no cap
    max_bytes_per_trigger: int | None = None

    @property
    def path(self) -> str:
        """The log dirs as one comma-separated string (what ``LogDirs`` accepts)."""
        return ",".join(self.paths)


@dataclass(frozen=True)
class WriteOptions:
    """Everything the writer needs, validated. Picklable."""
    path: str                                   # exactly one log dir
    topic: str | None = None
    compression: str = "none"
    compression_level: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE         # see DEFAULT_BATCH_SIZE
    segment_bytes: int = 1073741824             # Kafka topic segment.bytes default
    index_interval_bytes: int = 4096            # Kafka topic index.interval.bytes default
    partitions: int | None = None               # partition count for a new topic
    filesystem_options: Mapping[str, str] = field(default_factory=dict)
    # Spark refuses errorifexists/ignore for Python sources before a writer runs, so they
    # come as option saveMode with mode("append").
    save_mode: str = "append"                   # append | errorifexists | ignore
    checkpoint_location: str | None = None      # set by Spark for streaming writes
    # fsync segments and indexes before the journal commits the write (durable against
    # power loss). false: a committed write is in the OS page cache when save() returns —
    # safe against a killed process, not a machine crash (a broker's default flush policy)
    fsync: bool = True


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
}

# Options of Spark's Kafka source that only make sense with a broker: rejected with why.
_BROKER_ONLY = {
    "kafka.bootstrap.servers": "there is no broker: this source reads the log files under "
                               "'path' directly",
    "groupidprefix": "no consumer group is used: offsets come from the options, not a group",
    "kafka.group.id": "no consumer group is used: offsets come from the options, not a group",
    "kafkaconsumer.polltimeoutms": "there is no Kafka consumer to poll",
    "fetchoffset.numretries": "offsets are read from local index and checkpoint files; "
                              "there is no broker request to retry",
    "fetchoffset.retryintervalms": "offsets are read from local index and checkpoint files; "
                                   "there is no broker request to retry",
    "kafka.auto.offset.reset": "set 'startingOffsets' to 'earliest' or 'latest' instead",
    "kafka.key.deserializer": "keys are always returned as binary; use DataFrame "
                              "operations to deserialize them",
    "kafka.value.deserializer": "values are always returned as binary; use DataFrame "
                                "operations to deserialize them",
}

_BROKER_ONLY_CANONICAL = {
    "groupidprefix": "groupIdPrefix", "kafkaconsumer.polltimeoutms": "kafkaConsumer.pollTimeoutMs",
    "fetchoffset.numretries": "fetchOffset.numRetries",
    "fetchoffset.retryintervalms": "fetchOffset.retryIntervalMs",
}

# Write options: canonical name -> accepted lower-cased spellings (ours, then Kafka's).
_WRITE_ALIASES = {
    "path": ("path",),
    "topic": ("topic",),
    "compression": ("compression", "compression.type", "kafka.compression.type"),
    "compressionLevel": ("compressionlevel", "compression.level"),
    "batchSize": ("batchsize", "batch.size", "kafka.batch.size"),
    "segmentBytes": ("segmentbytes", "segment.bytes"),
    "indexIntervalBytes": ("indexintervalbytes", "index.interval.bytes"),
    "partitions": ("partitions", "numpartitions", "num.partitions"),
    "saveMode": ("savemode",),
    "checkpointLocation": ("checkpointlocation",),
    "fsync": ("fsync",),
}
SAVE_MODES = ("append", "errorifexists", "ignore")
# How each accepted write spelling is shown in messages (Spark hands us lower case).
_WRITE_DISPLAY = {
    **{canon.lower(): canon for canon in _WRITE_ALIASES},
    "numpartitions": "numPartitions",
}


def _unknown(key: str, known: list[str], where: str) -> InvalidOptionError:
    """An unknown option, with the nearest known name when one is close (a typo) or the
    list of known names; one line, starting with the key as Spark passed it."""
    by_lower = {name.lower(): name for name in known}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.75)
    if close:
        return InvalidOptionError(f"{key}: unknown option for the kafkalog {where}; did you "
                                  f"mean '{by_lower[close[0]]}'?")
    return InvalidOptionError(f"{key}: unknown option for the kafkalog {where} (known: "
                              f"{', '.join(sorted(set(known), key=str.lower))}, fs.*)")


# -- helpers ----------------------------------------------------------------------------------

def _lower(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        low = str(key).lower()
        if low in out:
            raise InvalidOptionError(f"{key}: option given twice (option names are "
                                     f"case-insensitive); keep one")
        out[low] = "" if value is None else str(value)
    return out


def _bool(name: str, value: str) -> bool:
    # Scala's String.toBoolean: "true"/"false", any case, nothing else.
    v = value.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise InvalidOptionError(f"{name} must be 'true' or 'false', got {value!r}")


def _int(name: str, value: str, *, minimum: int | None = None) -> int:
    text = value.strip()
    try:
        n = int(text, 10)
    except ValueError:
        raise InvalidOptionError(f"{name} must be an integer, got {value!r}") from None
    if not -(1 << 63) <= n < (1 << 63):
        raise InvalidOptionError(f"{name} does not fit a 64-bit long: {value!r}")
    if minimum is not None and n < minimum:
        raise InvalidOptionError(f"{name} must be >= {minimum}, got {n}")
    return n


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
               "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def _bytes(name: str, value: str, *, minimum: int = 1) -> int:
    """A byte size: a plain integer or with a binary unit (``64m``, ``16MiB``) as Spark's
    byte-size configs accept."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InvalidOptionError(f"{name} must be a byte size such as 16777216 or 16m, "
                                 f"got {value!r}")
    n = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if n < minimum:
        raise InvalidOptionError(f"{name} must be at least {minimum} bytes, got {value!r}")
    if n >= 1 << 63:
        raise InvalidOptionError(f"{name} is too large: {value!r}")
    return n


def _choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    v = value.strip().lower()
    if v not in choices:
        raise InvalidOptionError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return v


def _json_object(name: str, value: str, example: str) -> dict:
    try:
        obj = json.loads(value)
    except ValueError as err:
        raise InvalidOptionError(f"{name} is not valid JSON ({err.msg} at character "
                                 f"{err.pos}); expected e.g. {example}, got {value!r}") from None
    if not isinstance(obj, dict):
        raise InvalidOptionError(f"{name} must be a JSON object, expected e.g. {example}, "
                                 f"got {value!r}")
    return obj


def _json_int(v) -> int | None:
    # JSON numbers only: bool is an int subclass in Python and is not a number here.
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


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
    obj = _json_object(name, value, _OFFSETS_EXAMPLE)
    out = []
    for topic, parts in obj.items():
        _topic_name(name, topic)
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"{name}: topic {topic!r} must map to an object of "
                                     f"partition -> offset; expected e.g. {_OFFSETS_EXAMPLE}")
        for key, off in parts.items():
            p = _partition_key(name, topic, key, _OFFSETS_EXAMPLE)
            o = _json_int(off)
            if o is None or o < -2 or o >= 1 << 63:
                raise InvalidOptionError(
                    f"{name}: offset for {topic}-{p} must be an integer >= 0, or -2 "
                    f"(earliest) or -1 (latest); got {off!r}")
            out.append((topic, p, o))
    return tuple(sorted(out))


def parse_partition_timestamps(name: str, value: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topic":{"0":1700000000000}}`` -> sorted ((topic, partition, ts_ms), ...).
    As with a broker's ListOffsets, -2 means earliest and -1 latest."""
    obj = _json_object(name, value, _TIMESTAMPS_EXAMPLE)
    out = []
    for topic, parts in obj.items():
        _topic_name(name, topic)
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"{name}: topic {topic!r} must map to an object of "
                                     f"partition -> timestamp; expected e.g. "
                                     f"{_TIMESTAMPS_EXAMPLE}")
        for key, ts in parts.items():
            p = _partition_key(name, topic, key, _TIMESTAMPS_EXAMPLE)
            t = _json_int(ts)
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
    obj = _json_object(name, value, _ASSIGN_EXAMPLE)
    out = set()
    for topic, parts in obj.items():
        _topic_name(name, topic)
        if not isinstance(parts, list):
            raise InvalidOptionError(f"assign: topic {topic!r} must map to a list of "
                                     f"partitions; expected e.g. {_ASSIGN_EXAMPLE}")
        for p in parts:
            n = _json_int(p)
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
        ts = _int(name, text)
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


def _filesystem_options(opts: dict[str, str]) -> dict[str, str]:
    """The ``fs.*`` options, keys kept as given (``fs.s3.endpoint``): the log layer's
    ``resolve_filesystem`` validates them and names the user's key in its errors."""
    out = {}
    for key, value in opts.items():
        if key.startswith("fs."):
            if not key[3:]:
                raise InvalidOptionError("fs.: a filesystem option needs a name after 'fs.'")
            out[key] = value
    return out


def _paths(opts: dict[str, str], *, many: bool) -> tuple[str, ...]:
    """``path`` (comma-separated) and/or ``paths`` (what ``load(["a", "b"])`` sets: a JSON
    array) -> the log-dir URIs."""
    found: list[str] = []
    if "path" in opts:
        found += [p.strip() for p in opts["path"].split(",") if p.strip()]
    if "paths" in opts:
        try:
            arr = json.loads(opts["paths"])
        except ValueError:
            arr = None
        if not isinstance(arr, list) or not all(isinstance(p, str) for p in arr):
            raise InvalidOptionError(f"paths must be a JSON array of log-dir paths, got "
                                     f"{opts['paths']!r}")
        for p in arr:
            found += [q.strip() for q in p.split(",") if q.strip()]
    found = list(dict.fromkeys(found))
    if not found:
        raise InvalidOptionError("path: no log dir given; use load('/path/to/kafka-logs') or "
                                 ".option('path', ...) (several log dirs comma-separated)")
    if not many and len(found) != 1:
        raise InvalidOptionError(f"path: writes go to exactly one log dir, got {len(found)}: "
                                 f"{', '.join(found)}")
    return tuple(found)


def _reject_broker_only(opts: dict[str, str], allowed_kafka: tuple[str, ...]) -> None:
    for key in opts:
        if key in _BROKER_ONLY:
            name = _BROKER_ONLY_CANONICAL.get(key, key)
            raise InvalidOptionError(f"{name} is a Kafka client option with no meaning for "
                                     f"kafkalog: {_BROKER_ONLY[key]}")
        if key.startswith("kafka.") and key not in allowed_kafka:
            raise InvalidOptionError(f"{key} is a Kafka client option with no meaning for "
                                     f"kafkalog: there is no broker or consumer; only "
                                     f"{', '.join(allowed_kafka)} is supported")


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
    opts = _lower(options)
    _reject_broker_only(opts, ("kafka.isolation.level",))
    for key in opts:
        if key not in _READ_NAMES and not key.startswith("fs."):
            raise _unknown(key, list(_READ_NAMES.values()), "source")

    paths = _paths(opts, many=True)
    strategy = _strategy(opts)

    strategy_name = "error"
    if "startingoffsetsbytimestampstrategy" in opts:
        strategy_name = _choice("startingOffsetsByTimestampStrategy",
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
        min_partitions = _int("minPartitions", opts["minpartitions"], minimum=1)
        if min_partitions >= 1 << 31:
            raise InvalidOptionError(f"minPartitions must fit an int, got {min_partitions}")
    max_records = None
    if "maxrecordsperpartition" in opts:
        max_records = _int("maxRecordsPerPartition", opts["maxrecordsperpartition"], minimum=1)
    max_per_trigger = min_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = _int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"], minimum=1)
    if "minoffsetspertrigger" in opts:
        min_per_trigger = _int("minOffsetsPerTrigger", opts["minoffsetspertrigger"], minimum=0)
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
        max_bytes_per_trigger = _bytes("maxBytesPerTrigger", opts["maxbytespertrigger"])
    memory_map = _bool("memoryMap", opts.get("memorymap", "false"))
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
    as_of_timestamp = (_int("asOfTimestamp", opts["asoftimestamp"], minimum=0)
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
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        push_filters=(_bool("pushFilters", opts["pushfilters"]) if "pushfilters" in opts
                      else None),
        isolation_level=_choice("kafka.isolation.level",
                                opts.get("kafka.isolation.level", "read_uncommitted"),
                                ISOLATION_LEVELS),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay=max_trigger_delay,
        on_corruption=_choice("onCorruption", opts.get("oncorruption", "fail"), ON_CORRUPTION),
        read_past_high_watermark=_bool("readPastHighWatermark",
                                       opts.get("readpasthighwatermark", "false")),
        window_bytes=_bytes("windowBytes", opts.get("windowbytes", str(16 * MiB)),
                            minimum=64 * 1024),
        memory_map=memory_map,
        max_partition_bytes=_bytes("maxPartitionBytes",
                                   opts.get("maxpartitionbytes", str(128 * MiB)),
                                   minimum=1024),
        as_of_commit=as_of_commit, as_of_timestamp=as_of_timestamp,
        # the environment variable sets the default (e.g. to run a test suite unpacked)
        pack_partitions=_bool("packPartitions", opts.get(
            "packpartitions", os.environ.get("SPARK_KAFKALOG_PACK", "true"))),
        open_cost_bytes=_bytes("openCostInBytes", opts.get("opencostinbytes", str(4 * MiB)),
                               minimum=0),
        filesystem_options=_filesystem_options(opts),
        max_bytes_per_trigger=max_bytes_per_trigger,
    )


#: Kafka source's maxTriggerDelay default
DEFAULT_MAX_TRIGGER_DELAY = "15m"
_DURATION_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                "h": 3_600_000, "d": 86_400_000}


def duration_ms(name: str, value: str) -> int:
    """A duration as Spark's ``timeStringAsMs`` reads it (``15m``, ``30s``, ``500ms``,
    ``2h``; a bare number is milliseconds), in milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*", value or "", re.IGNORECASE)
    if not m:
        raise InvalidOptionError(f"{name} must be a duration such as 15m or 30s, got "
                                 f"{value!r}")
    return int(int(m.group(1)) * _DURATION_MS[(m.group(2) or "ms").lower()])


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


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the options of ``df.write.format("kafkalog")`` / ``writeStream``.
    Each setting has our camelCase name and Kafka's dotted name (``compression`` /
    ``compression.type``, ``batchSize`` / ``batch.size``, ``segmentBytes`` /
    ``segment.bytes``, ``indexIntervalBytes`` / ``index.interval.bytes``); giving both
    spellings of one setting is an error."""
    opts = _lower(options)
    allowed_kafka = ("kafka.compression.type", "kafka.batch.size")
    _reject_broker_only(opts, allowed_kafka)
    spelled: dict[str, tuple[str, str]] = {}      # canonical -> (key used, value)
    known = {alias: canon for canon, aliases in _WRITE_ALIASES.items() for alias in aliases}
    for key, value in opts.items():
        if key.startswith("fs."):
            continue
        canon = known.get(key)
        if canon is None:
            dotted = [a for aliases in _WRITE_ALIASES.values() for a in aliases if "." in a]
            raise _unknown(key, [*_WRITE_ALIASES, *dotted, "numPartitions"], "sink")
        shown = _WRITE_DISPLAY.get(key, key)
        if canon in spelled:
            raise InvalidOptionError(f"{canon}: given twice, as '{spelled[canon][0]}' and "
                                     f"'{shown}'; keep one")
        spelled[canon] = (shown, value)

    def get(canon: str) -> tuple[str, str] | None:
        return spelled.get(canon)

    path = _paths({"path": get("path")[1]} if get("path") else {}, many=False)[0]
    topic = None
    if get("topic"):
        topic = get("topic")[1].strip()
        if not topic:
            raise InvalidOptionError("topic must not be empty")
        validate_topic_name("topic", topic)
    compression = "none"
    if get("compression"):
        compression = _choice(get("compression")[0], get("compression")[1], COMPRESSIONS)
    level = None
    if get("compressionLevel"):
        level = _int(get("compressionLevel")[0], get("compressionLevel")[1])
        _check_level(get("compressionLevel")[0], compression, level)
    batch_size = DEFAULT_BATCH_SIZE
    if get("batchSize"):
        batch_size = _bytes(get("batchSize")[0], get("batchSize")[1], minimum=1)
        if batch_size >= 1 << 31:
            raise InvalidOptionError(f"{get('batchSize')[0]} must fit an int, got {batch_size}")
    segment_bytes = 1073741824
    if get("segmentBytes"):
        # Kafka's segment.bytes: at least 14 bytes (LegacyRecord.RECORD_OVERHEAD_V0), an int.
        segment_bytes = _bytes(get("segmentBytes")[0], get("segmentBytes")[1], minimum=14)
        if segment_bytes >= 1 << 31:
            raise InvalidOptionError(f"{get('segmentBytes')[0]} must fit an int (Kafka's "
                                     f"segment.bytes is an int), got {segment_bytes}")
    index_interval = 4096
    if get("indexIntervalBytes"):
        index_interval = _bytes(get("indexIntervalBytes")[0], get("indexIntervalBytes")[1],
                                minimum=0)
        if index_interval >= 1 << 31:
            raise InvalidOptionError(f"{get('indexIntervalBytes')[0]} must fit an int, got "
                                     f"{index_interval}")
    partitions = None
    if get("partitions"):
        partitions = _int(get("partitions")[0], get("partitions")[1], minimum=1)
        if partitions >= 1 << 31:
            raise InvalidOptionError(f"{get('partitions')[0]} must fit an int, got "
                                     f"{partitions}")
    save_mode = "append"
    if get("saveMode"):
        save_mode = get("saveMode")[1].strip().lower() or "append"
        if save_mode not in SAVE_MODES:
            raise InvalidOptionError(f"saveMode must be one of {', '.join(SAVE_MODES)} (use "
                                     f"mode('overwrite') to replace a topic), got "
                                     f"{get('saveMode')[1]!r}")
    fsync = _bool(get("fsync")[0], get("fsync")[1]) if get("fsync") else True
    return WriteOptions(path=path, topic=topic, compression=compression,
                        compression_level=level, batch_size=batch_size,
                        segment_bytes=segment_bytes, index_interval_bytes=index_interval,
                        partitions=partitions, filesystem_options=_filesystem_options(opts),
                        save_mode=save_mode,
                        checkpoint_location=get("checkpointLocation")[1]
                        if get("checkpointLocation") else None, fsync=fsync)


# Kafka's per-codec level ranges (compression.gzip.level, .lz4.level, .zstd.level, KIP-390).
_LEVELS = {"gzip": (1, 9, (-1,)), "lz4": (1, 17, ()), "zstd": (-131072, 22, ())}


def _check_level(name: str, compression: str, level: int) -> None:
    if compression not in _LEVELS:
        raise InvalidOptionError(f"{name} needs compression gzip, lz4 or zstd; compression "
                                 f"is {compression!r}")
    lo, hi, extra = _LEVELS[compression]
    if not (lo <= level <= hi or level in extra):
        raise InvalidOptionError(f"{name} for {compression} must be in [{lo}, {hi}], got "
                                 f"{level}")


_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str, topic: str) -> None:
    """Kafka's topic name rules (``Topic.validate``): 1..249 chars of [a-zA-Z0-9._-], not
    '.' or '..'."""
    if topic in (".", "..") or len(topic) > 249 or not _TOPIC_RE.fullmatch(topic):
        raise InvalidOptionError(f"{name}: {topic!r} is not a legal Kafka topic name "
                                 f"(1 to 249 characters of ASCII letters, digits, '.', '_' "
                                 f"and '-', not '.' or '..')")

"""The options of ``df.write.format("kafkalog")`` / ``writeStream``, parsed here and only
here (the read options are in ``options.py``, the shared value parsers in
``option_values.py``). Each setting has our camelCase name and Kafka's dotted name
(``compression`` / ``compression.type``, ...); Kafka's topic rules (name, per-codec
compression levels) are checked here. The parsed :class:`WriteOptions` is a frozen,
picklable dataclass: it travels to executors.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructType, TimestampNTZType, TimestampType)

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log.model.names import internal_write_refusal
from spark_kafkalog.log.write.config import SYNC_METHODS
from spark_kafkalog.spark.option_values import (
    lower_keys,
    parse_bool,
    parse_bytes,
    parse_choice,
    parse_fs_options,
    parse_int,
    parse_paths,
    reject_broker_only,
    unknown_option,
)

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
    # how (SYNC_METHODS): "fsync" each file, one "syncfs" of the log dir's filesystem, or
    # "auto" (syncfs for a commit of many files)
    sync_method: str = "auto"
    # "assign": offsets continue from each partition's log end; "preserve": each record
    # keeps its 'offset' column (see writer.py)
    offsets: str = "assign"
    # write into a broker's internal topic (__consumer_offsets, ...): a restore that means it
    allow_internal_topic: bool = False
    # valueFormat/keyFormat=avro/protobuf/json and their schema options (spark/typed_write.py)
    typed: object = None

    def check_topic(self, topic: str) -> None:
        """Refuse a write into a broker's internal topic unless allowInternalTopic."""
        why = None if self.allow_internal_topic else \
            internal_write_refusal(topic, "option allowInternalTopic=true")
        if why:
            raise InvalidOptionError(why)


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
    "syncMethod": ("syncmethod",),
    "offsets": ("offsets",),
    "allowInternalTopic": ("allowinternaltopic",),
}
OFFSET_MODES = ("assign", "preserve")
SAVE_MODES = ("append", "errorifexists", "ignore")
# How each accepted write spelling is shown in messages (Spark hands us lower case).
_WRITE_DISPLAY = {
    **{canon.lower(): canon for canon in _WRITE_ALIASES},
    "numpartitions": "numPartitions",
}


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the options of ``df.write.format("kafkalog")`` / ``writeStream``.
    Each setting has our camelCase name and Kafka's dotted name (``compression`` /
    ``compression.type``, ``batchSize`` / ``batch.size``, ``segmentBytes`` /
    ``segment.bytes``, ``indexIntervalBytes`` / ``index.interval.bytes``); giving both
    spellings of one setting is an error."""
    opts = lower_keys(options)
    from spark_kafkalog.spark.typed_write import TYPED_WRITE_NAMES, parse_typed_write
    typed_opts = {k: opts.pop(k) for k in list(opts) if k in TYPED_WRITE_NAMES}
    allowed_kafka = ("kafka.compression.type", "kafka.batch.size")
    reject_broker_only(opts, allowed_kafka)
    spelled: dict[str, tuple[str, str]] = {}      # canonical -> (key used, value)
    known = {alias: canon for canon, aliases in _WRITE_ALIASES.items() for alias in aliases}
    for key, value in opts.items():
        if key.startswith("fs."):
            continue
        canon = known.get(key)
        if canon is None:
            dotted = [a for aliases in _WRITE_ALIASES.values() for a in aliases if "." in a]
            raise unknown_option(key, [*_WRITE_ALIASES, *dotted, "numPartitions",
                                       *TYPED_WRITE_NAMES.values()], "sink")
        shown = _WRITE_DISPLAY.get(key, key)
        if canon in spelled:
            raise InvalidOptionError(f"{canon}: given twice, as '{spelled[canon][0]}' and "
                                     f"'{shown}'; keep one")
        spelled[canon] = (shown, value)

    def get(canon: str) -> tuple[str, str] | None:
        return spelled.get(canon)

    path = parse_paths({"path": get("path")[1]} if get("path") else {}, many=False)[0]
    topic = None
    if get("topic"):
        topic = get("topic")[1].strip()
        if not topic:
            raise InvalidOptionError("topic must not be empty")
        validate_topic_name("topic", topic)
    compression = "none"
    if get("compression"):
        compression = parse_choice(get("compression")[0], get("compression")[1], COMPRESSIONS)
    level = None
    if get("compressionLevel"):
        level = parse_int(get("compressionLevel")[0], get("compressionLevel")[1])
        _check_level(get("compressionLevel")[0], compression, level)
    batch_size = DEFAULT_BATCH_SIZE
    if get("batchSize"):
        batch_size = parse_bytes(get("batchSize")[0], get("batchSize")[1], minimum=1)
        if batch_size >= 1 << 31:
            raise InvalidOptionError(f"{get('batchSize')[0]} must fit an int, got {batch_size}")
    segment_bytes = 1073741824
    if get("segmentBytes"):
        # Kafka's segment.bytes: at least 14 bytes (LegacyRecord.RECORD_OVERHEAD_V0), an int.
        segment_bytes = parse_bytes(get("segmentBytes")[0], get("segmentBytes")[1], minimum=14)
        if segment_bytes >= 1 << 31:
            raise InvalidOptionError(f"{get('segmentBytes')[0]} must fit an int (Kafka's "
                                     f"segment.bytes is an int), got {segment_bytes}")
    index_interval = 4096
    if get("indexIntervalBytes"):
        index_interval = parse_bytes(get("indexIntervalBytes")[0], get("indexIntervalBytes")[1],
                                minimum=0)
        if index_interval >= 1 << 31:
            raise InvalidOptionError(f"{get('indexIntervalBytes')[0]} must fit an int, got "
                                     f"{index_interval}")
    partitions = None
    if get("partitions"):
        partitions = parse_int(get("partitions")[0], get("partitions")[1], minimum=1)
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
    fsync = parse_bool(get("fsync")[0], get("fsync")[1]) if get("fsync") else True
    sync_method = "auto"
    if get("syncMethod"):
        sync_method = parse_choice(get("syncMethod")[0], get("syncMethod")[1], SYNC_METHODS)
    offsets = "assign"
    if get("offsets"):
        offsets = parse_choice(get("offsets")[0], get("offsets")[1], OFFSET_MODES)
    allow_internal = parse_bool(get("allowInternalTopic")[0], get("allowInternalTopic")[1]) \
        if get("allowInternalTopic") else False
    parsed = WriteOptions(path=path, topic=topic, compression=compression,
                        compression_level=level, batch_size=batch_size,
                        segment_bytes=segment_bytes, index_interval_bytes=index_interval,
                        partitions=partitions, filesystem_options=parse_fs_options(opts),
                        save_mode=save_mode,
                        checkpoint_location=get("checkpointLocation")[1]
                        if get("checkpointLocation") else None, fsync=fsync,
                        sync_method=sync_method, offsets=offsets,
                        allow_internal_topic=allow_internal,
                        typed=parse_typed_write(typed_opts))
    if topic is not None:
        parsed.check_topic(topic)
    return parsed


def check_input_columns(schema: StructType, topic_option: str | None,
                  preserve: bool = False, typed=()) -> None:
    """Validate the input columns as Spark's Kafka sink does; messages name the column
    (``typed``: the columns written as Avro, Protobuf or JSON, which are structs)."""
    fields = {f.name.lower(): f for f in schema.fields}

    def check(name, ok, want):
        f = fields.get(name)
        if f is not None and not ok(f.dataType):
            raise InvalidOptionError(f"column '{f.name}' must be {want}, not "
                                     f"{f.dataType.simpleString()}")

    if "value" not in fields:
        raise InvalidOptionError("the DataFrame to write needs a 'value' column (binary or "
                                 "string)")
    for c in ("value", "key"):
        check(c, (lambda t: isinstance(t, StructType)) if c in typed else
              (lambda t: isinstance(t, (BinaryType, StringType))),
              "a struct (valueFormat/keyFormat=avro, protobuf or json)" if c in typed
              else "binary or string")
    check("topic", lambda t: isinstance(t, StringType), "string")
    check("partition", lambda t: isinstance(t, IntegerType), "int")
    check("timestamp", lambda t: isinstance(t, (TimestampType, TimestampNTZType)),
          "timestamp")

    def headers_ok(t):
        if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
            return False
        names = [(f.name, type(f.dataType)) for f in t.elementType.fields]
        return (len(names) == 2 and names[0] == ("key", StringType)
                and names[1][0] == "value" and names[1][1] in (BinaryType, StringType))

    check("headers", headers_ok, "array<struct<key:string,value:binary>>")
    if preserve:        # otherwise these columns are ignored, whatever their types
        check("offset", lambda t: isinstance(t, (LongType, IntegerType)), "long")
        check("timestamptype", lambda t: isinstance(t, IntegerType), "int")
    if preserve and "offset" not in fields:
        raise InvalidOptionError("offsets=preserve: the DataFrame needs an 'offset' column "
                                 "(long), the offset each record keeps")
    if topic_option is None and "topic" not in fields:
        raise InvalidOptionError("topic: set the 'topic' option or give the DataFrame a "
                                 "'topic' column")


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

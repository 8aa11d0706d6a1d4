"""Option parsing: Kafka-source names, defaults, precedence and errors (no Spark session)."""
from __future__ import annotations

import pickle

import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.spark.options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_read_options,
)
from spark_kafkalog.spark.write_options import WriteOptions, parse_write_options

BASE = {"path": "/logs", "subscribe": "t"}


def read(**kw):
    return parse_read_options({**BASE, **kw})


def test_defaults_match_kafka_source():
    o = read()
    assert o.paths == ("/logs",)
    assert o.strategy == Subscribe(("t",))
    assert o.starting == Earliest() and o.ending == Latest()
    assert o.fail_on_data_loss is True
    assert o.include_headers is False
    assert o.isolation_level == "read_uncommitted"
    assert o.min_partitions is None and o.max_records_per_partition is None
    assert o.on_corruption == "fail" and o.read_past_high_watermark is False
    assert o.window_bytes == 16 << 20 and o.max_partition_bytes == 128 << 20
    assert pickle.loads(pickle.dumps(o)) == o


def test_streaming_defaults_and_ending_rejected():
    o = parse_read_options(BASE, streaming=True)
    assert o.starting == Latest() and o.ending is None
    with pytest.raises(InvalidOptionError, match="endingOffsets is not valid in streaming"):
        parse_read_options({**BASE, "endingOffsets": "latest"}, streaming=True)


def test_keys_are_case_insensitive_and_duplicates_rejected():
    o = parse_read_options({"PATH": "/a, /b", "SubscribePattern": "t.*",
                            "STARTINGOFFSETS": "Earliest", "includeHEADERS": "TRUE"})
    assert o.paths == ("/a", "/b")
    assert isinstance(o.strategy, SubscribePattern)
    assert o.include_headers is True
    with pytest.raises(InvalidOptionError, match="given twice"):
        parse_read_options({"path": "/a", "PATH": "/b", "subscribe": "t"})


def test_paths_json_from_load_list():
    o = parse_read_options({"paths": '["/a","/b"]', "subscribe": "t"})
    assert o.paths == ("/a", "/b")
    assert o.path == "/a,/b"


@pytest.mark.parametrize("opts,name", [
    ({"subscribe": "t"}, "path"),
    ({"path": "/l"}, "subscribe"),
    ({"path": "/l", "subscribe": "t", "assign": '{"t":[0]}'}, "subscribe"),
    ({"path": "/l", "subscribe": " , "}, "subscribe"),
    ({"path": "/l", "subscribePattern": "  "}, "subscribePattern"),
    ({"path": "/l", "subscribePattern": "a(b"}, "subscribePattern"),
    ({"path": "/l", "subscribePattern": r"\p{Alpha}+"}, "subscribePattern"),
    ({"path": "/l", "assign": "t-0"}, "assign"),
    ({"path": "/l", "assign": '{"t":[0,"x"]}'}, "assign"),
    ({"path": "/l", "assign": '{"t":0}'}, "assign"),
    ({"path": "/l", "assign": '{"t":[]}'}, "assign"),
    ({"path": "/l", "assign": '{"t":[0]'}, "assign"),
    ({**BASE, "startingOffsets": "latest"}, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"0":-1}}'}, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"x":1}}'}, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"0":-3}}'}, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"0":1.5}}'}, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"0":true}}'}, "startingOffsets"),
    ({**BASE, "startingOffsets": "soon"}, "startingOffsets"),
    ({**BASE, "endingOffsets": "earliest"}, "endingOffsets"),
    ({**BASE, "endingOffsets": '{"t":{"0":-2}}'}, "endingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"0":5}}', "endingOffsets": '{"t":{"0":3}}'},
     "startingOffsets"),
    ({**BASE, "startingOffsets": '{"t":{"0":5}}', "endingOffsets": '{"t":{"1":9}}'},
     "endingOffsets"),
    ({**BASE, "startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({**BASE, "startingTimestamp": "-5"}, "startingTimestamp"),
    ({**BASE, "endingTimestamp": "1.5"}, "endingTimestamp"),
    ({**BASE, "startingOffsetsByTimestamp": '{"t":{"0":"x"}}'}, "startingOffsetsByTimestamp"),
    ({**BASE, "endingOffsetsByTimestamp": '[1]'}, "endingOffsetsByTimestamp"),
    ({**BASE, "startingOffsetsByTimestamp": '{"t":{"0":9}}',
      "endingOffsetsByTimestamp": '{"t":{"0":5}}'}, "startingOffsetsByTimestamp"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "earliest"},
     "startingOffsetsByTimestampStrategy"),
    ({**BASE, "failOnDataLoss": "yes"}, "failOnDataLoss"),
    ({**BASE, "includeHeaders": "1"}, "includeHeaders"),
    ({**BASE, "kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
    ({**BASE, "minPartitions": "0"}, "minPartitions"),
    ({**BASE, "minPartitions": "two"}, "minPartitions"),
    ({**BASE, "maxRecordsPerPartition": "-1"}, "maxRecordsPerPartition"),
    ({**BASE, "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({**BASE, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "9"},
     "minOffsetsPerTrigger"),
    ({**BASE, "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({**BASE, "onCorruption": "ignore"}, "onCorruption"),
    ({**BASE, "readPastHighWatermark": "maybe"}, "readPastHighWatermark"),
    ({**BASE, "windowBytes": "12x"}, "windowBytes"),
    ({**BASE, "windowBytes": "10"}, "windowBytes"),
    ({**BASE, "memoryMap": "yes"}, "memoryMap"),
    ({**BASE, "maxPartitionBytes": "-1"}, "maxPartitionBytes"),
    ({**BASE, "paths": '"/x"'}, "paths"),
    ({**BASE, "fs.": "x"}, "fs."),
    ({**BASE, "colour": "blue"}, "colour"),
])
def test_malformed_option_error_names_it(opts, name):
    with pytest.raises(InvalidOptionError) as info:
        parse_read_options(opts)
    assert str(info.value).startswith(name), str(info.value)


@pytest.mark.parametrize("key,name,why", [
    ("kafka.bootstrap.servers", "kafka.bootstrap.servers", "no broker"),
    ("groupIdPrefix", "groupIdPrefix", "consumer group"),
    ("kafka.group.id", "kafka.group.id", "consumer group"),
    ("kafka.auto.offset.reset", "kafka.auto.offset.reset", "startingOffsets"),
    ("kafka.value.deserializer", "kafka.value.deserializer", "binary"),
    ("kafkaConsumer.pollTimeoutMs", "kafkaConsumer.pollTimeoutMs", "no Kafka consumer"),
    ("fetchOffset.numRetries", "fetchOffset.numRetries", "no broker request"),
    ("kafka.max.poll.records", "kafka.max.poll.records", "no broker"),
])
def test_broker_only_options_rejected_with_reason(key, name, why):
    with pytest.raises(InvalidOptionError) as info:
        parse_read_options({**BASE, key: "x"})
    msg = str(info.value)
    assert msg.startswith(name) and why in msg and "no meaning for kafkalog" in msg


def test_precedence_global_timestamp_over_by_timestamp_over_offsets():
    o = read(startingOffsets='{"t":{"0":1}}', startingOffsetsByTimestamp='{"t":{"0":50}}',
             startingTimestamp="100", endingTimestamp="200",
             endingOffsetsByTimestamp='{"t":{"0":150}}', endingOffsets='{"t":{"0":9}}')
    assert o.starting == GlobalTimestamp(100, "error")
    assert o.ending == GlobalTimestamp(200, "error")
    o = read(startingOffsets='{"t":{"0":1}}', startingOffsetsByTimestamp='{"t":{"0":50}}',
             startingOffsetsByTimestampStrategy="LATEST")
    assert o.starting == SpecificTimestamps((("t", 0, 50),), "latest")
    o = read(startingOffsets='{"t":{"0":1,"1":-2}}', endingOffsets='{"t":{"0":-1,"1":7}}')
    assert o.starting == SpecificOffsets((("t", 0, 1), ("t", 1, -2)))
    assert o.ending.as_dict() == {("t", 0): -1, ("t", 1): 7}


def test_strategies():
    assert read().strategy == Subscribe(("t",))
    o = parse_read_options({"path": "/l", "subscribe": "b, a,b ,"})
    assert o.strategy == Subscribe(("b", "a"))
    o = parse_read_options({"path": "/l", "assign": '{"b":[1,0],"a":[2]}'})
    assert o.strategy == Assign((("a", 2), ("b", 0), ("b", 1)))
    o = parse_read_options({"path": "/l", "subscribePattern": "top(?<n>ic)-\\k<n>|x.*"})
    assert o.strategy.matches("topic-ic") and o.strategy.matches("xyz")
    assert not o.strategy.matches("atopic-ic")          # whole-name match, like Java's matches()


def test_sizes_and_filesystem_options():
    o = read(windowBytes="1m", maxPartitionBytes="64MiB", **{"fs.s3.endpoint": "http://x"})
    assert o.window_bytes == 1 << 20 and o.max_partition_bytes == 64 << 20
    assert o.filesystem_options == {"fs.s3.endpoint": "http://x"}
    assert not o.memory_map and read(memoryMap="TRUE").memory_map


def test_streaming_only_options_parse_in_batch():
    o = read(maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10", maxTriggerDelay="15m")
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger) == (100, 10)


# -- write options ------------------------------------------------------------------------------

def test_write_defaults():
    w = parse_write_options({"path": "/out"})
    assert w == WriteOptions(path="/out")
    assert (w.compression, w.batch_size, w.segment_bytes, w.index_interval_bytes) == \
        ("none", 1 << 20, 1073741824, 4096)
    # a batch never exceeds batch.size, and 1 MiB is within a broker's default
    # max.message.bytes (1048588) and a consumer's max.partition.fetch.bytes (1048576)
    assert w.batch_size <= 1048576
    assert pickle.loads(pickle.dumps(w)) == w


def test_write_aliases_and_values():
    w = parse_write_options({"PATH": "/out", "topic": "t", "compression.type": "ZSTD",
                             "compressionLevel": "3", "batch.size": "1m",
                             "segmentBytes": "1048576", "index.interval.bytes": "0",
                             "partitions": "4", "fs.s3.region": "eu", "FSYNC": "False",
                             "syncMethod": "SYNCFS"})
    assert (w.topic, w.compression, w.compression_level, w.batch_size) == ("t", "zstd", 3,
                                                                           1 << 20)
    assert (w.segment_bytes, w.index_interval_bytes, w.partitions) == (1048576, 0, 4)
    assert w.filesystem_options == {"fs.s3.region": "eu"}
    assert w.fsync is False and WriteOptions(path="/out").fsync is True
    assert w.sync_method == "syncfs" and WriteOptions(path="/out").sync_method == "auto"


@pytest.mark.parametrize("opts,name", [
    ({}, "path"),
    ({"path": "/a,/b"}, "path"),
    ({"path": "/a", "topic": "bad topic"}, "topic"),
    ({"path": "/a", "topic": "  "}, "topic"),
    ({"path": "/a", "compression": "brotli"}, "compression"),
    ({"path": "/a", "compression.type": "brotli"}, "compression.type"),
    ({"path": "/a", "compressionLevel": "3"}, "compressionlevel"),
    ({"path": "/a", "compression": "gzip", "compressionLevel": "12"}, "compressionlevel"),
    ({"path": "/a", "batchSize": "0"}, "batchsize"),
    ({"path": "/a", "segment.bytes": "4g"}, "segment.bytes"),
    ({"path": "/a", "segmentBytes": "10"}, "segmentbytes"),
    ({"path": "/a", "partitions": "0"}, "partitions"),
    ({"path": "/a", "fsync": "yes"}, "fsync"),
    ({"path": "/a", "syncMethod": "fdatasync"}, "syncmethod"),
    ({"path": "/a", "compression": "gzip", "compression.type": "lz4"}, "compression"),
    ({"path": "/a", "kafka.bootstrap.servers": "h:9092"}, "kafka.bootstrap.servers"),
    ({"path": "/a", "kafka.acks": "all"}, "kafka.acks"),
    ({"path": "/a", "subscribe": "t"}, "subscribe"),
])
def test_write_option_errors_name_the_option(opts, name):
    with pytest.raises(InvalidOptionError) as info:
        parse_write_options(opts)
    assert str(info.value).lower().startswith(name.lower()), str(info.value)


# -- messages a person can act on ----------------------------------------------------------

@pytest.mark.parametrize("key,suggestion", [
    ("startingoffset", "startingOffsets"),            # Spark lower-cases option keys
    ("includeheader", "includeHeaders"),
    ("subscribepatern", "subscribePattern"),
    ("oncorupption", "onCorruption"),
])
def test_unknown_read_option_suggests_the_near_name(key, suggestion):
    with pytest.raises(InvalidOptionError) as info:
        parse_read_options({**BASE, key: "x"})
    msg = str(info.value)
    assert msg.startswith(key) and f"did you mean '{suggestion}'?" in msg
    assert "\n" not in msg and len(msg) < 120


def test_unknown_option_far_from_any_lists_the_known_names():
    with pytest.raises(InvalidOptionError) as info:
        parse_read_options({**BASE, "colour": "blue"})
    msg = str(info.value)
    assert "did you mean" not in msg and "startingOffsets" in msg and "\n" not in msg
    with pytest.raises(InvalidOptionError) as info:
        parse_write_options({"path": "/a", "compresion": "lz4"})
    assert "did you mean 'compression'?" in str(info.value)
    with pytest.raises(InvalidOptionError) as info:
        parse_write_options({"path": "/a", "batch.sise": "1"})
    assert "did you mean 'batch.size'?" in str(info.value)


@pytest.mark.parametrize("key,shown", [
    ("batchsize", "batchSize"), ("segmentbytes", "segmentBytes"),
    ("indexintervalbytes", "indexIntervalBytes"), ("numpartitions", "numPartitions"),
    ("segment.bytes", "segment.bytes"),
])
def test_write_errors_show_the_options_documented_casing(key, shown):
    # Spark hands the sink lower-cased keys; messages use the documented spelling
    with pytest.raises(InvalidOptionError) as info:
        parse_write_options({"path": "/a", key: "-5"})
    assert str(info.value).startswith(shown + " "), str(info.value)


def test_option_given_twice_says_what_to_do():
    with pytest.raises(InvalidOptionError) as info:
        parse_write_options({"path": "/a", "batchSize": "1", "batch.size": "2"})
    msg = str(info.value)
    assert "given twice" in msg and "keep one" in msg and "'batchSize'" in msg

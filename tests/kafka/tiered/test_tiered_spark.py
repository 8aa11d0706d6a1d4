"""``spark.read.format("kafkalog")`` with ``remoteStorage`` over a topic a real broker
tiered equals what Kafka's Java consumer read through the broker, both isolation levels;
the remote tier's slices (one per remote segment) pickle; bad remote options fail at
planning naming the option."""
from __future__ import annotations

import pickle

import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.spark import parse_read_options
from spark_kafkalog.spark.planning import plan
from tests.kafka.compare import differences, from_spark


def _df(spark, tiered, topics, isolation, **extra):
    reader = (spark.read.format("kafkalog").option("subscribe", ",".join(topics))
              .option("includeHeaders", "true").option("kafka.isolation.level", isolation)
              .option("remoteStorage", tiered.remote))
    for k, v in extra.items():
        reader = reader.option(k, v)
    return reader.load(tiered.logdir)


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
def test_spark_reads_both_tiers_as_the_java_consumer(spark, tiered, isolation):
    ours = from_spark(_df(spark, tiered, tiered.topics, isolation))
    expected = sorted((r for t in tiered.topics for r in tiered.expected(t, isolation)),
                      key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert differences(ours, expected) == []


def test_remote_slices_are_planned_from_the_metadata_and_pickle(tiered):
    opts = parse_read_options({"path": tiered.logdir, "subscribe": "tiered-txn",
                               "kafka.isolation.level": "read_committed",
                               "remoteStorage": tiered.remote})
    slices = plan(LogDirs(tiered.logdir), opts)
    remote = [s for s in slices if s.tier is not None]
    assert remote and len(remote) < len(slices) + 1
    assert [s.start_offset for s in remote if s.partition == 0][0] == 0
    for s in slices:
        assert pickle.loads(pickle.dumps(s)) == s


@pytest.mark.parametrize("options, message", [
    ({"remoteLayout": "{topic}/x"}, "remoteLayout is given without remoteStorage"),
    ({"remoteStorage": "/r", "remoteLayout": "{topic}/{nope}{suffix}"}, "unknown placeholders"),
    ({"remoteStorage": "/r", "remoteLayout": "{topic}/{partition}"}, "needs {suffix}"),
    ({"remoteStorage": "/r", "minPartitions": "4"}, "minPartitions"),
])
def test_bad_remote_options_name_the_option(options, message):
    with pytest.raises(InvalidOptionError, match=message.replace("{", r"\{").replace("}", r"\}")):
        parse_read_options({"path": "/x", "subscribe": "t", **options})

"""The `kafka` tier: Apache Kafka itself (a KRaft broker on 127.0.0.1, its Java clients and
DumpLogSegments) as the oracle of what we read and write.

One broker for the whole session (``kafka_broker``, Apache Kafka 4.3.1), started from the
jars ``make kafka-jars`` fetched; without them every test of the tier fails with a
one-line reason (it never skips). ``broker_topics`` produces the broker-written topics once
(Java producer and librdkafka) and records what Kafka's consumer reads back; the modules
compare our reads with it. A second broker, Apache Kafka 3.9.1 (``kafka39_broker``, its own
jars, ports and dirs), gets the Java producer's topics and a classic consumer group
(``broker39_topics``); tests taking ``written`` run against both. Every test here is marked
``kafka``.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kafka.broker import (KAFKA4, KAFKA39, KAFKA44, Broker, Kafka, KafkaTierError,
                                KafkaTool)
from tests.kafka import topics as topics_mod

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.kafka)


def start_broker(tmp_path_factory, name: str, kafka: Kafka,
                 overrides: dict | None = None) -> Broker:
    try:
        broker = Broker(tmp_path_factory.mktemp(name), kafka=kafka, overrides=overrides)
        broker.start()
    except KafkaTierError as err:
        pytest.fail(f"kafka tier: {err}", pytrace=False)
    return broker


def compile_tool(broker: Broker, tmp_path_factory, name: str) -> KafkaTool:
    try:
        return KafkaTool(broker, tmp_path_factory.mktemp(name))
    except KafkaTierError as err:
        pytest.fail(f"kafka tier: {err}", pytrace=False)


def broker_fixtures(name: str, kafka: Kafka, overrides: dict | None = None):
    """The session fixtures ``<name>_broker`` and ``<name>_tool`` of one Kafka version."""
    @pytest.fixture(scope="session", name=f"{name}_broker")
    def broker_fixture(tmp_path_factory):
        broker = start_broker(tmp_path_factory, f"{name}-broker", kafka, overrides)
        yield broker
        broker.stop()

    @pytest.fixture(scope="session", name=f"{name}_tool")
    def tool_fixture(request, tmp_path_factory):
        broker = request.getfixturevalue(f"{name}_broker")
        return compile_tool(broker, tmp_path_factory, f"{name}-tool")
    return broker_fixture, tool_fixture


kafka_broker, kafka_tool = broker_fixtures("kafka", KAFKA4)
kafka39_broker, kafka39_tool = broker_fixtures("kafka39", KAFKA39)
#: Kafka 4.4.0, the newest release: the restore into a cluster (test_restore_cluster.py),
#: checking retention every second (the restore jobs' warning against the broker's deletes)
kafka44_broker, kafka44_tool = broker_fixtures(
    "kafka44", KAFKA44, {"log.retention.check.interval.ms": "1000"})


@pytest.fixture(scope="session")
def broker_topics(kafka_broker, kafka_tool):
    """The broker-written topics, produced once; what Kafka's consumer reads of them under
    both isolation levels; waits (bounded) until the cleaner compacted the compacted
    topic and the checkpointed high watermarks reached the consumer's end offsets."""
    return topics_mod.produce_all(kafka_broker, kafka_tool)


@pytest.fixture(scope="session")
def broker39_topics(kafka39_broker, kafka39_tool):
    """The Java producer's topics on the 3.9 broker (no librdkafka ones), with the classic
    group ``topics.GROUP39`` committing half way (see ``topics.produce_all``)."""
    return topics_mod.produce_all(kafka39_broker, kafka39_tool, rdkafka=False,
                                  group=topics_mod.GROUP39)


@pytest.fixture(params=(KAFKA4.version, KAFKA39.version))
def written(request):
    """(broker, its broker-written topics) of each Kafka version."""
    if request.param == KAFKA39.version:
        return (request.getfixturevalue("kafka39_broker"),
                request.getfixturevalue("broker39_topics"))
    return request.getfixturevalue("kafka_broker"), request.getfixturevalue("broker_topics")


def wait_for(what: str, predicate, timeout: float = 60.0, step: float = 0.2):
    """Poll ``predicate`` until true (bounded); fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)

"""The `kafka` tier: Apache Kafka itself (a KRaft broker on 127.0.0.1, its Java clients and
DumpLogSegments) as the oracle of what we read and write.

One broker for the whole session (``kafka_broker``), started from the jars ``make
kafka-jars`` fetched; without them every test of the tier fails with a one-line reason
(it never skips). ``broker_topics`` produces the broker-written topics once (Java producer
and librdkafka) and records what Kafka's consumer reads back; the modules compare our
reads with it. Every test here is marked ``kafka``.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kafka.broker import Broker, KafkaTierError, KafkaTool
from tests.kafka import topics as topics_mod

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    try:
        broker = Broker(tmp_path_factory.mktemp("kafka-broker"))
        broker.start()
    except KafkaTierError as err:
        pytest.fail(f"kafka tier: {err}", pytrace=False)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_tool(kafka_broker, tmp_path_factory):
    try:
        return KafkaTool(kafka_broker, tmp_path_factory.mktemp("kafka-tool"))
    except KafkaTierError as err:
        pytest.fail(f"kafka tier: {err}", pytrace=False)


@pytest.fixture(scope="session")
def broker_topics(kafka_broker, kafka_tool):
    """The broker-written topics, produced once; what Kafka's consumer reads of them under
    both isolation levels; waits (bounded) until the cleaner compacted the compacted
    topic and the checkpointed high watermarks reached the consumer's end offsets."""
    return topics_mod.produce_all(kafka_broker, kafka_tool)


def wait_for(what: str, predicate, timeout: float = 60.0, step: float = 0.2):
    """Poll ``predicate`` until true (bounded); fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)

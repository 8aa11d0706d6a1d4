"""``kafkalog schemas`` on a ``_schemas`` topic the broker wrote: the records a schema
registry's KafkaStore produces (its key and value JSON bytes, keys to partition 0 of a
one-partition compacted topic, acks=all, a tombstone as a null value), sent with
librdkafka's producer (confluent-kafka) to a real Kafka 4.4 broker, which writes the log;
the answers must be the registry's as its REST documentation gives them. Then the same
records once Kafka's log cleaner has compacted them (last value per key, tombstones
dropped): a registry reading the compacted topic answers the same, and so must we."""
from __future__ import annotations

import io
import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalog.cli import main
from spark_kafkalog.log import read_table
from tests.kafka.conftest import wait_for
from tests.kafka.topics import checkpoint, wait_compacted
from tests.typed import registry_records as rr

TOPIC = "_schemas"


def produce_history(broker, topic: str, config: dict, *, one_by_one: bool) -> int:
    """Create ``topic`` as KafkaStore creates its topic (one partition, compacted) and
    produce the registry history to it; the records' count once the checkpointed high
    watermark reached them."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", **config})])
    futures[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "linger.ms": 0 if one_by_one else 5, "enable.idempotence": False})
    history = rr.history()
    for key, value in history:
        producer.produce(topic, key=key, value=value, partition=0)
        if one_by_one:               # a batch each (and, with segment.ms=1, a segment)
            assert producer.flush(60) == 0
    assert producer.flush(60) == 0
    wait_for(f"the {topic} high watermark checkpoint",
             lambda: checkpoint(broker.logdir / "replication-offset-checkpoint")
             .get((topic, 0), 0) >= len(history))
    return len(history)


def schemas(logdir, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["schemas", str(logdir), *argv, "--json"], stdout=out, stderr=err)
    return code, (json.loads(out.getvalue()) if code == 0 else json.loads(err.getvalue()))


def test_schemas_topic_written_by_the_broker(kafka44_broker):
    produce_history(kafka44_broker, TOPIC, {}, one_by_one=False)
    check_answers(kafka44_broker.logdir)


def test_schemas_topic_compacted_by_the_broker(kafka44_broker):
    topic = "_schemas_compacted"
    produced = produce_history(kafka44_broker, topic, {
        "segment.ms": "1", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}, one_by_one=True)
    wait_compacted(kafka44_broker, topic)
    kept = read_table(str(kafka44_broker.logdir), topic).num_rows
    assert kept < produced, "the cleaner removed nothing: not a compacted log"
    check_answers(kafka44_broker.logdir, "--topic", topic)


def check_answers(logdir, *topic):
    """The registry's answers for :func:`registry_records.history` (``topic``: the
    ``--topic`` flag, if any)."""
    def ask(*argv):
        return schemas(logdir, *topic, *argv)

    assert ask() == (0, [
        "address-value", "customer-value", "events-value", "orders-copy-value",
        "orders-value", "payments-value", ":.staging:orders-value"])
    code, deleted = ask("subjects", "--deleted")
    assert code == 0 and "gone-value" in deleted and "tmp-value" not in deleted
    assert ask("versions", "orders-value") == (0, [1, 3])
    assert ask("versions", "orders-value", "--deleted") == (0, [1, 2, 3])
    assert ask("get", "orders-value", "latest") == (0, {
        "subject": "orders-value", "version": 3, "id": 5, "schemaType": "AVRO",
        "references": [{"name": "com.acme.Customer", "subject": "customer-value",
                        "version": 1}], "schema": rr.ORDERS_V3})
    assert ask("id", "6") == (0, {"schemaType": "PROTOBUF", "schema": rr.PAYMENT_PROTO})
    assert ask("id", "7") == (0, {"schemaType": "JSON", "schema": rr.EVENT_JSON})
    assert ask("id", "2")[1]["schema"] == rr.ORDERS_V2              # soft-deleted
    assert ask("id", "1", "--subject", ":.staging:")[1]["schema"] == rr.STAGING_ORDERS
    assert ask("get", "orders-value", "2") == (
        1, {"error_code": 40402, "message": "Version 2 not found."})
    assert ask("versions", "tmp-value") == (
        1, {"error_code": 40401, "message": "Subject 'tmp-value' not found."})
    assert ask("id", "8") == (1, {"error_code": 40403, "message": "Schema 8 not found"})
    assert ask("config") == (0, {"compatibilityLevel": "FULL"})
    assert ask("config", "events-value") == (0, {"compatibilityLevel": "NONE"})
    assert ask("mode", "events-value") == (0, {"mode": "READONLY"})

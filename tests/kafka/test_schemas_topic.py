"""``kafkalog schemas`` on a ``_schemas`` topic the broker wrote: the records a schema
registry's KafkaStore produces (its key and value JSON bytes, keys to partition 0 of a
one-partition compacted topic, acks=all, a tombstone as a null value), sent with
librdkafka's producer (confluent-kafka) to a real Kafka 4.4 broker, which writes the log;
the answers must be the registry's as its REST documentation gives them."""
from __future__ import annotations

import io
import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalog.cli import main
from tests.kafka.conftest import wait_for
from tests.kafka.topics import checkpoint
from tests.typed import registry_records as rr

TOPIC = "_schemas"


def schemas(logdir, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["schemas", str(logdir), *argv, "--json"], stdout=out, stderr=err)
    return code, (json.loads(out.getvalue()) if code == 0 else json.loads(err.getvalue()))


def test_schemas_topic_written_by_the_broker(kafka44_broker):
    broker = kafka44_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # as KafkaStore creates it: one partition, compacted
    futures = admin.create_topics([NewTopic(TOPIC, 1, 1,
                                            config={"cleanup.policy": "compact"})])
    futures[TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "linger.ms": 5, "enable.idempotence": False})
    history = rr.history()
    for key, value in history:
        producer.produce(TOPIC, key=key, value=value, partition=0)
    assert producer.flush(60) == 0
    wait_for("the _schemas high watermark checkpoint",
             lambda: checkpoint(broker.logdir / "replication-offset-checkpoint")
             .get((TOPIC, 0), 0) >= len(history))
    logdir = broker.logdir

    assert schemas(logdir) == (0, [
        "address-value", "customer-value", "events-value", "orders-copy-value",
        "orders-value", "payments-value", ":.staging:orders-value"])
    code, deleted = schemas(logdir, "subjects", "--deleted")
    assert code == 0 and "gone-value" in deleted and "tmp-value" not in deleted
    assert schemas(logdir, "versions", "orders-value") == (0, [1, 3])
    assert schemas(logdir, "versions", "orders-value", "--deleted") == (0, [1, 2, 3])
    assert schemas(logdir, "get", "orders-value", "latest") == (0, {
        "subject": "orders-value", "version": 3, "id": 5, "schemaType": "AVRO",
        "references": [{"name": "com.acme.Customer", "subject": "customer-value",
                        "version": 1}], "schema": rr.ORDERS_V3})
    assert schemas(logdir, "id", "6") == (0, {"schemaType": "PROTOBUF",
                                             "schema": rr.PAYMENT_PROTO})
    assert schemas(logdir, "id", "7") == (0, {"schemaType": "JSON", "schema": rr.EVENT_JSON})
    assert schemas(logdir, "id", "2")[1]["schema"] == rr.ORDERS_V2     # soft-deleted
    assert schemas(logdir, "id", "1", "--subject", ":.staging:")[1]["schema"] == \
        rr.STAGING_ORDERS
    assert schemas(logdir, "get", "orders-value", "2") == (
        1, {"error_code": 40402, "message": "Version 2 not found."})
    assert schemas(logdir, "versions", "tmp-value") == (
        1, {"error_code": 40401, "message": "Subject 'tmp-value' not found."})
    assert schemas(logdir, "id", "8") == (1, {"error_code": 40403,
                                             "message": "Schema 8 not found"})
    assert schemas(logdir, "config") == (0, {"compatibilityLevel": "FULL"})
    assert schemas(logdir, "config", "events-value") == (0, {"compatibilityLevel": "NONE"})
    assert schemas(logdir, "mode", "events-value") == (0, {"mode": "READONLY"})

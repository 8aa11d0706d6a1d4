"""Spark's own Kafka connector side by side with ours: ``spark.read.format("kafka")`` from
the broker and ``spark.read.format("kafkalog")`` from the same broker's log dir give equal
DataFrames (schema, rows, order within each partition, headers), under both isolation
levels, in one Spark session that has the connector's jars (a subprocess: see
``spark_side_by_side.py``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.kafka.broker import REPO, unb64
from tests.kafka.compare import differences


def _records(rows):
    return [{**r, "key": unb64(r["key"]), "value": unb64(r["value"]),
             "headers": None if r["headers"] is None
             else [(k, unb64(v)) for k, v in r["headers"]]} for r in rows]


def _partition_order_ok(rows) -> bool:
    last = {}
    for r in rows:
        tp = (r["topic"], r["partition"])
        if r["offset"] <= last.get(tp, -1):
            return False
        last[tp] = r["offset"]
    return True


def test_kafka_source_and_kafkalog_give_equal_dataframes(kafka_broker, broker_topics,
                                                         tmp_path):
    out = tmp_path / "side.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run(
        [sys.executable, "-m", "tests.kafka.spark_side_by_side", kafka_broker.bootstrap,
         str(kafka_broker.logdir), ",".join(broker_topics.topics), str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(out.read_text())
    for isolation, got in result.items():
        assert json.loads(got["ours_schema"]) == json.loads(got["kafka_schema"]), isolation
        kafka, ours = _records(got["kafka"]), _records(got["ours"])
        assert _partition_order_ok(kafka) and _partition_order_ok(ours), isolation
        key = lambda r: (r["topic"], r["partition"], r["offset"])  # noqa: E731
        assert differences(sorted(ours, key=key), sorted(kafka, key=key)) == [], isolation
        # and both equal what Kafka's Java consumer read
        java = sorted(broker_topics.by_isolation[isolation], key=key)
        assert differences(sorted(ours, key=key), java) == [], isolation

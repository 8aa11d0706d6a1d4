"""Spark's own Kafka source and ``format("kafkalog")`` on the same broker, in one Spark
session that has Spark's connector on its class path (``spark.jars``: the jars ``make
kafka-jars`` put in ``.cache/spark-kafka-jars``). The test suite's shared session cannot
take jars after it started, so ``test_spark_connector.py`` runs this as a subprocess:

    python -m tests.kafka.spark_side_by_side BOOTSTRAP LOGDIR TOPIC[,TOPIC...] OUT.json [OPTS]

(OPTS: a JSON object of more ``kafkalog`` options, e.g. ``{"remoteStorage": "/r"}``.)

OUT.json gets the two schemas, both reads' rows (in the compare module's form, bytes as
base64) in the order each DataFrame returned them, and the isolation level used.
"""
from __future__ import annotations

import json
import sys

from tests.kafka.broker import SPARK_KAFKA_JARS, b64


def session(app: str, extra: dict | None = None):
    from pyspark.sql import SparkSession

    from tests.conftest import spark_env, spark_test_conf
    spark_env()
    jars = sorted(str(j) for j in SPARK_KAFKA_JARS.glob("*.jar"))
    if not jars:
        raise SystemExit(f"Spark's Kafka connector is not in {SPARK_KAFKA_JARS}: run "
                         "`make kafka-jars`")
    builder = SparkSession.builder.master("local[2]").appName(app) \
        .config("spark.jars", ",".join(jars))
    for key, value in {**spark_test_conf(), **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows(df) -> list[dict]:
    """``df``'s rows in the order it returns them; timestamps as epoch ms."""
    out = []
    for r in df.selectExpr("*", "unix_millis(timestamp) AS ts_ms").collect():
        d = r.asDict(recursive=True)
        out.append({
            "topic": d["topic"], "partition": d["partition"], "offset": d["offset"],
            "key": b64(None if d["key"] is None else bytes(d["key"])),
            "value": b64(None if d["value"] is None else bytes(d["value"])),
            "timestamp": d["ts_ms"], "timestampType": d["timestampType"],
            "headers": None if d["headers"] is None else
            [[h["key"], b64(None if h["value"] is None else bytes(h["value"]))]
             for h in d["headers"]],
        })
    return out


def main(argv: list[str]) -> int:
    bootstrap, logdir, topics, out = argv[:4]
    extra = json.loads(argv[4]) if len(argv) > 4 else {}
    spark = session("kafka-side-by-side")
    result = {}
    for isolation in ("read_uncommitted", "read_committed"):
        kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topics).option("startingOffsets", "earliest")
                 .option("endingOffsets", "latest").option("includeHeaders", "true")
                 .option("kafka.isolation.level", isolation).load())
        ours = (spark.read.format("kafkalog").option("path", logdir)
                .option("subscribe", topics).option("includeHeaders", "true")
                .option("kafka.isolation.level", isolation).options(**extra).load())
        result[isolation] = {
            "kafka_schema": kafka.schema.json(), "ours_schema": ours.schema.json(),
            "kafka": rows(kafka), "ours": rows(ours),
        }
    with open(out, "w") as fh:
        json.dump(result, fh)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

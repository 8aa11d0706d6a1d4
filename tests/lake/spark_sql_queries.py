"""Spark SQL queries over Iceberg tables, run by tests/lake/test_spark_sql_reads_table.py
under pyspark 4.1 (the Makefile's ``spark41-venv``: Apache Iceberg's Spark runtime exists for
Spark up to 4.1 only), NOT under the project's venv: it imports nothing of ours.

    python spark_sql_queries.py REQUEST.json

REQUEST: ``{"jars": [...], "conf": {"spark.sql.catalog.kafkalog": ..., ...},
"queries": {"name": "SELECT ...", ...}}``. One local Spark session runs every query in
turn and prints one JSON object ``{"name": {"rows": [...]} or {"error": "..."}}``: each
row a JSON object of its columns, binary as hex, timestamps as microseconds since the epoch
(UTC), structs as objects, maps as objects (the caller sets ``TZ=UTC``: pyspark turns a
timestamp into a naive datetime in the Python process's zone)."""
from __future__ import annotations

import calendar
import datetime
import json
import sys


def plain(v):
    """A value of a collected Row as JSON can hold it."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return calendar.timegm(v.timetuple()) * 1_000_000 + v.microsecond
    if isinstance(v, datetime.date):
        return v.isoformat()
    return v


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        request = json.load(f)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("iceberg-spark-sql")
               .config("spark.jars", ",".join(request["jars"]))
               .config("spark.ui.enabled", "false")
               # a short-lived JVM: C1 only and one GC thread start faster on 2 cores
               .config("spark.driver.extraJavaOptions",
                       "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.session.timeZone", "UTC"))
    for k, v in request["conf"].items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out = {}
    try:
        for name, sql in request["queries"].items():
            try:
                out[name] = {"rows": [plain(r) for r in spark.sql(sql).collect()]}
            except Exception as err:   # reported to the test, which decides
                java = getattr(err, "java_exception", None)   # a Py4JJavaError's cause
                out[name] = {"error": java.toString() if java is not None else
                             f"{type(err).__name__}: {err}".splitlines()[0]}
    finally:
        spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

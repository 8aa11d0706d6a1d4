"""Top-level shim that makes ``writeStream.format("kafkalog_iceberg")`` work with no register
call: pyspark's data source lookup imports every top-level ``pyspark_*`` module and
registers its ``DefaultSource`` (see ``pyspark_kafkalog.py``). Tiny on purpose: pyiceberg
is imported only when a query uses the sink.
"""
from spark_kafkalog.spark.iceberg_sink import IcebergSink as DefaultSource

__all__ = ["DefaultSource"]

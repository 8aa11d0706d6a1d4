"""Top-level shim that makes ``spark.read.format("kafkalog")`` work with no register call.

pyspark (4.0+) looks up Python data sources by importing every top-level module whose name
starts with ``pyspark_`` and registering its ``DefaultSource`` under
``DefaultSource.name()`` (``pyspark.sql.worker.lookup_data_sources``). Keep this module
tiny: it is imported by that lookup in every Spark session of the environment.
"""
from spark_kafkalog.spark.datasource import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]

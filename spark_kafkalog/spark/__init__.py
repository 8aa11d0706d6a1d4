"""The ``kafkalog`` Spark data source (orchestration only: bytes are parsed by ``format``
through ``log``).

- :mod:`.options`    every option, parsed in one place (read and write)
- :mod:`.datasource` ``KafkaLogDataSource`` (``DefaultSource`` of ``pyspark_kafkalog``)
- :mod:`.planning`   input partitions (``LogSlice``) from the log's metadata
- :mod:`.filters`    filter pushdown
- :mod:`.reader`     the batch reader
"""
from spark_kafkalog.spark.datasource import KafkaLogDataSource
from spark_kafkalog.spark.options import (
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)

__all__ = ["KafkaLogDataSource", "ReadOptions", "WriteOptions", "parse_read_options",
           "parse_write_options"]

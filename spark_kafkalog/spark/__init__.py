"""The ``kafkalog`` Spark data source (orchestration only: bytes are parsed by ``format``
through ``log``).

- :mod:`.options`    every read/stream option, parsed in one place
- :mod:`.write_options` every write option, parsed in one place
- :mod:`.option_values` the value parsers both use (booleans, sizes, durations, paths)
- :mod:`.datasource` ``KafkaLogDataSource`` (``DefaultSource`` of ``pyspark_kafkalog``)
- :mod:`.planning`   input partitions (``LogSlice``) from the log's metadata
- :mod:`.offset_ranges` starting/ending options -> each partition's offset range
- :mod:`.filters`    filter pushdown
- :mod:`.reader`     the batch reader
"""
from spark_kafkalog.spark.datasource import KafkaLogDataSource
from spark_kafkalog.spark.options import ReadOptions, parse_read_options
from spark_kafkalog.spark.write_options import WriteOptions, parse_write_options

__all__ = ["KafkaLogDataSource", "ReadOptions", "WriteOptions", "parse_read_options",
           "parse_write_options"]

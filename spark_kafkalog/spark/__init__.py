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
- :mod:`.iceberg_sink` ``kafkalog_iceberg``, the streaming sink into Iceberg tables
  (``DefaultSource`` of ``pyspark_kafkalog_iceberg``; over ``spark_kafkalog.lake``)
"""
from __future__ import annotations

import importlib

# Imported on first use: a job that only parses options before Spark starts does not
# pay for importing pyspark (about half a second).
_EXPORTS = {"KafkaLogDataSource": "datasource", "ReadOptions": "options",
            "parse_read_options": "options", "WriteOptions": "write_options",
            "parse_write_options": "write_options"}

__all__ = ["KafkaLogDataSource", "ReadOptions", "WriteOptions", "parse_read_options",
           "parse_write_options"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

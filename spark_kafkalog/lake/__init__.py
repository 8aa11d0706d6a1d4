"""Sinks beside the data source: a log dir's topics landed in lakehouse tables, with the
offsets each commit holds kept in the table itself (no checkpoint of our own).

``iceberg_table`` knows the Iceberg side (catalog, schema, partition spec, the snapshot
summary keys, the table's mode, the data-file writer); ``iceberg_typed`` the typed value
columns and the schema evolving with the subject's; ``iceberg_json`` JSON values parsed
into columns by a given schema; ``iceberg_upsert`` the upsert mode (latest value per key,
copy-on-write); ``iceberg`` is the exporter that reads the log (``log.read_table``) in
bounded windows and commits once per run. The streaming twin is a Spark sink,
``spark.iceberg_sink`` (``writeStream.format("kafkalog_iceberg")``), which writes with the
same shaper and commits through the same ``iceberg._commit``. Imports: ``lake -> log ->
format`` (and ``spark.iceberg_sink -> lake``); pyiceberg is imported here only (the
``iceberg`` extra), never by the reader.
"""
from spark_kafkalog.lake.iceberg import ExportResult, export_topics
from spark_kafkalog.lake.iceberg_json import JsonValueRecords
from spark_kafkalog.lake.iceberg_table import (
    MODE_KEY,
    NEXT_OFFSETS_KEY,
    OFFSETS_KEY,
    RUN_ID_KEY,
    RawRecords,
    committed_offsets,
    open_catalog,
    open_table,
)
from spark_kafkalog.lake.iceberg_typed import TypedRecords, typed_records

__all__ = ["ExportResult", "export_topics", "MODE_KEY", "NEXT_OFFSETS_KEY", "OFFSETS_KEY",
           "RUN_ID_KEY", "JsonValueRecords", "RawRecords", "TypedRecords",
           "committed_offsets", "open_catalog", "open_table", "typed_records"]

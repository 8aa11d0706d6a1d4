"""The ``kafkalog`` data source: ``spark.read.format("kafkalog")`` and
``df.write.format("kafkalog")``.

Found with no ``spark.dataSource.register`` call: pyspark's data source lookup imports every
top-level module whose name starts with ``pyspark_`` and registers its ``DefaultSource``
(``pyspark/sql/worker/lookup_data_sources.py``); ``pyspark_kafkalog.py`` is that module.
The lookup walks ``sys.path`` with ``pkgutil.iter_modules``, so the module must sit in a
``sys.path`` directory: a regular install puts it in site-packages; an editable install
must use a path entry (setuptools' import-hook finder is invisible to ``iter_modules``).

Known pyspark 4.3.0 limitation: the read plan made while pushing filters is cached on the
DataFrame's data source object and reused by later scans of the *same* DataFrame object
(``PythonDataSourceV2.setReadInfo``), so after ``df.filter(...).count()`` a plain
``df.count()`` reads only the filtered slices. Load the DataFrame again for each query
with different filters (or read with option ``pushFilters=false``, see
:func:`pushdown_enabled`). Upstream Spark scopes the plan to the scan; ``tests/spark/test_read.py`` holds a strict xfail that
will flag the fixed version.
"""
from __future__ import annotations

import sys

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError
from spark_kafkalog.spark.options import ReadOptions, parse_read_options
from spark_kafkalog.spark.typed_read import plan_typed, typed_spark_schema

_HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
_BASE = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
#: Spark's Kafka source schema (format.schema.SPARK_DDL / SPARK_DDL_WITH_HEADERS).
SCHEMA = StructType(_BASE)
SCHEMA_WITH_HEADERS = StructType(_BASE + [StructField("headers", ArrayType(_HEADER))])


def spark_schema(include_headers: bool) -> StructType:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def _session_pushdown() -> bool | None:
    """``spark.sql.python.filterPushdown.enabled`` of the active session in this process,
    None when there is none (Spark's planner workers, where ``reader()`` usually runs,
    have no session)."""
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is None:
            return None
        value = session.conf.get(PUSHDOWN_CONF, None)
    except Exception:            # no JVM behind this process, or a session shutting down
        return None
    return None if value is None else str(value).strip().lower() == "true"


def _planner_pushdown() -> bool | None:
    """The flag Spark's read-planner worker holds when it calls ``reader()``, None when
    ``reader()`` is not called from there.

    That worker (``pyspark/sql/worker/plan_data_source_read.py``) receives
    ``spark.sql.python.filterPushdown.enabled`` from the JVM into its local
    ``enable_pushdown`` and refuses a reader implementing ``pushFilters`` when it is false;
    no API hands the flag to the data source, so this reads that caller's frame (if a
    Spark release renames it, ``test_reading_works_with_pushdown_disabled`` fails)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.endswith("plan_data_source_read.py") and \
                "enable_pushdown" in frame.f_locals:
            return bool(frame.f_locals["enable_pushdown"])
        frame = frame.f_back
    return None


def pushdown_enabled(opts: ReadOptions) -> bool:
    """Whether the batch reader offers filter pushdown (``pushFilters``).

    Spark refuses a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false (DATA_SOURCE_PUSHDOWN_DISABLED).
    In order: the ``pushFilters`` read option when given; the flag Spark's read-planner
    worker holds (:func:`_planner_pushdown`); the conf of this process's active session;
    else on (Spark's pushdown worker, which calls ``reader()`` only when the conf is on)."""
    if opts.push_filters is not None:
        return opts.push_filters
    for signal in (_planner_pushdown, _session_pushdown):
        value = signal()
        if value is not None:
            return value
    return True


def _in_stream_runner() -> bool:
    """True in pyspark's streaming source runner (the worker that calls
    ``streamReader``), which mishandles an exception from it."""
    main = sys.modules.get("__main__")
    return "python_streaming_source_runner" in (getattr(main, "__file__", "") or "") or \
        "pyspark.sql.streaming.python_streaming_source_runner" in sys.modules


class KafkaLogDataSource(DataSource):
    """Reads (and, through :mod:`.writer`, appends to) Kafka log directories.

    ``self.options`` are the user's options with lower-cased keys; they are validated by
    :func:`parse_read_options` / ``parse_write_options`` when a reader or writer is made,
    and by ``schema()`` so a bad read option fails when the DataFrame is defined.
    """

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> StructType:
        # called for read and readStream alike: only the rules of both modes apply here
        opts = parse_read_options(self.options, streaming=None)
        return typed_spark_schema(spark_schema(opts.include_headers), self._typed(opts))

    def _typed(self, opts: ReadOptions):
        """The typed read (valueFormat/keyFormat), planned once: ``schema()`` plans it and
        Spark pickles this object, plan included, to the workers that call ``reader()``
        and ``streamReader()``; None for binary columns."""
        if opts.typed is None:
            return None
        planned = getattr(self, "_typed_plan", None)
        if planned is None or planned[0] != opts.typed:
            from spark_kafkalog.spark.reader import open_logdirs
            planned = (opts.typed, plan_typed(opts, open_logdirs(opts)))
            self._typed_plan = planned
        return planned[1]

    def reader(self, schema: StructType):
        from spark_kafkalog.spark.reader import KafkaLogPushdownReader, KafkaLogReader

        opts = parse_read_options(self.options)
        typed = self._typed(opts)
        expected = typed_spark_schema(spark_schema(opts.include_headers), typed)
        if schema is not None and schema != expected:
            raise InvalidOptionError(
                f"schema: the kafkalog source has a fixed schema (Spark's Kafka source "
                f"schema) and cannot be read with a custom one; expected "
                f"{expected.simpleString()}, got {schema.simpleString()}")
        if pushdown_enabled(opts):
            return KafkaLogPushdownReader(opts, typed)
        return KafkaLogReader(opts, typed)

    def streamReader(self, schema: StructType):
        from spark_kafkalog.spark.stream_reader import FailedStreamReader, make_stream_reader
        try:
            return make_stream_reader(
                self.options, schema,
                lambda opts: typed_spark_schema(spark_schema(opts.include_headers),
                                                self._typed(opts)),
                typed=self._typed)
        except KafkaLogError as err:
            if _in_stream_runner():
                # pyspark's stream runner hides an error raised here behind its own
                # UnboundLocalError ('reader'): hand it over at the query's first call
                return FailedStreamReader(err)
            raise

    def writer(self, schema, overwrite: bool):
        from spark_kafkalog.spark.writer import make_batch_writer
        return make_batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from spark_kafkalog.spark.writer import make_stream_writer
        return make_stream_writer(self.options, schema, overwrite)

"""Typed ``value`` / ``key`` for the Spark reads: planning on the driver, the Spark schema,
and the Arrow types the batches are cast to so they match Spark's Arrow schema exactly.

:func:`plan_typed` reads the registry once (``DataSource.schema()``, before Spark asks for
a reader; the result rides on the pickled data source object to ``reader()`` /
``streamReader()``), picks each column's reader schema, collects the writer schemas and
builds the decoder once, so an unresolvable writer schema fails the query before any task
runs. What travels to executors is the :class:`~spark_kafkalog.typed.columns.TypedRead`:
schema texts and Arrow types, no registry, no credentials.
"""
from __future__ import annotations

from dataclasses import replace

from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.spark.options import Assign, ReadOptions, Subscribe
from spark_kafkalog.typed.columns import TypedRead, decoder_of

__all__ = ["plan_typed", "typed_spark_schema", "read_topics"]


def read_topics(opts: ReadOptions, logdirs) -> list[str]:
    """The topics a read names (a pattern matched against the log dirs' topics now)."""
    s = opts.strategy
    if isinstance(s, Subscribe):
        return list(s.topics)
    if isinstance(s, Assign):
        return sorted({t for t, _ in s.partitions})
    return [t for t in logdirs.topics() if s.matches(t)]


def _spark_type(arrow_type):
    from pyspark.sql.pandas.types import from_arrow_type
    return from_arrow_type(arrow_type)


def _exact_arrow(spark_type):
    from pyspark.sql.pandas.types import to_arrow_type
    return to_arrow_type(spark_type, timezone="UTC")


def plan_typed(opts: ReadOptions, logdirs=None) -> TypedRead | None:
    """The typed read of ``opts`` (None when both columns are binary), planned now."""
    typed = opts.typed
    if typed is None:
        return None
    from spark_kafkalog.log.read.typed_plan import open_schema_source, plan_typed_read
    from spark_kafkalog.spark.reader import open_logdirs

    logdirs = logdirs if logdirs is not None else open_logdirs(opts)
    source = None
    if typed.needs_registry or typed.registry_url or typed.registry_topic or any(
            c.framing == "confluent" for c in typed.columns):
        source = open_schema_source(logdirs, registry_topic=typed.registry_topic,
                                    registry_url=typed.registry_url,
                                    registry_auth=typed.registry_auth,
                                    remote_storage=opts.remote_storage,
                                    remote_layout=opts.remote_layout)
    topics = read_topics(opts, logdirs)
    if not topics:
        raise InvalidOptionError("subscribePattern: no topic of the log dirs matches, so no "
                                 "schema to type valueFormat/keyFormat with")
    read = plan_typed_read(source, topics, typed.columns, typed.on_decode_error)
    exact = []
    for spec in read.specs:
        spark_type = _spark_type(decoder_of(spec).arrow_type)
        exact.append((spec.column, _exact_arrow(spark_type)))
    return replace(read, arrow_types=tuple(exact))


def typed_spark_schema(base: StructType, read: TypedRead | None) -> StructType:
    """``base`` (the Kafka source schema) with the typed columns as structs, then the
    ``*_error`` and ``*_raw`` columns, as :func:`~spark_kafkalog.typed.columns.typed_schema`
    lays out the batches."""
    if read is None:
        return base
    from pyspark.sql.pandas.types import from_arrow_type

    types = dict(read.arrow_types)
    fields = []
    for f in base.fields:
        if read.spec(f.name) is not None:
            fields.append(StructField(f.name, from_arrow_type(types[f.name]), True))
        else:
            fields.append(f)
    if read.on_error == "null":
        fields += [StructField(f"{c}_error", StringType(), True) for c in ("value", "key")
                   if read.spec(c) is not None]
    fields += [StructField(f"{c}_raw", BinaryType(), True) for c in ("value", "key")
               if read.spec(c) is not None and read.spec(c).keep_raw]
    return StructType(fields)

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

import logging
from dataclasses import replace

from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.spark.options import Assign, ReadOptions, Subscribe
from spark_kafkalog.typed.columns import TypedRead, decoder_of

__all__ = ["plan_typed", "refresh_typed", "typed_spark_schema", "read_topics",
           "spark_arrow_type"]

log = logging.getLogger(__name__)


def read_topics(opts: ReadOptions, logdirs) -> list[str]:
    """The topics a read names (a pattern matched against the log dirs' topics now)."""
    s = opts.strategy
    if isinstance(s, Subscribe):
        return list(s.topics)
    if isinstance(s, Assign):
        return sorted({t for t, _ in s.partitions})
    from spark_kafkalog.log.model import is_internal_topic
    # as the planner lists them (spark/planning.py): internal topics never match
    return [t for t in logdirs.topics() if not is_internal_topic(t) and s.matches(t)]


def _spark_type(arrow_type):
    from pyspark.sql.pandas.types import from_arrow_type
    return from_arrow_type(arrow_type)


def spark_arrow_type(spark_type):
    """The Arrow type Spark gives (and takes) for ``spark_type``: timestamps in UTC."""
    from pyspark.sql.pandas.types import to_arrow_type
    return to_arrow_type(spark_type, timezone="UTC")


def _source(opts: ReadOptions, logdirs):
    from spark_kafkalog.log.read.typed_plan import open_schema_source

    typed = opts.typed
    if typed.needs_registry or typed.registry_url or typed.registry_topic or any(
            c.framing == "confluent" for c in typed.columns):
        return open_schema_source(logdirs, registry_topic=typed.registry_topic,
                                  registry_url=typed.registry_url,
                                  registry_auth=typed.registry_auth,
                                  remote_storage=opts.remote_storage,
                                  remote_layout=opts.remote_layout)
    return None


def plan_typed(opts: ReadOptions, logdirs) -> TypedRead | None:
    """The typed read of ``opts`` (None when both columns are binary), planned now on
    ``logdirs`` (a ``LogDirs`` of ``opts.paths``)."""
    typed = opts.typed
    if typed is None:
        return None
    from spark_kafkalog.log.read.typed_plan import plan_typed_read
    source = _source(opts, logdirs)
    topics = read_topics(opts, logdirs)
    if not topics:
        raise InvalidOptionError("subscribePattern: no topic of the log dirs matches, so no "
                                 "schema to type valueFormat/keyFormat with")
    read = plan_typed_read(source, topics, typed.columns, typed.on_decode_error)
    exact = []
    for spec in read.specs:
        spark_type = _spark_type(decoder_of(spec).arrow_type)
        exact.append((spec.column, spark_arrow_type(spark_type)))
    return replace(read, arrow_types=tuple(exact))


def refresh_typed(opts: ReadOptions, planned: TypedRead, logdirs) -> TypedRead:
    """``planned`` (a stream's, fixed when the query started) with the writer schemas
    registered since added: the reader schemas and the Spark schema stay the query's, and
    a new writer that cannot resolve to them raises SchemaResolutionError on the driver,
    before the micro-batch's tasks. The registry is read again (its topic, or its URL).
    A schema lookup that fails now (a subject deleted since) keeps the planned writers."""
    from spark_kafkalog.log.read.typed_plan import with_writers_now

    try:
        return with_writers_now(planned, _source(opts, logdirs), read_topics(opts, logdirs),
                                opts.typed.columns)
    except InvalidOptionError as err:
        log.warning("typed read: the registry's schemas could not be read again (%s); "
                    "decoding with the writer schemas known so far", err)
        return planned


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

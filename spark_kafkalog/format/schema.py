"""The Arrow schema rows come out in: Spark's own Kafka source schema.

Types match what Spark's Arrow conversion expects exactly (Spark 4.2+ rejects anything
else): ``binary``/``string`` (not the large variants), ``int32``, ``timestamp[us, UTC]``
and a list whose item field is named ``element``.
"""
from __future__ import annotations

import pyarrow as pa

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field("headers", HEADERS_TYPE)

SCHEMA = pa.schema(_BASE_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema(_BASE_FIELDS + [HEADERS_FIELD])

#: the Spark DDL of the same schema
SPARK_DDL = ("key binary, value binary, topic string, partition int, offset long, "
             "timestamp timestamp, timestampType int")
SPARK_DDL_WITH_HEADERS = SPARK_DDL + ", headers array<struct<key:string,value:binary>>"


def record_schema(include_headers: bool) -> pa.Schema:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


#: columns of the batch-header table ``scan_headers`` returns (one row per batch)
BATCH_HEADER_SCHEMA = pa.schema([
    pa.field("position", pa.int64()),          # byte position of the batch start
    pa.field("size", pa.int32()),              # whole batch size incl. LOG_OVERHEAD
    pa.field("magic", pa.int8()),
    pa.field("attributes", pa.int16()),        # v2 attributes; legacy attributes byte
    pa.field("codec", pa.int8()),
    pa.field("base_offset", pa.int64()),       # see scan_headers on legacy wrappers
    pa.field("last_offset", pa.int64()),
    pa.field("first_timestamp", pa.int64()),   # -1 = none
    pa.field("max_timestamp", pa.int64()),     # -1 = none
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int16()),
    pa.field("base_sequence", pa.int32()),
    pa.field("record_count", pa.int32()),      # -1 when unknown (legacy wrapper)
    pa.field("partition_leader_epoch", pa.int32()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("is_control", pa.bool_()),
    pa.field("crc", pa.uint32()),
    pa.field("control_type", pa.int16()),      # control batches: first record's type
                                               # (0 ABORT, 1 COMMIT, ...); else -1
])

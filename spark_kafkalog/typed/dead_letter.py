"""Dead-letter records: a record whose typed value or key did not decode, kept raw and whole.

A dead-letter row is the record as Spark's Kafka source reads it (topic, partition,
offset, timestamp, timestampType, key and value as bytes, headers) and, for each of
``value`` / ``key``, why it did not decode: the error text, the schema id its framing
named (null: no framing, or the column decoded) and the byte of the value where decoding
stopped (null where the decoder knows none: JSON Schema). The schema is the same whatever
the read's columns, so the files of many reads can be read as one table. Arrow only: the
files are written by ``log/read/dead_letter.py``.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["DEAD_LETTER_SCHEMA", "RECORD_COLUMNS", "dead_letter_rows"]

_HEADERS = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                   pa.field("value", pa.binary())])))

#: the record's own columns, as Spark's Kafka source has them (headers always)
RECORD_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType", "key", "value",
                  "headers")

DEAD_LETTER_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", _HEADERS),
    pa.field("value_error", pa.string()),
    pa.field("value_schema_id", pa.int64()),
    pa.field("value_error_position", pa.int64()),
    pa.field("key_error", pa.string()),
    pa.field("key_schema_id", pa.int64()),
    pa.field("key_error_position", pa.int64()),
])


def dead_letter_rows(raw: pa.RecordBatch, bad: pa.Array, details: dict) -> pa.RecordBatch:
    """The rows of ``raw`` (a batch in Spark's Kafka schema with headers, values still
    bytes) where ``bad`` is true, as :data:`DEAD_LETTER_SCHEMA`. ``details``: column ->
    ``(errors, schema ids, positions)``, each an array of ``raw``'s rows or None (the
    column is binary, or none of its rows failed)."""
    picked = raw.filter(bad)
    n = picked.num_rows
    columns = []
    for name in RECORD_COLUMNS:
        f = DEAD_LETTER_SCHEMA.field(name)
        col = picked.column(name) if name in picked.schema.names else pa.nulls(n, f.type)
        columns.append(col if col.type == f.type else col.cast(f.type))
    for column in ("value", "key"):
        parts = details.get(column) or (None, None, None)
        for part, name in zip(parts, ("error", "schema_id", "error_position")):
            f = DEAD_LETTER_SCHEMA.field(f"{column}_{name}")
            if part is None:
                columns.append(pa.nulls(n, f.type))
                continue
            part = pc.filter(part, bad)
            columns.append(part if part.type == f.type else part.cast(f.type))
    return pa.RecordBatch.from_arrays(columns, schema=DEAD_LETTER_SCHEMA)

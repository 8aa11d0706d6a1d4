"""JSON values parsed into columns of an Iceberg table by a schema the user gives
(export_iceberg's ``--value-schema``, a Spark DDL string the job turns into Arrow), as
export_parquet's ``from_json`` does in Spark: one top-level column per field, beside the
Kafka columns (the raw ``value`` kept).

:class:`JsonValueRecords` stands in for :class:`~.iceberg_table.RawRecords`. Values are
parsed with Arrow's C++ JSON reader through the JSON Schema decoder's machinery
(``typed.jsonschema``: one line per value, bad values found by bisection, no Python
object per record); like ``from_json`` in PERMISSIVE mode, a value that is not JSON of
the schema (and a tombstone) gives nulls in every field column, and fields are matched
by name (JSON properties the schema does not name are ignored). Every field column is
optional. A table created with fewer fields takes the new ones (added, the rows before
read them as null) as typed tables do (``TypedRecords.adopt``); a field whose type
changed to no promotion Iceberg allows is refused before anything is written.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import TableError
from spark_kafkalog.lake.iceberg_table import RawRecords
from spark_kafkalog.lake.iceberg_typed import TypedRecords, _headers_empty, _optional, laid_out
from spark_kafkalog.typed.jsonschema import _TS_NS, JsonSchemaDecoder, _read_type

__all__ = ["JsonValueRecords"]


class _SchemaDecoder(JsonSchemaDecoder):
    """The JSON Schema decoder with its Arrow type given directly (no JSON Schema text,
    no registry framing)."""

    def __init__(self, arrow_type: pa.DataType):
        self._args = (arrow_type,)
        self.arrow_type = arrow_type
        self._ids = np.array([], dtype=np.int64)
        self._read = pa.schema([pa.field("v", _read_type(arrow_type))])
        self._ns = _read_type(arrow_type, ts=_TS_NS, date=pa.date32())

    def __reduce__(self):
        return (_SchemaDecoder, self._args)


class JsonValueRecords(TypedRecords):
    """Records whose JSON ``value`` is parsed into the columns of ``value_schema`` (an
    Arrow schema; its field names must not be Kafka's columns). ``mode``: the table's
    (append or upsert)."""

    SOURCE = "--value-schema"

    def __init__(self, value_schema: pa.Schema, mode: str = "append"):
        from pyiceberg.catalog import Catalog
        from pyiceberg.schema import Schema, assign_fresh_schema_ids
        from pyiceberg.types import NestedField

        clash = sorted(set(value_schema.names) & set(self.COLUMNS))
        if clash:
            raise TableError(f"--value-schema fields {clash} clash with the Kafka columns; "
                             "rename them in the schema")
        if not value_schema.names:
            raise TableError("--value-schema names no field")
        base = RawRecords(mode)
        self.mode = mode
        self.identifier_columns = base.identifier_columns
        self.read = None
        self.typed = ()
        self.extra = tuple(value_schema.names)
        self.value_schema = value_schema
        self.decoder = _SchemaDecoder(pa.struct(list(value_schema)))
        converted = Catalog._convert_schema_if_needed(
            pa.schema([f.with_nullable(True) for f in value_schema]))
        fields = list(base.schema.fields) + [
            NestedField(-1, f.name, _optional(f.field_type), required=False)
            for f in converted.fields]
        self.schema = assign_fresh_schema_ids(Schema(
            *fields, identifier_field_ids=base.schema.identifier_field_ids))
        self.arrow_schema = None

    def to_arrow(self, window: pa.Table) -> pa.Table:
        """``window`` (Spark's Kafka schema) with the JSON value's fields as columns, in
        the table's Arrow schema."""
        if self.arrow_schema is None:
            raise TableError("JsonValueRecords.to_arrow before adopt(table)")
        raw = window.select(list(self.COLUMNS))
        raw = raw.set_column(raw.schema.get_field_index("headers"), "headers",
                             _headers_empty(raw.column("headers")))
        parsed = self.decoder.decode(raw.column("value"), framing="none",
                                     on_error="null").array
        # flatten, not field(i): a null struct (a tombstone, a bad value) nulls each field
        for f, column in zip(self.value_schema, parsed.flatten()):
            raw = raw.append_column(f.name, column)
        return laid_out(raw, self.arrow_schema)

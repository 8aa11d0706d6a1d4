"""Typed values in an Iceberg table: the ``value`` (and ``key``) column as the struct the
subject's schema decodes to (issue 39 item 1, over the typed-records read of issue 38),
and the table's schema evolving when the subject's does.

:class:`TypedColumns` stands in for :class:`~.iceberg_table.RawRecords` when the rows
arrive typed (the streaming sink: a Spark read with ``valueFormat``, its struct as Arrow);
:class:`TypedRecords`, the batch job's, decodes raw windows first. Their Iceberg schema is
Spark's Kafka columns with each typed column's type converted from Arrow by one rule
(:func:`iceberg_type`: every nested field optional, since a tombstone or a record that
does not decode is a null struct and a field added later is null in the rows before it)
and, under ``onDecodeError=null``, ``value_error`` / ``key_error`` text.

Evolution (:meth:`TypedColumns.adopt`): a table created from an earlier version of the
subject takes the latest one's new fields (nested ones too) and type promotions Iceberg
allows (int -> long, float -> double, decimal precision) through pyiceberg's
``update_schema().union_by_name`` before the run writes a file; rows written before
read them as null. A change the table cannot take — a type changed to one that is no
promotion, a type narrowed (long -> int: the subject no longer matches what the table
holds), a struct where the table has a primitive — is a TableError naming the column
and both types, raised before anything is written; the table is unchanged.
"""
from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from spark_kafkalog.errors import TableError
from spark_kafkalog.format import record_schema
from spark_kafkalog.lake.iceberg_table import KEY_RAW, RawRecords, check_schema
from spark_kafkalog.typed.columns import DecodeErrorCounts, TypedRead, typed_batches, typed_schema

__all__ = ["TypedColumns", "TypedRecords", "iceberg_type", "schema_changes",
           "typed_records", "EVOLVE_ATTEMPTS"]

#: the ``key_raw`` column's field id before fresh ids are assigned (any id not in use)
_RAW_ID = 10_000
#: schema updates tried when a concurrent change to the table wins the commit
EVOLVE_ATTEMPTS = 3


def _optional(t):
    """Iceberg type ``t`` with every nested field optional."""
    from pyiceberg.types import ListType, MapType, NestedField, StructType

    if isinstance(t, StructType):
        return StructType(*(NestedField(f.field_id, f.name, _optional(f.field_type),
                                        required=False, doc=f.doc) for f in t.fields))
    if isinstance(t, ListType):
        return ListType(t.element_id, _optional(t.element_type), element_required=False)
    if isinstance(t, MapType):
        return MapType(t.key_id, _optional(t.key_type), t.value_id, _optional(t.value_type),
                       value_required=False)
    return t


def iceberg_type(name: str, arrow_type: pa.DataType):
    """The Iceberg type of a typed column ``name`` whose rows are ``arrow_type``: pyiceberg's
    Arrow conversion, every nested field optional. The one rule, for the batch job's
    decoded Arrow and for the Arrow of Spark's struct (the streaming sink)."""
    from pyiceberg.catalog import Catalog

    return _optional(Catalog._convert_schema_if_needed(
        pa.schema([pa.field(name, arrow_type)])).fields[0].field_type)


def _raw_key(mode: str, typed) -> bool:
    """An upsert table with a typed key keeps the key's bytes in ``key_raw``, its
    identifier field: the decoded key is an optional struct, no identifier."""
    return mode == "upsert" and "key" in typed


class TypedColumns(RawRecords):
    """Records whose ``value`` / ``key`` arrive typed (a typed Spark read's rows, as the
    streaming sink gets them). ``arrow``: the rows' Arrow schema (Spark's Kafka columns,
    the typed columns' types, then extra columns such as ``value_error``); ``typed``: the
    typed columns' names. ``schema``: the Iceberg schema a new table gets; after
    :meth:`adopt`, :meth:`to_arrow` writes in the table's own (possibly wider, evolved)
    schema."""

    #: what the columns come from, as a refusal names it
    SOURCE = "the stream's typed columns"

    def __init__(self, arrow: pa.Schema, typed: tuple, mode: str = "append"):
        from pyiceberg.schema import Schema, assign_fresh_schema_ids
        from pyiceberg.types import BinaryType, NestedField

        self.typed = tuple(typed)
        base = RawRecords(mode)
        self.mode = mode
        self.identifier_columns = base.identifier_columns
        ids = list(base.schema.identifier_field_ids)
        raw_key = _raw_key(mode, self.typed)
        if raw_key:
            self.identifier_columns = ("topic", "partition", KEY_RAW)
            ids = [i for i in ids if i != base.schema.find_field("key").field_id] + [_RAW_ID]
        self.extra = tuple(n for n in arrow.names if n not in self.COLUMNS)
        fields = []
        for f in base.schema.fields:
            if f.name in self.typed:
                fields.append(NestedField(-1, f.name, iceberg_type(f.name,
                                                                   arrow.field(f.name).type),
                                          required=False))
            else:
                fields.append(f)
        for name in self.extra:
            if raw_key and name == KEY_RAW:
                fields.append(NestedField(_RAW_ID, KEY_RAW, BinaryType(), required=True))
                continue
            fields.append(NestedField(-1, name, iceberg_type(name, arrow.field(name).type),
                                      required=False))
        self.schema = assign_fresh_schema_ids(Schema(*fields, identifier_field_ids=ids))
        self.arrow_schema = None

    def adopt(self, table, identifier: str):
        """``table`` ready for our rows: the fixed Kafka columns as :func:`check_schema`
        wants them, the typed columns evolved (:func:`schema_changes`, refused or
        applied), the Arrow schema to write bound to the table's. Returns the table."""
        from pyiceberg.io.pyarrow import schema_to_pyarrow
        from pyiceberg.schema import Schema

        fixed = RawRecords()
        evolving = set(self.typed) | (set(self.extra) - set(self.identifier_columns))
        fixed.schema = Schema(*(f for f in self.schema.fields if f.name not in evolving))
        check_schema(table, fixed, identifier)
        for f in table.schema().fields:
            if f.name in self.typed and str(f.field_type) == "binary":
                raise TableError(f"table {identifier}: column {f.name!r} holds raw bytes "
                                 f"(written without --{f.name}-format / {f.name}Format); "
                                 f"typed {f.name}s need a table of their own")
        from pyiceberg.exceptions import CommitFailedException

        for attempt in range(1, EVOLVE_ATTEMPTS + 1):
            problems, added = schema_changes(table.schema(), self.schema)
            if problems:
                raise TableError(f"table {identifier} cannot take {self.SOURCE}: "
                                 f"{problems[0]}" + (f" (and {len(problems) - 1} more)"
                                                     if len(problems) > 1 else ""))
            if not added:
                break
            try:
                with table.update_schema() as update:
                    update.union_by_name(self.schema)
                break
            except CommitFailedException as err:
                # another run changed the table first (the same evolution, most
                # likely): look again at what it holds now
                if attempt == EVOLVE_ATTEMPTS:
                    raise TableError(f"table {identifier}: adding {', '.join(added)} lost "
                                     f"{attempt} commits to concurrent changes: re-run"
                                     ) from err
                table.refresh()
            except Exception as err:       # pyiceberg's own validation
                raise TableError(f"table {identifier}: adding {', '.join(added)} failed: "
                                 f"{type(err).__name__}: {err}") from err
        self.arrow_schema = schema_to_pyarrow(table.schema(), include_field_ids=True)
        return table

    def to_arrow(self, window: pa.Table) -> pa.Table:
        """``window`` (typed columns decoded) laid out in the table's Arrow schema:
        columns and nested fields by name, a field the table has and the rows do not as
        nulls, records without headers with an empty list (as ``RawRecords``)."""
        if self.arrow_schema is None:
            raise TableError(f"{type(self).__name__}.to_arrow before adopt(table)")
        if "headers" in window.column_names:
            window = window.set_column(window.schema.get_field_index("headers"), "headers",
                                       _headers_empty(window.column("headers")))
        return laid_out(window, self.arrow_schema)


class TypedRecords(TypedColumns):
    """Records with ``value`` / ``key`` decoded by ``read`` (a planned
    :class:`~spark_kafkalog.typed.columns.TypedRead`) from a ``log.read_table`` window of
    raw bytes: the batch job's shaper."""

    SOURCE = "the subject's schema"

    def __init__(self, read: TypedRead, mode: str = "append"):
        typed = tuple(s.column for s in read.specs)
        if _raw_key(mode, typed):
            # the key's bytes, kept by the typed read as key_raw (Kafka's compaction
            # compares bytes too)
            read = replace(read, specs=tuple(replace(s, keep_raw=True) if s.column == "key"
                                             else s for s in read.specs))
        self.read = read
        #: records that did not decode, over every window (onDecodeError null / skip)
        self.decode_errors = DecodeErrorCounts(read.on_error)
        #: called with each window's records that did not decode, raw and whole
        #: (``log.read.dead_letter.DeadLetterSink``), or None
        self.dead_letter = None
        super().__init__(typed_schema(record_schema(True), read), typed, mode)

    def to_arrow(self, window: pa.Table) -> pa.Table:
        """``window`` (Spark's Kafka schema, raw bytes) decoded, then laid out in the
        table's Arrow schema (:meth:`TypedColumns.to_arrow`)."""
        if self.arrow_schema is None:
            raise TableError("TypedRecords.to_arrow before adopt(table)")
        raw = window.select(list(self.COLUMNS))
        raw = raw.set_column(raw.schema.get_field_index("headers"), "headers",
                             _headers_empty(raw.column("headers")))
        batches = list(typed_batches(raw.to_batches(), self.read, counts=self.decode_errors,
                                     dead_letter=self.dead_letter))
        return super().to_arrow(pa.Table.from_batches(
            batches, schema=typed_schema(raw.schema, self.read)))


def laid_out(decoded: pa.Table, arrow_schema: pa.Schema) -> pa.Table:
    """``decoded``'s columns in the table's Arrow schema, by name (struct fields too); a
    column or field the table has and ``decoded`` does not, as nulls."""
    columns = []
    for f in arrow_schema:
        if f.name in decoded.column_names:
            col = decoded.column(f.name)
            columns.append(pa.chunked_array([_conform(c, f.type) for c in col.chunks],
                                            f.type))
        else:
            columns.append(pa.nulls(decoded.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=arrow_schema)


def _headers_empty(headers: pa.ChunkedArray) -> pa.ChunkedArray:
    from spark_kafkalog.lake.iceberg_table import _nulls_empty

    if not headers.null_count:
        return headers
    return pa.chunked_array([_nulls_empty(c) for c in headers.chunks], headers.type)


def _conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``: struct fields by name (missing ones null), lists and maps
    element-wise, primitives cast (a promotion, or the same type with other metadata)."""
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        have = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children = []
        for i in range(target.num_fields):
            tf = target.field(i)
            if tf.name in have:
                children.append(_conform(array.field(have[tf.name]), tf.type))
            else:
                children.append(pa.nulls(len(array), tf.type))
        return pa.StructArray.from_arrays(children, fields=list(target),
                                          mask=array.is_null() if array.null_count else None)
    if array.type == target:
        return array
    nested = (pa.types.is_list(target) or pa.types.is_large_list(target)
              or pa.types.is_map(target))
    if nested and array.offset != 0:
        array = pa.concat_arrays([array])       # offsets from 0: values line up
    mask = array.is_null() if array.null_count else None
    if pa.types.is_map(target) and isinstance(array, pa.MapArray):
        return pa.MapArray.from_arrays(array.offsets, _conform(array.keys, target.key_type),
                                       _conform(array.items, target.item_type),
                                       type=target, mask=mask)
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and \
            isinstance(array, (pa.ListArray, pa.LargeListArray)):
        values = _conform(array.values, target.value_type)
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return cls.from_arrays(array.offsets, values, type=target, mask=mask)
    return array.cast(target)


def schema_changes(have, want) -> tuple[list[str], list[str]]:
    """What turning table schema ``have`` into one that takes ``want``'s typed columns
    needs: (problems that refuse it, names of columns/fields to add). Types are compared
    by name, recursively; a promotion Iceberg allows is neither."""
    from pyiceberg.exceptions import ResolveError
    from pyiceberg.schema import promote
    from pyiceberg.types import ListType, MapType, StructType

    problems: list[str] = []
    added: list[str] = []

    def walk(path: str, old, new) -> None:
        if isinstance(new, StructType) or isinstance(old, StructType):
            if not (isinstance(new, StructType) and isinstance(old, StructType)):
                problems.append(f"{path} is {old} in the table and {new} in the schema")
                return
            for f in new.fields:
                sub = f"{path}.{f.name}" if path else f.name
                got = old.field_by_name(f.name)
                if got is None:
                    added.append(sub)
                else:
                    walk(sub, got.field_type, f.field_type)
            return
        if isinstance(new, ListType) or isinstance(old, ListType):
            if not (isinstance(new, ListType) and isinstance(old, ListType)):
                problems.append(f"{path} is {old} in the table and {new} in the schema")
                return
            walk(f"{path}.element", old.element_type, new.element_type)
            return
        if isinstance(new, MapType) or isinstance(old, MapType):
            if not (isinstance(new, MapType) and isinstance(old, MapType)):
                problems.append(f"{path} is {old} in the table and {new} in the schema")
                return
            walk(f"{path}.key", old.key_type, new.key_type)
            walk(f"{path}.value", old.value_type, new.value_type)
            return
        if old == new:
            return
        try:
            promote(old, new)
            added.append(f"{path} ({old} -> {new})")
            return
        except ResolveError:
            pass
        try:
            promote(new, old)
            problems.append(f"{path} narrowed from {old} to {new}")
        except ResolveError:
            problems.append(f"{path} changed from {old} to {new}, which is no promotion "
                            "Iceberg allows")

    walk("", have.as_struct(), want.as_struct())
    # top-level columns the table lacks (value_error on a table made without it): added
    return problems, added


def typed_records(logdirs, topics, *, value_format: str = "binary",
                  key_format: str = "binary", on_decode_error: str | None = None,
                  schema_registry_url: str | None = None,
                  schema_registry_topic: str | None = None,
                  remote_storage=None, remote_layout: str | None = None,
                  mode: str = "append", **column_options) -> RawRecords:
    """The shaper of an export of ``topics`` of ``logdirs`` (a ``LogDirs``): RawRecords
    when both formats are ``binary``, else :class:`TypedRecords` with the read planned
    as ``log.read_table(..., value_format=...)`` plans it (the same keywords and checks:
    ``value_subject``, ``value_schema_version``, ``value_schema_id``, ``value_schema``,
    ``value_framing`` and their ``key_`` twins), every writer schema resolved to the
    reader schema before anything is read (SchemaResolutionError, InvalidOptionError).
    ``mode``: the table's, ``append`` or ``upsert``."""
    from spark_kafkalog.errors import InvalidOptionError
    from spark_kafkalog.log.read.typed_plan import open_schema_source, plan_typed_read
    from spark_kafkalog.log.read.typed_table import _name, _registry_name
    from spark_kafkalog.typed.request import make_column, make_typed

    def opt(column: str, what: str):
        return column_options.pop(f"{column}_{what}", None)

    columns = []
    for column, fmt in (("key", key_format), ("value", value_format)):
        columns.append(make_column(
            column, fmt, inline_schema=opt(column, "schema"), subject=opt(column, "subject"),
            version=opt(column, "schema_version"), schema_id=opt(column, "schema_id"),
            framing=opt(column, "framing"), names=_name))
    if column_options:
        raise InvalidOptionError(f"{sorted(column_options)[0]}: not a typed-export keyword")
    columns = [c for c in columns if c is not None]
    if not columns:
        if on_decode_error is not None or schema_registry_url is not None:
            raise InvalidOptionError("on_decode_error / schema_registry_url apply to typed "
                                     "columns; set value_format or key_format to avro or "
                                     "registry")
        return RawRecords(mode)
    cols = {c.column: c for c in columns}
    typed = make_typed(cols.get("value"), cols.get("key"), on_decode_error,
                       schema_registry_topic, schema_registry_url, None,
                       names=_registry_name)
    source = open_schema_source(logdirs, registry_topic=typed.registry_topic,
                                registry_url=typed.registry_url,
                                remote_storage=remote_storage, remote_layout=remote_layout,
                                topic_option="schema_registry_topic")
    return TypedRecords(plan_typed_read(source, list(topics), typed.columns,
                                        typed.on_decode_error, _name), mode)

"""The Iceberg side of an export: the catalog (an embedded SQL catalog on SQLite in the
warehouse directory by default, or one named by URI), the table's schema, partition spec
and sort order, the checks a table must pass before anything is written, and the
snapshot summary keys that hold which offsets each commit added.

Summary keys (strings, JSON values serialized canonically: topics by name, partitions
numerically, so equal states are equal strings):

``kafkalog.offsets``       ``{"topic": {"0": [start, end]}}``: the offsets this commit
                           holds, ``start <= offset < end`` (Kafka offsets, so a range may
                           hold fewer records: compaction, aborted transactions, markers)
``kafkalog.next-offsets``  ``{"topic": {"0": end}}``: for every topic-partition ever
                           exported into the table, the next offset to export (Kafka's
                           offsets JSON, as ``startingOffsets`` takes it)
``kafkalog.run-id``        the run that committed (a re-run's lines name it)

A run resumes from ``kafkalog.next-offsets`` of the newest snapshot that has it
(:func:`committed_offsets`), so snapshots another tool adds on top (compaction, a
manual append) do not lose the position.

The table property ``kafkalog.mode`` says what the table holds: ``append`` (every record,
the history; a table without the property is one) or ``upsert`` (the latest value per
key, as Kafka's log compaction leaves a topic; ``iceberg_upsert``). An upsert table's
``key`` column is required and, with ``topic`` and ``partition``, its Iceberg
identifier fields (``identifier-field-ids``): compaction keeps one record per key per
partition. With a typed key (a struct, optional: Iceberg cannot take it as an
identifier) the key's bytes are kept in a required ``key_raw`` column, the identifier
in its place — Kafka's compaction compares key bytes too. A run in one mode refuses a table of the other before anything is written.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa

from spark_kafkalog.errors import TableError

__all__ = ["OFFSETS_KEY", "NEXT_OFFSETS_KEY", "RUN_ID_KEY", "MODE_KEY", "MODES", "RawRecords",
           "Committed", "committed_offsets", "open_catalog", "catalog_properties",
           "fileio_properties", "load_catalog", "open_table", "offsets_json",
           "parse_offsets_json", "table_mode", "CATALOG_FILE", "TARGET_FILE_SIZE", "KEY_RAW"]

OFFSETS_KEY = "kafkalog.offsets"
NEXT_OFFSETS_KEY = "kafkalog.next-offsets"
RUN_ID_KEY = "kafkalog.run-id"
#: the table property naming what the table holds: one of MODES
MODE_KEY = "kafkalog.mode"
MODES = ("append", "upsert")
#: Iceberg's table property for the size of the data files a write aims at
TARGET_FILE_SIZE = "write.target-file-size-bytes"
#: an upsert table's identifier fields: compaction keeps one record per key per partition
IDENTIFIER_COLUMNS = ("topic", "partition", "key")
#: the column of an upsert table with a typed key that holds the key's bytes, its
#: identifier field in place of ``key`` (a decoded key is an optional struct)
KEY_RAW = "key_raw"
#: the embedded catalog's SQLite file, in the warehouse directory
CATALOG_FILE = "kafkalog-catalog.db"
#: partitioning choices: day(timestamp) always, and optionally the Kafka partition
PARTITION_BY = ("day", "day,partition", "none")


def _schema(upsert: bool = False):
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    # Spark's Kafka source schema; the Kafka coordinates are required (never null on
    # the read path), key, value and headers are nullable as in Kafka. An upsert table's
    # key is required: Iceberg's identifier fields must be (and compaction drops
    # records without a key).
    return Schema(
        NestedField(1, "topic", StringType(), required=True),
        NestedField(2, "partition", IntegerType(), required=True),
        NestedField(3, "offset", LongType(), required=True),
        NestedField(4, "timestamp", TimestamptzType(), required=True),
        NestedField(5, "timestampType", IntegerType(), required=True),
        NestedField(6, "key", BinaryType(), required=upsert),
        NestedField(7, "value", BinaryType(), required=False),
        NestedField(8, "headers", ListType(
            element_id=9, element_required=True, element_type=StructType(
                NestedField(10, "key", StringType(), required=True),
                NestedField(11, "value", BinaryType(), required=False))),
            required=False),
        identifier_field_ids=[1, 2, 6] if upsert else [],
    )


class RawRecords:
    """The records as Kafka holds them: value (and key) raw bytes.

    The seam for typed values: an object with ``schema`` (the Iceberg schema of the
    table) and ``to_arrow(table)`` (a ``log.read_table`` window in Spark's Kafka schema
    -> Arrow in that schema) can stand in for this one; the exporter asks nothing else
    of it. A typed-records shaper would decode ``value`` by its schema into columns
    here and evolve the table's schema in ``adopt(table, identifier)``, which
    :func:`open_table` calls: ``iceberg_typed.TypedRecords`` does both."""

    COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType", "key",
               "value", "headers")

    def __init__(self, mode: str = "append"):
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        if mode not in MODES:
            raise TableError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        #: the identifier fields of an upsert table of these rows
        self.identifier_columns = IDENTIFIER_COLUMNS
        self.schema = _schema(mode == "upsert")
        self.arrow_schema = schema_to_pyarrow(self.schema, include_field_ids=True)

    def to_arrow(self, window: pa.Table) -> pa.Table:
        """``window`` in the table's Arrow schema. A record without headers gets an empty
        list, not null: Kafka's record format does not tell them apart (a header count
        of 0), and pyiceberg 0.12's writer drops the validity of a list of structs
        (``ArrowProjectionVisitor.list``), so null could not be written as null anyway."""
        window = window.select(list(self.COLUMNS))
        headers = window.column("headers")
        if headers.null_count:
            window = window.set_column(window.schema.get_field_index("headers"), "headers",
                                       pa.chunked_array([_nulls_empty(c) for c in
                                                         headers.chunks], headers.type))
        # a cast, not a copy: the buffers are the reader's own
        return window.cast(self.arrow_schema)

    def adopt(self, table, identifier: str):
        """``table`` checked to take these rows (:func:`check_schema`); returned as is.
        A typed shaper evolves the table's schema here (``iceberg_typed``)."""
        check_schema(table, self, identifier)
        return table


def _nulls_empty(lists: pa.ListArray) -> pa.ListArray:
    """``lists`` with each null an empty list. Zero-copy (the same offsets and values,
    no validity) when every null slot spans no values, as the decoder writes them;
    else a compute pass."""
    import pyarrow.compute as pc

    if lists.null_count == 0:
        return lists
    offsets = lists.offsets
    spanned = offsets[len(offsets) - 1].as_py() - offsets[0].as_py()
    if spanned == (pc.sum(pc.list_value_length(lists)).as_py() or 0):
        return pa.ListArray.from_arrays(offsets, lists.values, type=lists.type)
    return pc.if_else(lists.is_null(), pa.scalar([], type=lists.type), lists)


def partition_spec(schema, partition_by: str):
    """The partition spec of a new table: ``day`` (day(timestamp)), ``day,partition``
    (and the Kafka partition) or ``none``."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, IdentityTransform

    if partition_by not in PARTITION_BY:
        raise TableError(f"--partition-by must be one of {', '.join(PARTITION_BY)}, not "
                         f"{partition_by!r}")
    fields = []
    if partition_by != "none":
        fields.append(PartitionField(source_id=schema.find_field("timestamp").field_id,
                                     field_id=1000, transform=DayTransform(),
                                     name="timestamp_day"))
    if partition_by == "day,partition":
        fields.append(PartitionField(source_id=schema.find_field("partition").field_id,
                                     field_id=1001, transform=IdentityTransform(),
                                     name="partition"))
    return PartitionSpec(*fields)


def sort_order(schema):
    """partition, offset ascending: a table's rows in the order Kafka holds them."""
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    return SortOrder(*(SortField(source_id=schema.find_field(n).field_id,
                                 transform=IdentityTransform()) for n in ("partition", "offset")))


def open_catalog(warehouse: str, catalog_uri: str | None = None, name: str = "kafkalog",
                 properties: Mapping[str, str] | None = None,
                 filesystem_options: Mapping[str, object] | None = None):
    """The catalog of :func:`catalog_properties`, loaded (:func:`load_catalog`)."""
    return load_catalog(name, catalog_properties(warehouse, catalog_uri, properties,
                                                 filesystem_options))


def load_catalog(name: str, props: Mapping[str, str]):
    """pyiceberg's catalog ``name`` of ``props``; the embedded catalog's directory is
    created on first use. A catalog that cannot be opened is a TableError."""
    from pyiceberg.catalog import load_catalog as pyiceberg_load

    uri = props.get("uri", "")
    if props.get("type") == "sql" and uri.startswith("sqlite:///") and \
            uri.endswith(f"/{CATALOG_FILE}"):     # ours; a URI the user gave must exist
        os.makedirs(os.path.dirname(uri[len("sqlite:///"):]) or ".", exist_ok=True)
    try:
        return pyiceberg_load(name, **props)
    except Exception as err:       # SQLAlchemy's, requests', pyiceberg's own
        raise TableError(f"catalog {uri} cannot be reached: {_first_line(err)}") from err


def catalog_properties(warehouse: str, catalog_uri: str | None = None,
                       properties: Mapping[str, str] | None = None,
                       filesystem_options: Mapping[str, object] | None = None
                       ) -> dict[str, str]:
    """pyiceberg's catalog properties (plain strings: they pickle to Spark's workers):
    with no ``catalog_uri`` an embedded SQL catalog whose SQLite file is
    ``<warehouse>/kafkalog-catalog.db`` (created on first use); a ``http(s)://`` URI is
    a REST catalog, any other URI an SQLAlchemy one (``sqlite:///...``,
    ``postgresql+psycopg2://...``). ``filesystem_options`` are the reader's
    (``s3.endpoint``, ``s3.region``, ``s3.access_key``, ...; :func:`fileio_properties`):
    the warehouse's object store is reached with the same settings as the log's;
    ``properties`` (pyiceberg's own names) win over them."""
    props = {"warehouse": _warehouse_uri(warehouse)}
    if catalog_uri is None:
        local = warehouse[len("file://"):] if warehouse.startswith("file://") else warehouse
        if "://" in local:
            raise TableError(f"--warehouse {warehouse}: the embedded catalog keeps its SQLite "
                             "file in a local warehouse; give --catalog-uri for a remote one")
        props.update(type="sql", uri=f"sqlite:///{os.path.abspath(local)}/{CATALOG_FILE}")
    elif catalog_uri.startswith(("http://", "https://")):
        props.update(type="rest", uri=catalog_uri)
    else:
        props.update(type="sql", uri=catalog_uri)
    props.update(fileio_properties(filesystem_options))
    props.update({str(k): str(v) for k, v in (properties or {}).items()})
    return props


#: the reader's S3 options (``log.io.fs``) -> pyiceberg's FileIO properties
_S3_FILEIO = {"endpoint": "s3.endpoint", "endpoint_override": "s3.endpoint",
              "region": "s3.region", "access_key": "s3.access-key-id",
              "secret_key": "s3.secret-access-key", "session_token": "s3.session-token",
              "role_arn": "s3.role-arn", "session_name": "s3.role-session-name",
              "request_timeout": "s3.request-timeout",
              "connect_timeout": "s3.connect-timeout", "proxy": "s3.proxy-uri",
              "proxy_options": "s3.proxy-uri",
              "force_virtual_addressing": "s3.force-virtual-addressing",
              "anonymous": "s3.anonymous"}


def fileio_properties(filesystem_options: Mapping[str, object] | None) -> dict[str, str]:
    """The reader's filesystem options (``s3.endpoint``, ``fs.s3.access_key``, ...) as
    pyiceberg FileIO properties; an S3 option pyiceberg has no name for is a TableError
    naming it, an option of another family (gcs, hdfs, local) is left to pyiceberg's
    defaults."""
    out: dict[str, str] = {}
    for raw, value in (filesystem_options or {}).items():
        name = str(raw).strip().lower()
        name = name[3:] if name.startswith("fs.") else name
        family, _, opt = name.partition(".")
        if family not in ("s3", "s3a", "s3n"):
            continue
        if opt == "scheme" or opt == "allow_bucket_creation" or opt.startswith("retry"):
            continue            # part of the endpoint / nothing pyiceberg writes needs
        if opt not in _S3_FILEIO:
            raise TableError(f"filesystem option {raw}: the Iceberg writer (pyiceberg) has "
                             "no equivalent; give it as a catalog property")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out[_S3_FILEIO[opt]] = text
    return out


def _warehouse_uri(warehouse: str) -> str:
    return warehouse if "://" in warehouse else f"file://{os.path.abspath(warehouse)}"


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def open_table(catalog, identifier: str, shape: RawRecords | None = None, *,
               partition_by: str | None = None, create: bool = True,
               target_file_size: int | None = None):
    """Table ``identifier`` (``namespace.name``), created with ``shape``'s schema, the
    partition spec of ``partition_by`` (default ``day``), the sort order partition,
    offset and ``kafkalog.mode`` = ``shape.mode`` when it does not exist (two runs
    creating it at once: one creates, both use it). An existing table must be of
    ``shape``'s mode (:func:`check_mode`), take ``shape``'s columns
    (:func:`check_schema`) and, when ``partition_by`` is given, be partitioned that way.
    ``target_file_size`` (bytes) sets the table's ``write.target-file-size-bytes``
    (a property update, after every check)."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    shape = shape if shape is not None else RawRecords()
    if "." not in identifier:
        raise TableError(f"--table {identifier!r}: name it as namespace.table, e.g. "
                         "kafka.orders")
    if target_file_size is not None and target_file_size < 1:
        raise TableError(f"--target-file-size must be positive, not {target_file_size}")
    namespace = identifier.rsplit(".", 1)[0]
    try:
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            if not create:
                raise TableError(f"table {identifier} does not exist") from None
            catalog.create_namespace_if_not_exists(namespace)
            spec = partition_spec(shape.schema, partition_by or "day")
            props = {"format-version": "2", MODE_KEY: shape.mode}
            if target_file_size is not None:
                props[TARGET_FILE_SIZE] = str(target_file_size)
            try:
                table = catalog.create_table(identifier, schema=shape.schema,
                                             partition_spec=spec,
                                             sort_order=sort_order(shape.schema),
                                             properties=props)
                return shape.adopt(table, identifier)
            except TableAlreadyExistsError:
                table = catalog.load_table(identifier)
    except TableError:
        raise
    except Exception as err:
        raise TableError(f"table {identifier}: catalog failed: {_first_line(err)}") from err
    check_mode(table, shape.mode, identifier, shape.identifier_columns)
    if partition_by is not None:
        check_spec(table, partition_by, identifier)
    table = shape.adopt(table, identifier)
    if target_file_size is not None and \
            table.properties.get(TARGET_FILE_SIZE) != str(target_file_size):
        try:
            with table.transaction() as tx:
                tx.set_properties({TARGET_FILE_SIZE: str(target_file_size)})
        except Exception as err:
            raise TableError(f"table {identifier}: setting {TARGET_FILE_SIZE} failed: "
                             f"{_first_line(err)}") from err
    return table


def table_mode(table) -> str:
    """What ``table`` holds: its ``kafkalog.mode`` property (``append`` without one)."""
    return table.properties.get(MODE_KEY, "append")


def check_mode(table, mode: str, identifier: str,
               columns: tuple = IDENTIFIER_COLUMNS) -> None:
    """A run in ``mode`` can write ``table``: the same mode, and an upsert table's
    identifier fields are ``columns`` (topic, partition, key; ``key_raw`` for a typed
    key). Else a TableError saying which."""
    have = table_mode(table)
    if have != mode:
        hint = ("its rows are the topic's history" if have == "append" else
                "its rows are the latest value per key")
        raise TableError(f"table {identifier} was created by --mode {have} ({hint}); "
                         f"--mode {mode} needs a table of its own")
    if mode == "upsert":
        schema = table.schema()
        names = sorted(schema.find_column_name(i) or str(i)
                       for i in schema.identifier_field_ids)
        if names != sorted(columns):
            raise TableError(f"table {identifier}: its identifier fields are "
                             f"{', '.join(names) or 'none'}; this export's are "
                             f"{', '.join(columns)}")


def check_spec(table, partition_by: str, identifier: str) -> None:
    """The table is partitioned as ``partition_by`` asks (same transforms of the same
    columns, in order); else a TableError naming both."""
    def shown(spec, schema):
        return [f"{f.transform}({schema.find_field(f.source_id).name})" for f in spec.fields]

    have = shown(table.spec(), table.schema())
    want_spec = partition_spec(_schema(), partition_by)
    want = shown(want_spec, _schema())
    if have != want:
        raise TableError(f"table {identifier} is partitioned by "
                         f"{', '.join(have) or 'nothing'}; --partition-by {partition_by} "
                         f"asks for {', '.join(want) or 'nothing'}: leave the flag out to "
                         "write in the table's own spec")


def check_schema(table, shape: RawRecords, identifier: str) -> None:
    """An existing table takes our rows when each of our columns is there with the same
    type (field ids may differ: the table's own are used) and every other column of the
    table is optional."""
    have = table.schema()
    for want in shape.schema.fields:
        try:
            got = have.find_field(want.name)
        except ValueError:
            raise TableError(f"table {identifier} has no column {want.name!r} "
                             f"({want.field_type}): it cannot take Kafka records") from None
        if _shown(got.field_type) != _shown(want.field_type):
            raise TableError(f"table {identifier}: column {want.name!r} is "
                             f"{got.field_type}, the export writes {want.field_type}")
        if got.required and not want.required:
            raise TableError(f"table {identifier}: column {want.name!r} is required but "
                             "Kafka records may leave it null")
    ours = {f.name for f in shape.schema.fields}
    extra = [f.name for f in have.fields if f.name not in ours and f.required]
    if extra:
        raise TableError(f"table {identifier}: required column {extra[0]!r} is not one the "
                         "export writes")


def _shown(iceberg_type) -> str:
    """An Iceberg type as text without its nested field ids (``list<struct<key: ...>>``):
    a table's own ids depend on the columns before, and do not matter to a write."""
    return re.sub(r"\b\d+: ", "", str(iceberg_type))


def offsets_json(offsets: Mapping[str, Mapping[int, object]]) -> str:
    """Canonical JSON of ``{topic: {partition: value}}``: topics by name, partitions
    numerically, no spaces."""
    return json.dumps({t: {str(q): offsets[t][q] for q in sorted(offsets[t])}
                       for t in sorted(offsets)}, separators=(",", ":"))


def parse_offsets_json(text: str, what: str) -> dict[str, dict[int, int]]:
    """``{"topic": {"0": 23}}`` -> ``{"topic": {0: 23}}``; anything else is a TableError
    naming ``what``."""
    try:
        doc = json.loads(text)
        return {str(t): {int(q): int(v) for q, v in parts.items()}
                for t, parts in doc.items()}
    except (ValueError, TypeError, AttributeError) as err:
        raise TableError(f"{what}: not Kafka offsets JSON like {{\"topic\":{{\"0\":23}}}}: "
                         f"{text[:80]!r}") from err


@dataclass(frozen=True)
class Committed:
    """What a table holds of ours: ``next_offsets`` ({topic: {partition: next}}) from
    snapshot ``snapshot_id`` (None: no snapshot of ours), and whether the table has
    snapshots at all (``foreign``: it has some, none of them ours)."""
    next_offsets: dict
    snapshot_id: int | None
    current_snapshot_id: int | None

    @property
    def foreign(self) -> bool:
        return self.snapshot_id is None and self.current_snapshot_id is not None


def committed_offsets(table) -> Committed:
    """The next offsets the table's newest snapshot of ours records, walking from the
    current snapshot back through its parents (snapshots another tool added on top of
    ours keep the position). A chain cut by snapshot expiry before one of ours reads as
    foreign: the position is unknown."""
    current = table.current_snapshot()
    snap = current
    while snap is not None:
        text = snap.summary[NEXT_OFFSETS_KEY] if snap.summary is not None else None
        if text is not None:
            return Committed(parse_offsets_json(text, f"snapshot {snap.snapshot_id} "
                                                      f"{NEXT_OFFSETS_KEY}"),
                             snap.snapshot_id, current.snapshot_id)
        parent = snap.parent_snapshot_id
        snap = table.snapshot_by_id(parent) if parent is not None else None
    return Committed({}, None, None if current is None else current.snapshot_id)


#: rows encoded to measure how many Arrow bytes one Parquet byte holds
_SAMPLE_ROWS = 20_000


def data_files(table, rows: pa.Table, write_uuid, counter, *, metadata=None, io=None) -> list:
    """``rows`` (in the table's Arrow schema) written as data files of ``table`` by
    pyiceberg's own writer (partitioned by the table's spec, file stats, field ids) —
    a private function, the one ``Table.append`` calls, so that a run can write many
    windows and commit once. ``write.target-file-size-bytes`` is the size on disk, as
    Iceberg's Java writer rolls its files; pyiceberg 0.12 bin-packs by in-memory Arrow
    bytes (3-10x the Parquet size), so the target it is given is scaled by the Arrow
    bytes per Parquet byte of a sample of ``rows`` encoded as the table's codec."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table import TableProperties

    # the streaming sink's tasks have the table's metadata and FileIO, not a Table
    metadata = table.metadata if metadata is None else metadata
    io = table.io if io is None else io
    props = metadata.properties
    target = int(props.get(TARGET_FILE_SIZE, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT))
    if rows.num_rows and rows.nbytes > target:
        scaled = max(1, int(target * _arrow_bytes_per_file_byte(rows, props)))
        metadata = metadata.model_copy(update={"properties": {**props,
                                                               TARGET_FILE_SIZE: str(scaled)}})
    return list(_dataframe_to_data_files(metadata, rows, io, write_uuid=write_uuid,
                                         counter=counter))


def _arrow_bytes_per_file_byte(rows: pa.Table, props: Mapping[str, str]) -> float:
    import pyarrow.parquet as pq
    from pyiceberg.table import TableProperties

    codec = props.get(TableProperties.PARQUET_COMPRESSION,
                      TableProperties.PARQUET_COMPRESSION_DEFAULT)
    sample = rows.slice(0, min(rows.num_rows, _SAMPLE_ROWS))
    sink = pa.BufferOutputStream()
    pq.write_table(sample, sink, compression=None if codec == "uncompressed" else codec)
    return max(1.0, sample.nbytes / max(1, sink.tell()))

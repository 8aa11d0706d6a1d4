"""KRaft metadata records as Arrow tables: :class:`MetadataState` takes decoded record
batches of ``__cluster_metadata`` (Spark's Kafka schema; control records are not rows)
and gives every record (``records()``: type, version, fields as JSON) and one typed table
per record type (``of("TOPIC_RECORD")``: a column per field of the type's newest version,
arrays of structs as JSON), plus the keyed ones reduced to their latest state:
``topics()`` (RemoveTopicRecord deletes), ``configs()`` (a null value deletes),
``features()``, ``brokers()`` (UnregisterBrokerRecord deletes), ``producer_ids()`` (the
last block). Records that do not decode raise CoordinatorRecordError naming the offset.
"""
from __future__ import annotations

import json

import pyarrow as pa

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.cluster_metadata import RECORDS, decode_metadata_record

__all__ = ["MetadataState"]

_ARROW = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
          "uint16": pa.uint16(), "float64": pa.float64(), "bool": pa.bool_(),
          "string": pa.string(), "uuid": pa.string(), "bytes": pa.binary()}
_BY_TYPE = {spec[1]: spec for spec in RECORDS.values()}
_HEAD = [pa.field("offset", pa.int64()), pa.field("timestamp", pa.int64())]


def _arrow_type(field) -> pa.DataType:
    typ = field[1]
    if typ.startswith("[]") and typ != "[]struct":
        return pa.list_(_ARROW[typ[2:]])
    return _ARROW.get(typ, pa.string())          # structs and arrays of them: JSON text


def _cell(field, value):
    if field[1] in ("struct", "[]struct") and value is not None:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return value


class MetadataState:
    """Decoded ``__cluster_metadata`` records, kept in log order."""

    def __init__(self):
        self.rows: list[tuple[int, int, str, int, dict]] = []

    @property
    def records_count(self) -> int:
        return len(self.rows)

    def add(self, rb: pa.RecordBatch) -> None:
        """The data records of one decoded batch (offset, timestamp, value)."""
        offsets = rb.column("offset").to_pylist()
        stamps = rb.column("timestamp").cast(pa.int64()).to_pylist()
        for off, ts, value in zip(offsets, stamps, rb.column("value").to_pylist()):
            if value is None:
                raise CoordinatorRecordError("a metadata record without a value",
                                             offset=off)
            try:
                type_name, version, data = decode_metadata_record(value)
            except CoordinatorRecordError as e:
                raise CoordinatorRecordError(e.reason, offset=off) from e
            self.rows.append((off, -1 if ts is None else ts // 1000, type_name, version,
                              data))

    def records(self) -> pa.Table:
        """Every record: offset, timestamp (ms), type, version, data (JSON)."""
        cols = list(zip(*self.rows)) if self.rows else [()] * 5
        return pa.table({
            "offset": pa.array(cols[0], pa.int64()),
            "timestamp": pa.array(cols[1], pa.int64()),
            "type": pa.array(cols[2], pa.string()),
            "version": pa.array(cols[3], pa.int16()),
            "data": pa.array([json.dumps(d, separators=(",", ":"), ensure_ascii=False,
                                         default=lambda b: b.hex()) for d in cols[4]],
                             pa.string())})

    def of(self, type_name: str, rows=None) -> pa.Table:
        """The records of one type, a column per field (the newest version's fields;
        null where a record's version lacks one)."""
        spec = _BY_TYPE.get(type_name)
        if spec is None:
            raise KeyError(f"{type_name}: not a metadata record type (one of "
                           f"{', '.join(sorted(_BY_TYPE))})")
        fields = spec[4]
        rows = [r for r in self.rows if r[2] == type_name] if rows is None else rows
        schema = pa.schema(_HEAD + [pa.field(f[0], _arrow_type(f)) for f in fields])
        data = {"offset": [r[0] for r in rows], "timestamp": [r[1] for r in rows]}
        for f in fields:
            data[f[0]] = [_cell(f, r[4].get(f[0])) for r in rows]
        return pa.table(data, schema=schema)

    def _latest(self, type_name: str, key, delete_type: str | None = None,
                deleted=None) -> pa.Table:
        last: dict = {}
        for r in self.rows:
            if r[2] == type_name:
                last[key(r[4])] = r
            elif r[2] == delete_type:
                for k in [k for k, v in last.items() if deleted(r[4], v[4])]:
                    del last[k]
        return self.of(type_name, sorted(last.values(), key=lambda r: r[0]))

    def topics(self) -> pa.Table:
        """The topics that exist at the end of the log."""
        return self._latest("TOPIC_RECORD", lambda d: d["topicId"], "REMOVE_TOPIC_RECORD",
                            lambda rm, d: rm["topicId"] == d["topicId"])

    def configs(self) -> pa.Table:
        """Each config's last value (a record with a null value deletes it)."""
        table = self._latest("CONFIG_RECORD",
                             lambda d: (d["resourceType"], d["resourceName"], d["name"]))
        return table.filter(table.column("value").is_valid())

    def features(self) -> pa.Table:
        """Each feature's last level."""
        return self._latest("FEATURE_LEVEL_RECORD", lambda d: d["name"])

    def brokers(self) -> pa.Table:
        """Each registered broker's last registration."""
        return self._latest("REGISTER_BROKER_RECORD", lambda d: d["brokerId"],
                            "UNREGISTER_BROKER_RECORD",
                            lambda rm, d: rm["brokerId"] == d["brokerId"])

    def producer_ids(self) -> pa.Table:
        """The last producer id block handed out."""
        return self._latest("PRODUCER_IDS_RECORD", lambda d: 0)

"""``kafkalog cat -s value=avro`` (and ``key=avro``): kcat's Avro deserialization, with the
schemas from the log dir's own ``_schemas`` (default) or a registry URL (``-r``).

As kcat (libserdes) does, each record is decoded with the writer schema its id names, not
with a reader schema, and printed as avro-c prints it (:mod:`spark_kafkalog.typed.avro_json`).
The records of a batch that share an id go through the compiled decoder at once; one
decoder per id is built when the id is first met. A record that does not decode is
returned with libserdes' wording where it has one (magic byte, short payload) and the
decoder's reason otherwise (schema id, byte position): kcat's caller exits on it or, with
``-E``, prints the error and goes on. With ``-J`` each record is kcat's JSON envelope with
the decoded value in it and its schema id beside (:func:`json_envelopes`).
"""
from __future__ import annotations

import json
from typing import Sequence

import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError
from spark_kafkalog.log.read.registry_rest import SchemaLookupError

__all__ = ["AvroRender", "json_envelopes", "open_render"]


class AvroRender:
    """Renders the ``columns`` (``key``/``value``) of record batches as avro-c JSON, with
    schemas from ``source`` (a registry answering ``by_id`` and ``version``)."""

    def __init__(self, source, columns: Sequence[str]):
        self.source = source
        self.columns = tuple(columns)
        self._by_id: dict[int, tuple | str] = {}

    def _decoder(self, sid: int):
        """(decoder, schema node) for ``sid``, or the error text when there is none."""
        found = self._by_id.get(sid)
        if found is None:
            from spark_kafkalog.typed.avro import AvroDecoder

            try:
                entry = self.source.by_id(sid)
                if (entry.schema_type or "AVRO").upper() != "AVRO":
                    raise InvalidOptionError(f"schema id {sid} is a {entry.schema_type} "
                                             f"schema, not Avro")
                named: dict[str, str] = {}
                todo, seen = list(entry.references), set()
                while todo:
                    name, subject, version = todo.pop()
                    if (subject, version) in seen:
                        continue
                    seen.add((subject, version))
                    ref = self.source.version(subject, version, deleted=True)
                    named.setdefault(name, ref.schema)
                    todo.extend(ref.references)
                decoder = AvroDecoder(entry.schema, {sid: entry.schema}, named)
                found = (decoder, decoder.reader)
            except SchemaLookupError as err:
                found = f"Schema id {sid} not found: {err.reason}"
            except KafkaLogError as err:
                found = f"Schema id {sid}: {err}"
            self._by_id[sid] = found
        return found

    def _column(self, values: pa.Array) -> tuple[pa.Array, dict[int, str]]:
        from spark_kafkalog.typed.avro_json import to_json

        raw = values.to_pylist()
        out: list = [None] * len(raw)
        bad: dict[int, str] = {}
        groups: dict[int, list[int]] = {}
        for i, v in enumerate(raw):
            if v is None:
                continue
            if len(v) < 5:
                bad[i] = f"Payload is smaller ({len(v)}) than framing (5)"
            elif v[0] != 0:
                bad[i] = f"Invalid CP1 magic byte {v[0]}, expected 0"
            else:
                groups.setdefault(int.from_bytes(v[1:5], "big"), []).append(i)
        for sid, rows in groups.items():
            found = self._decoder(sid)
            if isinstance(found, str):
                for i in rows:
                    bad[i] = found
                continue
            decoder, schema = found
            result = decoder.decode(pa.array([raw[i] for i in rows], pa.binary()),
                                    framing="confluent", on_error="null")
            decoded = result.array.to_pylist()
            errors = result.errors.to_pylist() if result.errors is not None else None
            for k, i in enumerate(rows):
                if errors is not None and errors[k] is not None:
                    bad[i] = errors[k]
                else:
                    out[i] = to_json(schema, decoded[k]).encode("ascii")
        return pa.array(out, pa.binary()), bad

    def render(self, rb: pa.RecordBatch) -> tuple[pa.RecordBatch, list[tuple[int, str, str]]]:
        """``rb`` with its Avro columns replaced by their JSON text (bytes), and the rows
        that did not decode: ``(row, column, reason)`` in row order (their cells null)."""
        arrays = list(rb.columns)
        bad: list[tuple[int, str, str]] = []
        for c in self.columns:
            j = rb.schema.get_field_index(c)
            arrays[j], errors = self._column(rb.column(j))
            bad += [(i, c, msg) for i, msg in errors.items()]
        return pa.RecordBatch.from_arrays(arrays, schema=rb.schema), sorted(bad)


def json_envelopes(raw: pa.RecordBatch, rendered: pa.RecordBatch, bad, columns: Sequence[str],
                   topic: bytes, partition: int, broker: int, delimiter: bytes) -> bytes:
    """kcat's ``-J`` objects (json.c ``fmt_msg_output_json``) of ``raw``'s rows with the
    Avro ``columns`` as kcat prints them under ``-s avro``: the decoded JSON in place of
    the string (``rendered``, :meth:`AvroRender.render`) followed by ``key_schema_id`` /
    ``value_schema_id``, or for a record that did not decode (``bad``: ``(row, column,
    reason)``) null followed by ``key_error`` / ``payload_error``; a null key or value
    stays null with neither. The rest of each object (topic .. headers, and a column not
    decoded as Avro) is the compiled ``-J`` writer's, run on the row with its Avro
    columns nulled: the text after its ``,"key":`` (which no string can hold: quotes in
    strings are escaped) is replaced."""
    from spark_kafkalog.format import _text

    errors = {(row, column): reason for row, column, reason in bad}
    index = {c: raw.schema.get_field_index(c) for c in columns}
    blank = raw
    for c, j in index.items():
        blank = blank.set_column(j, c, pa.nulls(raw.num_rows, raw.schema.field(j).type))
    out = []
    for i in range(raw.num_rows):
        text = _text.json_records(blank.slice(i, 1), topic, partition, broker, delimiter)
        head, _, tail = text.partition(b',"key":')
        key, _, payload = tail[:len(tail) - len(delimiter) - 1].partition(b',"payload":')
        parts = {"key": key, "value": payload}
        for c in columns:
            name = "key" if c == "key" else "payload"
            if (i, c) in errors:
                parts[c] = b'null,"' + name.encode() + b'_error":' + \
                    json.dumps(errors[(i, c)], ensure_ascii=False).encode()
            elif rendered.column(index[c])[i].is_valid:
                framed = raw.column(index[c])[i].as_py()
                parts[c] = rendered.column(index[c])[i].as_py() + b',"' + c.encode() + \
                    b'_schema_id":' + str(int.from_bytes(framed[1:5], "big")).encode()
        out.append(head + b',"key":' + parts["key"] + b',"payload":' + parts["value"] + b"}"
                   + delimiter)
    return b"".join(out)


def open_render(logdirs, columns: Sequence[str], registry_url: str | None) -> AvroRender:
    """The renderer of one source: the registry at ``registry_url``, else the log dir's
    ``_schemas``; InvalidOptionError when there is neither."""
    from spark_kafkalog.log.read.typed_plan import open_schema_source

    source = open_schema_source(logdirs, registry_url=registry_url)
    if source is None:
        raise InvalidOptionError(f"-s avro: the log dirs {', '.join(logdirs.roots)} hold no "
                                 f"_schemas topic; give the registry's URL with -r")
    return AvroRender(source, columns)

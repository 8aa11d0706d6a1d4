"""``read_table`` with typed values and keys (issue 38 items 2 and 5): expected rows from
fastavro's schema resolution, schemas from a ``_schemas`` topic built as KafkaStore writes
it, or from a registry's REST API served by a tiny http.server on loopback."""
from __future__ import annotations

import base64
import json
import logging
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spark_kafkalog.errors import (
    InvalidOptionError,
    SchemaResolutionError,
    TypedRecordError,
)
from spark_kafkalog.log import read_table
from spark_kafkalog.typed.columns import DecodeErrorCounts
from tests.typed import typed_logs as tl


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return str(tl.build(tmp_path_factory.mktemp("typed") / "logs"))


def _expected_orders():
    rows = []
    for q, recs in sorted(tl.order_records().items()):
        for k, v in recs:
            rows.append((q, None if k is None else tl.resolve(k, tl.KEY), tl.resolve(v)))
    return rows


def test_values_and_keys_across_two_schema_versions(logs):
    t = read_table(logs, "orders", value_format="avro", key_format="registry")
    got = list(zip(t.column("partition").to_pylist(), t.column("key").to_pylist(),
                   t.column("value").to_pylist()))
    assert got == _expected_orders()
    # the struct is the latest version's, every field of it
    assert [f.name for f in t.schema.field("value").type] == ["id", "amount", "note", "tags"]
    assert t.schema.names[:7] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType"]


def test_keep_raw_keeps_the_bytes(logs):
    t = read_table(logs, "orders", value_format="avro", keep_raw_value=True,
                   include_headers=False)
    raw = [v for _, recs in sorted(tl.order_records().items()) for _, v in recs]
    assert t.column("value_raw").to_pylist() == raw
    assert t.schema.names[-1] == "value_raw"
    assert t.column("key").type == "binary"


def test_inline_schema_without_framing(logs):
    t = read_table(logs, "plain", value_format="avro", value_schema=json.dumps(tl.V1),
                   value_framing="none")
    assert t.column("value").to_pylist() == [{"id": i, "amount": i} for i in range(3)]


def test_pinned_version_that_later_writers_cannot_resolve_to_is_refused(logs):
    # orders-value v1 (amount int) as reader: v2's long does not demote to int
    with pytest.raises(SchemaResolutionError) as e:
        read_table(logs, "orders", value_format="avro", value_schema_version=1)
    assert "version 1" in str(e.value)


def test_unresolvable_subject_is_refused_before_reading(logs):
    with pytest.raises(SchemaResolutionError) as e:
        read_table(logs, "events", value_format="avro")
    assert "events-value" in str(e.value)


def test_schema_id_pins_the_reader(logs):
    t = read_table(logs, "orders", value_format="avro", value_schema_id=2, partitions=[1])
    assert t.column("value").to_pylist() == [tl.resolve(v) for _, v in tl.order_records()[1]]


def test_format_and_subject_type_must_match(logs):
    # orders-value holds AVRO schemas: read as protobuf its versions are refused by name
    with pytest.raises(InvalidOptionError) as e:
        read_table(logs, "orders", value_format="protobuf")
    assert "subject orders-value version 2 (id 2) of" in str(e.value)
    assert "has schema type AVRO, and value_format=protobuf reads PROTOBUF schemas" in str(e.value)
    with pytest.raises(InvalidOptionError, match="has schema type PROTOBUF, and value_format=avro"):
        read_table(logs, "orders", value_format="avro", value_subject="payments-value")


def test_keyword_errors_name_the_keyword(logs):
    with pytest.raises(InvalidOptionError, match="value_subject"):
        read_table(logs, "orders", value_format="avro", value_subject="nope-value")
    with pytest.raises(InvalidOptionError, match="on_decode_error"):
        read_table(logs, "orders", value_format="avro", on_decode_error="ignore")
    with pytest.raises(InvalidOptionError, match="value_schema_id"):
        read_table(logs, "orders", value_schema_id=2)
    with pytest.raises(InvalidOptionError, match="schema_registry_topic"):
        read_table(logs, "orders", value_format="avro", schema_registry_topic="_nope")


# -- bad records --------------------------------------------------------------------------

def test_fail_names_topic_partition_offset_schema_id_and_position(logs):
    with pytest.raises(TypedRecordError) as e:
        read_table(logs, "orders_bad", value_format="avro", value_subject="orders-value")
    msg = str(e.value)
    assert "orders_bad-0 offset 1" in msg and "schema id" in msg
    assert "onDecodeError=null" in msg
    assert e.value.offset == 1


def test_null_gives_null_struct_and_error_text_counted_once(logs, caplog):
    counts = DecodeErrorCounts("null")
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog.typed.columns"):
        t = read_table(logs, "orders_bad", value_format="avro", value_subject="orders-value",
                       on_decode_error="null", decode_errors=counts)
    values = t.column("value").to_pylist()
    errors = t.column("value_error").to_pylist()
    recs = tl.bad_records()
    assert values[0] == tl.resolve(recs[0][1]) and values[4] == tl.resolve(recs[4][1])
    assert values[1:4] == [None] * 3
    assert errors[0] is None and errors[4] is None and all(errors[1:4])
    assert "99" in errors[2]
    assert counts.total == 3
    warned = [r for r in caplog.records if "orders_bad-0" in r.getMessage()]
    assert len(warned) == 1 and "3 record(s)" in warned[0].getMessage()


def test_skip_drops_bad_records_counted(logs, caplog):
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog.typed.columns"):
        t = read_table(logs, "orders_bad", value_format="avro", value_subject="orders-value",
                       on_decode_error="skip")
    assert t.column("offset").to_pylist() == [0, 4]
    assert "value_error" not in t.schema.names
    warned = [r for r in caplog.records if "orders_bad-0" in r.getMessage()]
    assert len(warned) == 1 and "3 record(s)" in warned[0].getMessage()
    assert "skipped" in warned[0].getMessage()


# -- a registry's REST API ------------------------------------------------------------------

class _Registry(BaseHTTPRequestHandler):
    """GET /schemas/ids/{id}, /subjects/{s}/versions[?deleted=true],
    /subjects/{s}/versions/{v|latest}: the Confluent API's answers for tl's schemas."""
    subjects = {"orders-value": {1: 1, 2: 2}, "orders-key": {1: 3}}
    auth = "Basic " + base64.b64encode(b"reader:s3cret").decode()
    seen: list = []

    def log_message(self, *args):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        type(self).seen.append(self.path)
        if self.headers.get("Authorization") != self.auth:
            return self._send(401, {"error_code": 401, "message": "Unauthorized"})
        url = urllib.parse.urlparse(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        if parts[:2] == ["schemas", "ids"] and int(parts[2]) in tl.IDS:
            return self._send(200, {"schema": tl.text(tl.IDS[int(parts[2])])})
        if parts[0] == "subjects" and parts[1] in self.subjects:
            versions = self.subjects[parts[1]]
            if len(parts) == 3:
                return self._send(200, sorted(versions))
            v = max(versions) if parts[3] == "latest" else int(parts[3])
            if v in versions:
                sid = versions[v]
                return self._send(200, {"subject": parts[1], "version": v, "id": sid,
                                        "schema": tl.text(tl.IDS[sid])})
            return self._send(404, {"error_code": 40402, "message": "Version not found."})
        return self._send(404, {"error_code": 40401, "message": "Subject not found."})


@pytest.fixture()
def registry_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Registry.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_schemas_from_a_registry_url_with_basic_auth(tmp_path, registry_url):
    # a log dir with no _schemas: the registry is the only source
    root = tmp_path / "logs"
    tl.build(root, registry_topic="_other")
    t = read_table(str(root), "orders", value_format="avro", key_format="avro",
                   schema_registry_url=registry_url,
                   schema_registry_basic_auth="reader:s3cret")
    got = list(zip(t.column("partition").to_pylist(), t.column("key").to_pylist(),
                   t.column("value").to_pylist()))
    assert got == _expected_orders()
    # cached per read: no path asked twice
    assert len(_Registry.seen) == len(set(_Registry.seen))


def test_registry_url_refusing_credentials_names_the_url(tmp_path, registry_url):
    root = tmp_path / "logs"
    tl.build(root)
    from spark_kafkalog.log.read.registry_rest import RegistryUnavailableError
    with pytest.raises(RegistryUnavailableError, match="HTTP 401") as e:
        read_table(str(root), "orders", value_format="avro", schema_registry_url=registry_url,
                   schema_registry_basic_auth="reader:wrong")
    assert registry_url in str(e.value)


def test_no_schemas_anywhere_says_where_to_look(tmp_path):
    root = tmp_path / "logs"
    tl.build(root, registry_topic="_other")
    with pytest.raises(InvalidOptionError, match="no schemas to read .orders. with"):
        read_table(str(root), "orders", value_format="avro")
    t = read_table(str(root), "orders", value_format="avro", schema_registry_topic="_other",
                   partitions=[1])
    assert t.column("value").to_pylist() == [tl.resolve(v) for _, v in tl.order_records()[1]]


def test_key_only_typed_with_null_mode_and_raw_key(logs):
    t = read_table(logs, "orders", key_format="avro", on_decode_error="null",
                   keep_raw_key=True, include_headers=False)
    assert t.schema.names[-2:] == ["key_error", "key_raw"]
    keys = [k for _, recs in sorted(tl.order_records().items()) for k, _ in recs]
    assert t.column("key").to_pylist() == [None if k is None else tl.resolve(k, tl.KEY)
                                           for k in keys]
    assert t.column("key_error").null_count == t.num_rows      # null keys are no error
    assert t.column("key_raw").to_pylist() == keys
    assert t.column("value").type == "binary"


def test_registry_and_data_read_as_one_snapshot(tmp_path, monkeypatch):
    """A version registered after ``read_table`` read ``_schemas``, and records written
    with it, before the data read starts (the producer runs inside the data read's call):
    the data read is bounded by the log's state as the registry read took it (one
    LogDirs, its checkpoints read once), so it neither holds those records nor fails on
    their id; the next read sees both (fastavro resolves every record to v3, now latest)."""
    from spark_kafkalog.log.read import reader as data_reader
    from tests.log.logbuilder import LogDirBuilder, rec
    from tests.typed import registry_records as rr

    b = LogDirBuilder(tmp_path / "logs")
    reg = b.partition("_schemas", 0)
    reg.append([rec(k, v, ts=500) for k, v in tl.registry_records()])
    p0 = b.partition("orders", 0)
    p0.append([rec(k, v, ts=1000) for k, v in tl.order_records()[0]])
    for _, p in b.parts:
        p.high_watermark = p.log_end_offset
    b.write()
    real = data_reader.read_table

    def producer_then_read(*args, **kwargs):
        reg.append([rec(rr.schema_key("orders-value", 3),
                        rr.schema_value("orders-value", 3, 7, tl.text(tl.V3)), ts=600)])
        p0.append([rec(k, v, ts=2000) for k, v in tl.EVOLVED])
        for _, p in b.parts:
            p.high_watermark = p.log_end_offset
        b.write()
        monkeypatch.setattr(data_reader, "read_table", real)
        return real(*args, **kwargs)

    monkeypatch.setattr(data_reader, "read_table", producer_then_read)
    before = [tl.resolve(v) for _, v in tl.order_records()[0]]
    t = read_table(str(b.roots[0]), "orders", value_format="avro")
    assert t.column("value").to_pylist() == before
    t = read_table(str(b.roots[0]), "orders", value_format="avro")   # now v3 is latest
    assert t.column("value").to_pylist() == [
        tl.resolve(v, reader=tl.V3) for _, v in tl.order_records()[0] + tl.EVOLVED]

"""``kafkalog cat -s value=avro -s key=avro`` (kcat's Avro deserialization): each record
decoded with its own writer schema, printed as kcat prints Avro (avro-c's JSON through
jansson). The oracle is fastavro's ``json_writer`` (the Avro JSON encoding, with the same
", " / ": " separators), with its ``\\u00fc`` escapes in jansson's upper-case hex."""
from __future__ import annotations

import io
import json
import re

import fastavro
import pytest

from spark_kafkalog.cli import main
from spark_kafkalog.typed.avro_json import json_real, json_string
from tests.typed import typed_logs as tl
from tests.typed.test_typed_read import _Registry, registry_url  # noqa: F401 (fixture)


def cat(*argv):
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    err = io.StringIO()
    code = main(["cat", *map(str, argv)], stdout=out, stderr=err)
    out.flush()
    return code, raw.getvalue().decode(), err.getvalue()


def kcat_json(payload: bytes | None) -> str:
    """The avro-c rendering of a framed value, from fastavro's JSON encoding."""
    if payload is None:
        return "NULL"
    schema = fastavro.parse_schema(tl.IDS[int.from_bytes(payload[1:5], "big")])
    datum = fastavro.schemaless_reader(io.BytesIO(payload[5:]), schema, None)
    fo = io.StringIO()
    fastavro.json_writer(fo, schema, [datum])
    return re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(),
                  fo.getvalue().strip())


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return tl.build(tmp_path_factory.mktemp("cat") / "logs")


def _want_orders():
    return [f"{kcat_json(k)} | {kcat_json(v)}"
            for _, recs in sorted(tl.order_records().items()) for k, v in recs]


def test_cat_avro_keys_and_values_with_each_writer_schema(logs):
    code, out, err = cat(logs, "-t", "orders", "-s", "key=avro", "-s", "value=avro",
                         "-K", " | ", "-Z")
    assert code == 0, err
    lines = out.splitlines()
    assert lines == _want_orders()
    # v1 records print with v1's fields (the writer's), v2 with v2's: no reader schema
    assert lines[0] == '"k0" | {"id": 0, "amount": 0}'
    assert '"note": {"string": "\\u00FC"}' in lines[-1]


def test_cat_avro_from_a_registry_url(tmp_path, registry_url):  # noqa: F811
    root = tmp_path / "logs"
    tl.build(root, registry_topic="_other")
    # kcat's -r carries no credentials: the registry serves without them here
    _Registry.auth = None
    try:
        code, out, err = cat(root, "-t", "orders", "-p", "1", "-s", "avro", "-r",
                             registry_url, "-K", " | ", "-Z")
    finally:
        _Registry.auth = "Basic " + __import__("base64").b64encode(b"reader:s3cret").decode()
    assert code == 0, err
    assert out.splitlines() == _want_orders()[-3:]


def test_cat_avro_bad_records(logs):
    code, out, err = cat(logs, "-t", "orders_bad", "-s", "value=avro")
    assert code != 0
    assert out.splitlines() == [kcat_json(tl.bad_records()[0][1])]
    assert "offset 1" in err and "Invalid CP1 magic byte 7, expected 0" in err
    code, out, err = cat(logs, "-t", "orders_bad", "-s", "value=avro", "-E")
    assert code == 0
    assert out.splitlines() == [kcat_json(tl.bad_records()[0][1]),
                                kcat_json(tl.bad_records()[4][1])]
    errors = [line for line in err.splitlines() if line.startswith("% ERROR")]
    assert len(errors) == 3
    assert "at offset 2" in errors[1] and "99" in errors[1]
    assert "at offset 3" in errors[2] and "schema id 2" in errors[2]


def test_cat_avro_usage_errors(logs, tmp_path):
    code, _, err = cat(logs, "-t", "orders", "-r", "http://127.0.0.1:1")
    assert code != 0 and "-r" in err
    bare = tmp_path / "bare"
    tl.build(bare, registry_topic="_other")
    code, _, err = cat(bare, "-t", "orders", "-s", "value=avro")
    assert code != 0 and "-r" in err and "_schemas" in err


def test_jansson_number_and_string_rules():
    # jansson's jsonp_dtostr: %.17g, ".0" added, exponent without "+" or leading zeros
    assert json_real(0.1) == "0.10000000000000001"
    assert json_real(1.0) == "1.0" and json_real(-2.0) == "-2.0"
    assert json_real(1e20) == "1e20" and json_real(1.5e-7) == "1.4999999999999999e-7"
    # JSON_ENSURE_ASCII: upper-case \u escapes, surrogate pairs; "/" not escaped
    assert json_string("é/\x01\U0001F600") == '"\\u00E9/\\u0001\\uD83D\\uDE00"'
    assert json.loads(json_string("é/\x01\U0001F600")) == "é/\x01\U0001F600"


def test_cat_avro_json_envelope(logs):
    """``-s avro -J``: kcat's json.c envelope (topic, partition, offset, tstype, ts,
    broker, key, payload, in that order), the Avro key and value as their JSON (fastavro's
    encoding, parsed) followed by key_schema_id / value_schema_id, taken from the bytes."""
    code, out, err = cat(logs, "-t", "orders", "-s", "key=avro", "-s", "value=avro", "-J")
    assert code == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    # the broker id is the log dir's (meta.properties), as plain -J prints it
    broker = json.loads(cat(logs, "-t", "orders", "-J", "-c", "1")[1].splitlines()[0])["broker"]
    want = []
    for q, recs in sorted(tl.order_records().items()):
        half = len(recs) // 2
        for o, (k, v) in enumerate(recs):
            env = {"topic": "orders", "partition": q, "offset": o, "tstype": "create",
                   "ts": (1000 if o < half else 2000 - half) + o, "broker": broker,
                   "key": None if k is None else json.loads(kcat_json(k))}
            if k is not None:
                env["key_schema_id"] = int.from_bytes(k[1:5], "big")
            env["payload"] = None if v is None else json.loads(kcat_json(v))
            if v is not None:
                env["value_schema_id"] = int.from_bytes(v[1:5], "big")
            want.append(env)
    assert [list(g) for g in got] == [list(w) for w in want]      # kcat's field order
    assert got == want


def test_cat_avro_json_envelope_bad_records(logs):
    """A value that does not decode: kcat exits on it (the records before it printed),
    or with -E prints it with a null payload and payload_error, and says so on stderr."""
    recs = tl.bad_records()
    code, out, err = cat(logs, "-t", "orders_bad", "-s", "value=avro", "-J")
    assert code != 0 and "at offset 1" in err
    assert [json.loads(line)["payload"] for line in out.splitlines()] == [
        json.loads(kcat_json(recs[0][1]))]
    code, out, err = cat(logs, "-t", "orders_bad", "-s", "value=avro", "-J", "-E")
    assert code == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    assert [g["offset"] for g in got] == [0, 1, 2, 3, 4]
    assert [g["payload"] for g in got] == [json.loads(kcat_json(recs[0][1])), None, None,
                                           None, json.loads(kcat_json(recs[4][1]))]
    assert [g.get("value_schema_id") for g in got] == [2, None, None, None, 1]
    assert "Invalid CP1 magic byte 7, expected 0" in got[1]["payload_error"]
    assert all("payload_error" in g for g in got[1:4]) and "payload_error" not in got[0]
    assert list(got[1])[-2:] == ["payload", "payload_error"]
    assert got[0]["key"] is None and "key_schema_id" not in got[0]
    assert len([ln for ln in err.splitlines() if ln.startswith("% ERROR")]) == 3

"""``read_table`` with Protobuf and JSON Schema values (issue 38): ``value_format`` protobuf,
json and registry over a ``_schemas`` topic holding PROTOBUF and JSON subjects; expected
rows from the ``protobuf`` package (protoc-generated classes) and ``json.loads``
(tests/typed/pj_logs.py), never from spark_kafkalog."""
from __future__ import annotations

import pytest

from spark_kafkalog.errors import InvalidOptionError, SchemaResolutionError, TypedRecordError
from spark_kafkalog.log import read_table
from spark_kafkalog.typed.columns import DecodeErrorCounts
from tests.typed import pj_logs as pj
from tests.typed.proto_oracle import decoded_rows


@pytest.fixture(scope="module")
def protos(tmp_path_factory):
    return pj.Protos(tmp_path_factory.mktemp("protoc"))


@pytest.fixture(scope="module")
def logs(tmp_path_factory, protos):
    return str(pj.build(tmp_path_factory.mktemp("pj") / "logs", protos))


@pytest.mark.parametrize("fmt", ["protobuf", "registry"])
def test_protobuf_values_across_two_versions(logs, protos, fmt):
    t = read_table(logs, "pay", value_format=fmt, value_message=pj.PAYMENT)
    assert decoded_rows(t.column("value").combine_chunks()) == \
        [protos.expected(v) for v in protos.pay_values()]
    assert [f.name for f in t.schema.field("value").type] == ["id", "amount", "tags", "meta"]
    assert t.column("offset").to_pylist() == list(range(8))


def test_protobuf_default_message_is_the_files_first(logs):
    # v2's first message is Refund: typed by it, v1's first message (Payment, index [0])
    # is its writer, and Payment's double amount cannot be Refund's int64 cents (field 2):
    # refused at planning, naming both
    with pytest.raises(SchemaResolutionError) as e:
        read_table(logs, "pay", value_format="protobuf")
    assert "writer schema id 11 (kl.pay.Payment)" in str(e.value)
    assert "reader kl.pay.Refund" in str(e.value)
    assert "subject pay-value version 2 (id 12)" in str(e.value)


def test_protobuf_inline_schema_unframed(logs, protos):
    t = read_table(logs, "pay_plain", value_format="protobuf", value_schema=pj.PAY_V2,
                   value_message=pj.PAYMENT, value_framing="none")
    assert decoded_rows(t.column("value").combine_chunks()) == \
        [pj.spark_value(pj.parse(protos.v2.Payment, v)) for v in protos.plain()]


def test_protobuf_inline_schema_framed_with_an_id_no_registry_holds(logs, protos):
    # no subject pay_unreg-value: each framed id is read with the inline schema
    t = read_table(logs, "pay_unreg", value_format="protobuf", value_schema=pj.PAY_V2,
                   value_message=pj.PAYMENT)
    assert decoded_rows(t.column("value").combine_chunks()) == \
        [pj.spark_value(pj.parse(protos.v2.Payment, v)) for v in protos.plain()]


@pytest.mark.parametrize("fmt", ["json", "registry"])
def test_json_values_and_keys_across_two_versions(logs, fmt):
    t = read_table(logs, "ev", value_format=fmt, key_format=fmt)
    assert t.column("value").to_pylist() == [pj.ev_expected(v) for v in pj.ev_values()]
    assert t.column("key").to_pylist() == [None if k is None else {"user": f"u{i}"}
                                           for i, k in enumerate(pj.ev_keys())]
    assert [f.name for f in t.schema.field("value").type] == ["kind", "n", "at", "tags"]


def test_json_inline_schema(logs):
    t = read_table(logs, "ev", value_format="json", value_schema=pj.EV_V1)
    assert t.column("value").to_pylist() == [
        {"kind": pj.ev_json(i)["kind"], "n": pj.ev_json(i)["n"]} for i in range(7)]


def test_protobuf_bad_records_null_and_skip(logs, protos):
    counts = DecodeErrorCounts("null")
    t = read_table(logs, "pay_bad", value_format="protobuf", value_subject="pay-value",
                   value_message=pj.PAYMENT,
                   on_decode_error="null", decode_errors=counts)
    values = protos.bad_values()
    good = {0, 4}
    assert decoded_rows(t.column("value").combine_chunks()) == \
        [protos.expected(v) if i in good else None for i, v in enumerate(values)]
    errors = t.column("value_error").to_pylist()
    assert [e is None for e in errors] == [i in good for i in range(5)]
    assert "magic byte 7" in errors[1] and "99" in errors[2]
    assert counts.total == 3
    t = read_table(logs, "pay_bad", value_format="protobuf", value_subject="pay-value",
                   value_message=pj.PAYMENT,
                   on_decode_error="skip")
    assert t.column("offset").to_pylist() == [0, 4]
    with pytest.raises(TypedRecordError) as e:
        read_table(logs, "pay_bad", value_format="protobuf", value_subject="pay-value",
                   value_message=pj.PAYMENT)
    assert "pay_bad-0 offset 1" in str(e.value)


def test_json_bad_records_null_and_skip(logs):
    t = read_table(logs, "ev_bad", value_format="json", value_subject="ev-value",
                   on_decode_error="null")
    errors = t.column("value_error").to_pylist()
    assert [e is None for e in errors] == [True, False, False, False, True]
    assert t.column("value").to_pylist() == [
        pj.ev_expected(v) if e is None else None for v, e in zip(pj.ev_bad(), errors)]
    assert "98" in errors[3]
    t = read_table(logs, "ev_bad", value_format="json", value_subject="ev-value",
                   on_decode_error="skip")
    assert t.column("offset").to_pylist() == [0, 4]
    with pytest.raises(TypedRecordError, match="ev_bad-0 offset 1"):
        read_table(logs, "ev_bad", value_format="json", value_subject="ev-value")


def test_a_protobuf_writer_in_an_avro_subject_is_refused_at_planning(logs):
    for fmt in ("registry", "avro"):
        with pytest.raises(InvalidOptionError) as e:
            read_table(logs, "mixed", value_format=fmt)
        assert "subject mixed-value version 1 (id 31)" in str(e.value)
        assert "has schema type PROTOBUF" in str(e.value)


def test_format_of_another_type_than_the_subject_is_refused(logs):
    with pytest.raises(InvalidOptionError, match="has schema type PROTOBUF, and "
                                                 "value_format=json reads JSON"):
        read_table(logs, "pay", value_format="json")
    with pytest.raises(InvalidOptionError, match="value_message: names a Protobuf message"):
        read_table(logs, "ev", value_format="json", value_message="a.B")
    with pytest.raises(InvalidOptionError) as e:
        read_table(logs, "ev", value_format="registry", value_message="a.B")
    assert "value_message: subject ev-value version 2 (id 22)" in str(e.value)
    assert "has schema type JSON; a message is chosen only in a PROTOBUF schema" in str(e.value)


@pytest.mark.parametrize("serde, column, fmt", [("value=protobuf", "value", "protobuf"),
                                                ("key=json", "key", "json"),
                                                ("json", "value", "json")])
def test_cat_refuses_protobuf_and_json_serdes(logs, serde, column, fmt):
    # kcat's -s takes pack formats and avro only: no kcat output to match
    from tests.typed.test_cat_avro import cat
    code, out, err = cat(logs, "-t", "pay", "-s", serde)
    assert code != 0 and out == ""
    assert f"-s {serde}: kcat deserializes only avro" in err
    assert f"--{column}-format {fmt}" in err and f"{column}Format={fmt}" in err

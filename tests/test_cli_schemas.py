"""``kafkalog schemas``: the registry's REST answers (documented shapes and error codes)
from a ``_schemas`` log dir built with the test log builder, records as Confluent's
KafkaStore writes them (tests/typed/registry_records.py)."""
from __future__ import annotations

import io
import json

import pytest

from spark_kafkalog.cli import main
from tests.log import tiered_builder
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr
from tests.typed.test_registry import build_logdir


def schemas(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["schemas", *map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return build_logdir(tmp_path_factory.mktemp("reg") / "logs", rr.history())


def js(*argv):
    code, out, err = schemas(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_subjects(logs):
    code, out, err = schemas(logs)
    assert code == 0 and err == ""
    assert out.splitlines() == ["address-value", "customer-value", "events-value",
                                "orders-copy-value", "orders-value", "payments-value",
                                ":.staging:orders-value"]
    assert "gone-value" in js(logs, "subjects", "--deleted")
    assert "gone-value" not in js(logs, "subjects")


def test_versions(logs):
    assert js(logs, "versions", "orders-value") == [1, 3]
    assert js(logs, "versions", "orders-value", "--deleted") == [1, 2, 3]
    code, out, _ = schemas(logs, "versions", "orders-value")
    assert out == "1\n3\n"


def test_get_latest_rest_shape(logs):
    assert js(logs, "get", "orders-value", "latest") == {
        "subject": "orders-value", "version": 3, "id": 5, "schemaType": "AVRO",
        "references": [{"name": "com.acme.Customer", "subject": "customer-value",
                        "version": 1}],
        "schema": rr.ORDERS_V3}
    assert js(logs, "--json", "get", "payments-value", "1")["schemaType"] == "PROTOBUF"
    code, out, _ = schemas(logs, "get", "orders-value", "1")
    assert code == 0 and out.splitlines()[-1] == rr.ORDERS_V1
    assert "id 1" in out.splitlines()[0]


def test_get_by_id_rest_shape(logs):
    assert js(logs, "id", "7") == {"schemaType": "JSON", "schema": rr.EVENT_JSON}
    # a soft-deleted version stays readable by id
    assert js(logs, "id", "2")["schema"] == rr.ORDERS_V2
    assert js(logs, "id", "1", "--subject", ":.staging:")["schema"] == rr.STAGING_ORDERS


def test_soft_deleted_version_needs_deleted(logs):
    code, out, err = schemas(logs, "get", "orders-value", "2")
    assert (code, out) == (1, "")
    assert err == "kafkalog schemas: error 40402: Version 2 not found.\n"
    doc = js(logs, "get", "orders-value", "2", "--deleted")
    assert doc["deleted"] is True and doc["id"] == 2


@pytest.mark.parametrize("query,code,message", [
    (("versions", "tmp-value"), 40401, "Subject 'tmp-value' not found."),
    (("get", "nope", "latest"), 40401, "Subject 'nope' not found."),
    (("get", "orders-value", "7"), 40402, "Version 7 not found."),
    (("id", "8"), 40403, "Schema 8 not found"),
    (("config", "orders-value"), 40408,
     "Subject 'orders-value' does not have subject-level compatibility configured"),
    (("mode", "orders-value"), 40409,
     "Subject 'orders-value' does not have subject-level mode configured"),
])
def test_errors_carry_the_registry_code(logs, query, code, message):
    rc, out, err = schemas(logs, *query)
    assert (rc, out) == (1, "") and err == f"kafkalog schemas: error {code}: {message}\n"
    rc, out, err = schemas(logs, *query, "--json")
    assert rc == 1 and json.loads(err) == {"error_code": code, "message": message}
    assert len(err.splitlines()) == 1


def test_config_and_mode(logs):
    assert js(logs, "config") == {"compatibilityLevel": "FULL"}
    assert js(logs, "config", "events-value") == {"compatibilityLevel": "NONE"}
    assert js(logs, "config", "orders-value", "--default-to-global") == \
        {"compatibilityLevel": "FULL"}
    assert js(logs, "mode") == {"mode": "READWRITE"}
    assert schemas(logs, "mode", "events-value")[1] == "READONLY\n"


def test_defaults_when_nothing_is_set(tmp_path):
    root = build_logdir(tmp_path / "logs", rr.history()[2:4])
    assert js(root, "config") == {"compatibilityLevel": "BACKWARD"}
    assert js(root, "mode") == {"mode": "READWRITE"}


def test_topic_flag_and_missing_topic(tmp_path):
    root = build_logdir(tmp_path / "logs", rr.history(), topic="_schemas_dr")
    code, out, err = schemas(root)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert "'_schemas' not found" in err and "_schemas_dr" in err and str(root) in err
    assert js(root, "--topic", "_schemas_dr", "versions", "orders-value") == [1, 3]


def test_bad_usage(logs):
    assert schemas(logs, "versions")[0] == 2
    assert schemas(logs, "frobnicate")[0] == 2
    assert schemas(logs, "id", "x")[0] == 2


def test_corrupt_record_fails_or_is_skipped(tmp_path):
    recs = rr.history()[:3] + [(b"not json", b"{}")] + rr.history()[3:5]
    root = build_logdir(tmp_path / "logs", recs)
    code, out, err = schemas(root)
    assert code == 1 and "_schemas-0: offset 3" in err and "not JSON" in err
    code, out, err = schemas(root, "versions", "orders-value", "--skip-bad-records")
    assert code == 0 and out == "1\n2\n" and "offset 3" in err


def test_both_tiers(tmp_path, monkeypatch):
    """The first three segments of _schemas in the remote tier (KIP-405), listed in
    __remote_log_metadata: the state equals the one read from the whole log."""
    full = tmp_path / "full"
    lb = LogDirBuilder(full)
    p = lb.partition("_schemas", 0)
    p.log_start_offset = 0
    history = rr.history()
    for chunk in (history[:6], history[6:13], history[13:20], history[20:]):
        p.append([rec(k, v) for k, v in chunk])
        p.roll()
    p.high_watermark = p.log_end_offset
    lb.write()
    bases = [base for base, _ in p.segments]
    monkeypatch.setattr(tiered_builder, "TOPIC", "_schemas")
    data, remote = tiered_builder.tier(tmp_path, p, full, bases)
    want = js(full, "subjects", "--deleted")
    code, _, err = schemas(data)                   # the local tier alone lacks 0..19
    assert code == 1 and "data loss" in err
    assert js(data, "subjects", "--deleted", "--remote-storage", remote) == want
    assert js(data, "get", "address-value", "1", "--remote-storage", remote)["schema"] == \
        rr.ADDRESS

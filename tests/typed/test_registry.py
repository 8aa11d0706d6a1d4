"""The schema registry's state from its ``_schemas`` records: records keyed and valued as
Confluent's KafkaStore writes them (tests/typed/registry_records.py, from the registry's
source), the expected answers from the registry's documented REST behaviour (soft
delete keeps a schema readable by id and hides it from /versions; hard delete removes
it; ids are per context) and, where the docs are silent, from its store's code
(duplicate ids, CLEAR_SUBJECT)."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from spark_kafkalog.errors import (
    LogLayoutError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.typed.registry import REGISTRY_SCHEMA, RegistryState, SchemaReference
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr

DEFAULT_SUBJECTS = ["address-value", "customer-value", "events-value", "orders-copy-value",
                    "orders-value", "payments-value"]


def rows(records):
    return [(i, k, v) for i, (k, v) in enumerate(records)]


@pytest.fixture(scope="module")
def state():
    return RegistryState.from_records(rows(rr.history()))


def test_subjects(state):
    assert state.subjects() == DEFAULT_SUBJECTS + [":.staging:orders-value"]
    # a soft-deleted subject shows with ?deleted=true; a hard-deleted (tmp) or cleared
    # (old) one is gone; the rogue record with a duplicate id was never applied
    assert state.subjects(include_deleted=True) == sorted(
        DEFAULT_SUBJECTS + ["gone-value"]) + [":.staging:orders-value"]


def test_versions_and_soft_delete(state):
    assert state.versions("orders-value") == [1, 3]
    assert state.versions("orders-value", include_deleted=True) == [1, 2, 3]
    with pytest.raises(VersionNotFoundError) as e:
        state.version("orders-value", 2)
    assert e.value.error_code == 40402 and "Version 2 not found." in str(e.value)
    v2 = state.version("orders-value", 2, include_deleted=True)
    assert (v2.deleted, v2.id, v2.schema, v2.offset) == (True, 2, rr.ORDERS_V2, 7)
    with pytest.raises(VersionNotFoundError):
        state.version("orders-value", 9)


def test_latest_and_types(state):
    latest = state.latest("orders-value")
    assert (latest.version, latest.id, latest.schema, latest.schema_type) == \
        (3, 5, rr.ORDERS_V3, "AVRO")
    assert state.version("orders-value", "latest") == latest
    assert state.version("orders-value", -1) == latest
    assert latest.references == (SchemaReference("com.acme.Customer", "customer-value", 1),)
    assert state.version("orders-value", 1).schema_type == "AVRO"      # schemaType absent
    assert state.latest("payments-value").schema_type == "PROTOBUF"
    assert state.latest("payments-value").schema == rr.PAYMENT_PROTO
    assert state.latest("events-value").schema_type == "JSON"


def test_hard_deleted_subject(state):
    for ask in (lambda: state.versions("tmp-value", include_deleted=True),
                lambda: state.version("tmp-value", 1, include_deleted=True),
                lambda: state.latest("tmp-value")):
        with pytest.raises(SubjectNotFoundError) as e:
            ask()
        assert e.value.error_code == 40401 and "Subject 'tmp-value' not found." in str(e.value)
    with pytest.raises(SchemaNotFoundError) as e:
        state.by_id(8)
    assert e.value.error_code == 40403
    assert state.config("tmp-value") is None        # its config was deleted with it


def test_soft_deleted_subject(state):
    with pytest.raises(SubjectNotFoundError):
        state.versions("gone-value")
    assert state.versions("gone-value", include_deleted=True) == [1]
    gone = state.by_id(10)                          # soft-deleted: still readable by id
    assert (gone.subject, gone.deleted, gone.offset) == ("gone-value", True, 20)


def test_clear_subject_drops_soft_deleted(state):
    with pytest.raises(SubjectNotFoundError):
        state.versions("old-value", include_deleted=True)
    with pytest.raises(SchemaNotFoundError):
        state.by_id(11)


def test_by_id_and_contexts(state):
    assert state.by_id(1).schema == rr.ORDERS_V1
    assert state.by_id(2).schema == rr.ORDERS_V2
    assert state.by_id(6).schema_type == "PROTOBUF"
    # ids are per context: id 1 of the staging context is another schema
    assert state.by_id(1, subject=":.staging:").schema == rr.STAGING_ORDERS
    assert state.by_id(1, subject=":.staging:orders-value").schema == rr.STAGING_ORDERS
    assert state.by_id(1, subject="orders-copy-value").subject == "orders-copy-value"
    # an unqualified subject is looked for in every context (getSchemaKeyUsingContexts)
    assert state.version(":.staging:orders-value", 1).id == 1
    with pytest.raises(SchemaNotFoundError):
        state.by_id(2, subject=":.staging:")
    assert state.next_id() == 12                   # ids 8, 9 were hard-deleted: not reused
    assert state.next_id(":.staging:orders-value") == 2
    assert state.next_id(":.other:x") == 1
    assert ".staging" in state.contexts()


def test_duplicate_id_record_ignored(state):
    with pytest.raises(SubjectNotFoundError):
        state.versions("rogue-value", include_deleted=True)


def test_references_transitive(state):
    refs = state.references_of(state.latest("orders-value"))
    assert {n: (s.subject, s.version, s.schema) for n, s in refs.items()} == {
        "com.acme.Customer": ("customer-value", 1, rr.CUSTOMER),
        "com.acme.Address": ("address-value", 1, rr.ADDRESS)}
    assert state.references_of(state.latest("address-value")) == {}


def test_config_and_mode(state):
    assert state.config() == "FULL"
    assert state.config("events-value") == "NONE"
    assert state.config("orders-value") is None
    assert state.config("orders-value", default_to_global=True) == "FULL"
    assert state.mode() == "READWRITE"
    assert state.mode("events-value") == "READONLY"
    assert state.mode("orders-value") is None
    assert state.config_value() == {"compatibilityLevel": "FULL"}


def test_next_version(state):
    assert state.next_version("orders-value") == 4
    assert state.next_version("gone-value") == 2     # soft-deleted versions still count
    assert state.next_version("tmp-value") == 1      # hard-deleted ones do not
    assert state.next_version("new-value") == 1


def test_to_arrow(state):
    t = state.to_arrow()
    assert t.schema == REGISTRY_SCHEMA
    assert t.schema.field("references").type.value_field.name == "element"
    got = [(r["subject"], r["version"], r["id"], r["deleted"])
           for r in t.select(["subject", "version", "id", "deleted"]).to_pylist()]
    assert got == [("address-value", 1, 3, False), ("customer-value", 1, 4, False),
                   ("events-value", 1, 7, False), ("gone-value", 1, 10, True),
                   ("orders-copy-value", 1, 1, False), ("orders-value", 1, 1, False),
                   ("orders-value", 2, 2, True), ("orders-value", 3, 5, False),
                   ("payments-value", 1, 6, False), (":.staging:orders-value", 1, 1, False)]
    row = t.filter(pa.compute.equal(t["id"], 5)).to_pylist()[0]
    assert row["references"] == [{"name": "com.acme.Customer", "subject": "customer-value",
                                  "version": 1}]
    assert (row["schemaType"], row["offset"], row["metadata"]) == ("AVRO", 6, None)


def test_last_value_wins_and_tombstones():
    recs = [(rr.schema_key("a", 1), rr.schema_value("a", 1, 1, '"int"')),
            (rr.subject_key("CONFIG", "a"), rr.config_value("FORWARD", "a")),
            (rr.subject_key("CONFIG", "a"), rr.config_value("BACKWARD_TRANSITIVE", "a")),
            (rr.subject_key("MODE"), rr.mode_value("READONLY")),
            (rr.subject_key("MODE"), None),
            (rr.subject_key("DELETE_SUBJECT", "a"), None)]      # tombstone: no effect
    s = RegistryState.from_records(rows(recs))
    assert s.config("a") == "BACKWARD_TRANSITIVE" and s.mode() is None
    assert s.versions("a") == [1]
    # a legacy CONFIG value without its subject (the key's is used)
    s = RegistryState.from_records([(0, rr.subject_key("CONFIG", "b"), b'{"compatibilityLevel":"NONE"}')])
    assert s.config("b") == "NONE"


def test_context_config_and_clear():
    recs = [(rr.subject_key("CONFIG", ":.ctx:"), rr.config_value("NONE", ":.ctx:")),
            (rr.schema_key(":.ctx:a", 1), rr.schema_value(":.ctx:a", 1, 1, '"int"')),
            (rr.schema_key("a", 1), rr.schema_value("a", 1, 1, '"int"')),
            (rr.subject_key("DELETE_SUBJECT", ":.ctx:a"), rr.delete_subject_value(":.ctx:a", 1)),
            (rr.subject_key("DELETE_SUBJECT", "a"), rr.delete_subject_value("a", 1)),
            (rr.subject_key("CLEAR_SUBJECT", ":.ctx:"), rr.clear_subject_value(":.ctx:"))]
    s = RegistryState.from_records(rows(recs))
    assert s.config(":.ctx:a", default_to_global=True) == "NONE"
    assert s.config("a", default_to_global=True) is None
    # clearing the context drops its soft-deleted versions, not the default context's
    assert s.subjects(include_deleted=True) == ["a"]


def test_metadata_kept_as_raw_json():
    meta = {"properties": {"owner": "team-a"}}
    s = RegistryState.from_records([(0, rr.schema_key("m", 1),
                                     rr.schema_value("m", 1, 1, '"int"', metadata=meta))])
    import json
    assert json.loads(s.latest("m").metadata) == meta
    assert s.latest("m").rule_set is None


@pytest.mark.parametrize("key,value,words", [
    (b"not json", None, "key is not JSON"),
    (b'{"keytype":"SCHEMAS","subject":"a","version":1,"magic":1}', b"{}",
     "key type 'SCHEMAS'"),
    (b'["SCHEMA"]', None, "not an object"),
    (rr.schema_key("a", 1), b"{broken", "SCHEMA value is not JSON"),
    (rr.schema_key("a", 1), b'{"subject":"a","version":1,"schema":"\\"int\\""}',
     "'id' is None"),
    (b'{"keytype":"SCHEMA","subject":"a","version":1,"magic":7}', b"{}", "magic 7"),
    (None, b"{}", "null key"),
    (rr.subject_key("CONFIG"), b'{"compatibilityLevel":"SIDEWAYS"}', "'SIDEWAYS' is not one"),
    (rr.subject_key("MODE", "x"), b'{"subject":"x","mode":"readonly"}', "'readonly' is not one"),
])
def test_corrupt_records(key, value, words):
    recs = [(0, rr.NOOP_KEY, None), (1, key, value),
            (2, rr.schema_key("b", 1), rr.schema_value("b", 1, 1, '"int"'))]
    with pytest.raises(SchemaRegistryError) as e:
        RegistryState.from_records(recs, topic="_schemas", partition=0)
    msg = str(e.value)
    assert words in msg and "_schemas-0" in msg and "offset 1" in msg
    assert e.value.offset == 1
    pickle.loads(pickle.dumps(e.value))
    # the registry's reader logs such a record and goes on: on_error="skip"
    s = RegistryState.from_records(recs, on_error="skip")
    assert s.versions("b") == [1] and [x.offset for x in s.skipped] == [1]
    assert s.records == 3


def test_errors_pickle_with_their_code():
    for cls, code in ((SchemaNotFoundError, 40403), (SubjectNotFoundError, 40401),
                      (VersionNotFoundError, 40402)):
        back = pickle.loads(pickle.dumps(cls("x")))
        assert type(back) is cls and back.error_code == code


# ---- read_registry: the topic in a log dir -------------------------------------------------

def build_logdir(root, records, topic="_schemas", split=3, extra_topics=()):
    b = LogDirBuilder(root)
    p = b.partition(topic, 0)
    recs = [rec(k, v) for k, v in records]
    for i in range(0, len(recs), split):
        p.append(recs[i:i + split], compression="gzip" if i % 2 else "none")
        if i and i % (split * 3) == 0:
            p.roll()
    p.high_watermark = p.log_end_offset
    for t in extra_topics:
        q = b.partition(t, 0)
        q.append([rec(b"k", b"v")])
        q.high_watermark = q.log_end_offset
    b.write()
    return root


def test_read_registry_from_a_log_dir(tmp_path, state):
    root = build_logdir(tmp_path / "logs", rr.history())
    got = read_registry(str(root))
    assert got.to_arrow().equals(state.to_arrow())
    assert got.subjects(include_deleted=True) == state.subjects(include_deleted=True)
    assert got.config() == "FULL" and got.next_id() == 12


def test_read_registry_custom_topic_and_missing(tmp_path):
    root = build_logdir(tmp_path / "logs", rr.history()[:3], topic="_schemas_prod",
                        extra_topics=("orders",))
    assert read_registry(str(root), "_schemas_prod").versions("orders-value") == [1]
    with pytest.raises(LogLayoutError) as e:
        read_registry(str(root))
    msg = str(e.value)
    assert "'_schemas' not found" in msg and str(root) in msg and "_schemas_prod" in msg
    assert "orders" not in msg.replace("_schemas_prod", "")


def test_read_registry_corrupt_record_names_offset(tmp_path):
    recs = rr.history()[:4] + [(b"{oops", b"{}")] + rr.history()[4:6]
    root = build_logdir(tmp_path / "logs", recs)
    with pytest.raises(SchemaRegistryError) as e:
        read_registry(str(root))
    assert "_schemas-0: offset 4" in str(e.value)


def test_from_an_arrow_table_and_pickles(state):
    recs = rr.history()
    table = pa.table({"offset": pa.array(range(len(recs)), pa.int64()),
                      "key": pa.array([k for k, _ in recs], pa.binary()),
                      "value": pa.array([v for _, v in recs], pa.binary())})
    got = RegistryState.from_records(table)
    assert got.to_arrow().equals(state.to_arrow())
    back = pickle.loads(pickle.dumps(got))          # a state crosses to executors as is
    assert back.latest("orders-value") == state.latest("orders-value")
    assert back.next_id() == 12


def test_reference_to_latest_and_to_a_missing_version():
    recs = [(rr.schema_key("dep", 1), rr.schema_value("dep", 1, 1, '"int"')),
            (rr.schema_key("dep", 2), rr.schema_value("dep", 2, 2, '"long"')),
            (rr.schema_key("dep", 2), rr.schema_value("dep", 2, 2, '"long"', deleted=True)),
            (rr.schema_key("top", 1), rr.schema_value("top", 1, 3, '"x"', references=[
                ("Dep", "dep", -1)])),
            (rr.schema_key("bad", 1), rr.schema_value("bad", 1, 4, '"y"', references=[
                ("Nope", "nope", 1)]))]
    s = RegistryState.from_records(rows(recs))
    assert s.references_of(s.latest("top"))["Dep"].version == 1    # 2 is soft-deleted
    with pytest.raises(SubjectNotFoundError) as e:
        s.references_of(s.latest("bad"))
    assert "reference 'Nope' of subject 'bad' version 1" in str(e.value)

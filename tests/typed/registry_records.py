"""``_schemas`` records keyed and valued exactly as Confluent Schema Registry's KafkaStore
writes them (SchemaRegistrySerializer: Jackson, compact, null and empty fields left
out, keys in their @JsonPropertyOrder, values in their @JsonCreator order), and one
registry history whose REST answers the tests know from the registry's documentation.
Nothing here uses spark_kafkalog."""
from __future__ import annotations

import json


def _j(obj: dict) -> bytes:
    # Jackson's default writer: no spaces, non-ASCII as UTF-8, "/" not escaped
    return json.dumps({k: v for k, v in obj.items() if v is not None and v != []},
                      separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _j({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def subject_key(keytype: str, subject: str | None = None) -> bytes:
    """CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT (subject None: global)."""
    return _j({"keytype": keytype, "subject": subject, "magic": 0})


NOOP_KEY = _j({"keytype": "NOOP", "magic": 0})


def context_key(context: str) -> bytes:
    return _j({"keytype": "CONTEXT", "tenant": "default", "context": context, "magic": 0})


def context_value(context: str) -> bytes:
    return _j({"tenant": "default", "context": context})


def schema_value(subject: str, version: int, sid: int, schema: str, *,
                 schema_type: str | None = None, references=None, deleted: bool = False,
                 metadata=None) -> bytes:
    """``schema_type`` None: left out, as registries before 5.5 (Avro only) wrote it."""
    refs = [{"name": n, "subject": s, "version": v} for n, s, v in references or ()]
    obj = {"subject": subject, "version": version, "id": sid, "schemaType": schema_type,
           "references": refs, "metadata": metadata, "schema": schema}
    obj = {k: v for k, v in obj.items() if v is not None and v != []}
    obj["deleted"] = deleted          # a primitive boolean: Jackson writes it always
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def config_value(level: str, subject: str | None = None) -> bytes:
    return _j({"subject": subject, "compatibilityLevel": level})


def mode_value(mode: str, subject: str | None = None) -> bytes:
    return _j({"subject": subject, "mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _j({"subject": subject, "version": version})


def clear_subject_value(subject: str) -> bytes:
    return _j({"subject": subject})


ORDERS_V1 = ('{"type":"record","name":"Order","namespace":"com.acme","fields":'
             '[{"name":"id","type":"long"}]}')
ORDERS_V2 = ('{"type":"record","name":"Order","namespace":"com.acme","fields":'
             '[{"name":"id","type":"long"},{"name":"note","type":["null","string"],'
             '"default":null}]}')
ORDERS_V3 = ('{"type":"record","name":"Order","namespace":"com.acme","fields":'
             '[{"name":"id","type":"long"},{"name":"customer","type":"com.acme.Customer"}]}')
ADDRESS = ('{"type":"record","name":"Address","namespace":"com.acme","fields":'
           '[{"name":"city","type":"string"}]}')
CUSTOMER = ('{"type":"record","name":"Customer","namespace":"com.acme","fields":'
            '[{"name":"name","type":"string"},{"name":"address","type":"com.acme.Address"}]}')
PAYMENT_PROTO = ('syntax = "proto3";\npackage acme;\n\nmessage Payment {\n  string id = 1;\n'
                 '  double amount = 2;\n}\n')
EVENT_JSON = ('{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",'
              '"properties":{"kind":{"type":"string"}}}')
STAGING_ORDERS = ('{"type":"record","name":"StagingOrder","fields":'
                  '[{"name":"id","type":"string"}]}')
ROGUE = '"string"'


def history() -> list[tuple[bytes, bytes | None]]:
    """One registry's life, record by record (offset = position): registrations,
    evolution, references, a soft-deleted version, a subject soft- then hard-deleted
    (DELETE_SUBJECT, then tombstones and the subject's config deleted, as
    deleteSubject(permanent) writes them), a soft-deleted subject cleared, configs and
    modes, NOOPs, a second context, a PROTOBUF and a JSON schema."""
    return [
        (NOOP_KEY, None),                                                   # 0
        (subject_key("CONFIG"), config_value("FULL")),                      # 1 global
        (schema_key("orders-value", 1), schema_value("orders-value", 1, 1, ORDERS_V1)),
        (schema_key("orders-value", 2),                                     # 3
         schema_value("orders-value", 2, 2, ORDERS_V2, schema_type="AVRO")),
        (schema_key("address-value", 1),                                    # 4
         schema_value("address-value", 1, 3, ADDRESS, schema_type="AVRO")),
        (schema_key("customer-value", 1),                                   # 5
         schema_value("customer-value", 1, 4, CUSTOMER, schema_type="AVRO",
                      references=[("com.acme.Address", "address-value", 1)])),
        (schema_key("orders-value", 3),                                     # 6
         schema_value("orders-value", 3, 5, ORDERS_V3, schema_type="AVRO",
                      references=[("com.acme.Customer", "customer-value", 1)])),
        (schema_key("orders-value", 2),                                     # 7 soft delete
         schema_value("orders-value", 2, 2, ORDERS_V2, schema_type="AVRO", deleted=True)),
        (schema_key("payments-value", 1),                                   # 8
         schema_value("payments-value", 1, 6, PAYMENT_PROTO, schema_type="PROTOBUF")),
        (schema_key("events-value", 1),                                     # 9
         schema_value("events-value", 1, 7, EVENT_JSON, schema_type="JSON")),
        (subject_key("CONFIG", "events-value"), config_value("NONE", "events-value")),
        (subject_key("MODE"), mode_value("READWRITE")),                     # 11
        (subject_key("MODE", "events-value"), mode_value("READONLY", "events-value")),
        (schema_key("tmp-value", 1), schema_value("tmp-value", 1, 8, '"int"')),  # 13
        (schema_key("tmp-value", 2), schema_value("tmp-value", 2, 9, '"long"')),
        (subject_key("CONFIG", "tmp-value"), config_value("NONE", "tmp-value")),
        (subject_key("DELETE_SUBJECT", "tmp-value"),                        # 16 soft
         delete_subject_value("tmp-value", 2)),
        (schema_key("tmp-value", 2), None),                                 # 17 hard
        (schema_key("tmp-value", 1), None),
        (subject_key("CONFIG", "tmp-value"), None),                         # 19
        (schema_key("gone-value", 1), schema_value("gone-value", 1, 10, '"double"')),
        (subject_key("DELETE_SUBJECT", "gone-value"),                       # 21
         delete_subject_value("gone-value", 1)),
        (schema_key("old-value", 1), schema_value("old-value", 1, 11, '"float"')),
        (subject_key("DELETE_SUBJECT", "old-value"), delete_subject_value("old-value", 1)),
        (subject_key("CLEAR_SUBJECT", "old-value"), clear_subject_value("old-value")),
        (NOOP_KEY, None),                                                   # 25
        (context_key(".staging"), context_value(".staging")),
        (schema_key(":.staging:orders-value", 1),                           # 27
         schema_value(":.staging:orders-value", 1, 1, STAGING_ORDERS, schema_type="AVRO")),
        (schema_key("orders-copy-value", 1),                                # 28 same id
         schema_value("orders-copy-value", 1, 1, ORDERS_V1, schema_type="AVRO")),
        # 29: id 1 already names another schema in the default context: the registry's
        # reader ignores the record (KafkaStoreMessageHandler.validateUpdate)
        (schema_key("rogue-value", 1), schema_value("rogue-value", 1, 1, ROGUE)),
        (NOOP_KEY, None),                                                   # 30
    ]

"""The text Kafka's DumpLogSegments prints for a record with ``--offsets-decoder`` and
``--transaction-log-decoder``: ``key: {"type":"T","data":{...}}`` and ``payload:
{"version":"V","data":{...}}`` (``<DELETE>`` for a tombstone), Kafka's JSON converters'
output: fields in schema order, only those of the version, tagged fields only when they
differ from their default, bytes as base64, topic ids as Kafka's Uuid text. A classic
consumer group's member subscriptions and assignments are shown decoded (as Kafka does),
raw bytes when they do not decode; Kafka 4's group records (types 3..23) as their schema
tables (:mod:`.schemas`) read them.
"""
from __future__ import annotations

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.coordinator.records import (
    GROUP_METADATA,
    decode_assignment,
    decode_group_key,
    decode_group_value,
    decode_subscription,
    decode_txn_key,
    decode_txn_value,
    TRANSACTION_STATES,
)
from spark_kafkalog.format.coordinator.rows import to_json as _json
from spark_kafkalog.format.coordinator.schemas import SCHEMAS, json_data

__all__ = ["coordinator_record_text", "offsets_text", "transaction_log_text"]

_CONSUMER = "consumer"


def _key_text(rtype: int, data: dict) -> str:
    return _json({"type": str(rtype), "data": data})


def _value_text(version: int, data: dict) -> str:
    return _json({"version": str(version), "data": data})


def _consumer_members(value: dict) -> dict:
    """``value`` with each member's subscription and assignment decoded (kept as bytes
    when they do not decode), as Kafka shows a ``consumer`` group."""
    if value.get("protocolType") != _CONSUMER:
        return value
    members = []
    for m in value["members"]:
        m = dict(m)
        for name, decode in (("subscription", decode_subscription),
                             ("assignment", decode_assignment)):
            try:
                m[name] = decode(m[name])[1]
            except CoordinatorRecordError:
                pass
        members.append(m)
    return {**value, "members": members}


def coordinator_record_text(decoder: str, key: bytes | None, value: bytes | None,
                            offset: int, decode_key, decode_value
                            ) -> tuple[str | None, str | None]:
    """``(key text, payload text)`` of one coordinator record at ``offset``, framed as
    DumpLogSegments' CoordinatorRecordMessageParser frames it for every coordinator
    decoder (offsets, transaction log, share group state): a record without a key
    raises CoordinatorRecordError; a key type ``decode_key`` does not know (fields None)
    is skipped; a tombstone's payload is ``<DELETE>``; a key or value that does not
    decode is skipped with its reason. ``decode_key(key) -> (type, fields | None)``,
    ``decode_value(type, value) -> (version, JSON data)``; ``decoder`` names the decoder
    in the missing-key error ("offset topic", ...)."""
    if key is None:
        raise CoordinatorRecordError(f"Failed to decode message at offset {offset} using "
                                     f"{decoder} decoder (message had a missing key)",
                                     offset=offset)
    try:
        rtype, kdata = decode_key(key)
        if kdata is None:
            return f"Unknown record type {rtype} at offset {offset}, skipping.", None
        if value is None:
            return _key_text(rtype, kdata), "<DELETE>"
        version, vdata = decode_value(rtype, value)
        return _key_text(rtype, kdata), _value_text(version, vdata)
    except CoordinatorRecordError as e:         # UnknownVersion included
        return f"Error at offset {offset}, skipping. {e.reason}", None


def _group_value_json(rtype: int, value: bytes) -> tuple[int, dict]:
    version, vdata = decode_group_value(rtype, value)
    if rtype == GROUP_METADATA:
        vdata = _consumer_members(vdata)
    elif rtype in SCHEMAS:
        vdata = json_data(rtype, version, vdata)
    return version, vdata


def offsets_text(key: bytes | None, value: bytes | None, offset: int
                 ) -> tuple[str | None, str | None]:
    """``(key text, payload text)`` of a ``__consumer_offsets`` record at ``offset``;
    payload None where Kafka prints none (a record it skips). Raises
    CoordinatorRecordError for a record without a key (Kafka's tool stops there)."""
    return coordinator_record_text("offset topic", key, value, offset, decode_group_key,
                                   _group_value_json)


_TXN_PRINTED_TAGS = (("previousProducerId", -1), ("nextProducerId", -1))


def _txn_value_json(version: int, v: dict) -> dict:
    """TransactionLogValue in the order of Kafka's JSON converter; the v1 tagged fields
    only when they differ from their defaults."""
    out = {"producerId": v["producerId"]}
    flex = version >= 1
    for name, default in _TXN_PRINTED_TAGS:
        if flex and v[name] != default:
            out[name] = v[name]
    out["producerEpoch"] = v["producerEpoch"]
    if flex and v["nextProducerEpoch"] != -1:
        out["nextProducerEpoch"] = v["nextProducerEpoch"]
    out["transactionTimeoutMs"] = v["transactionTimeoutMs"]
    # Kafka 4.4's dump names the state (4.3 printed its number)
    out["transactionStatus"] = TRANSACTION_STATES.get(v["transactionStatus"],
                                                      v["transactionStatus"])
    out["transactionPartitions"] = v["transactionPartitions"]
    out["transactionLastUpdateTimestampMs"] = v["transactionLastUpdateTimestampMs"]
    out["transactionStartTimestampMs"] = v["transactionStartTimestampMs"]
    if flex and v["clientTransactionVersion"] != 0:
        out["clientTransactionVersion"] = v["clientTransactionVersion"]
    return out


def _txn_value(rtype: int, value: bytes) -> tuple[int, dict]:
    version, vdata = decode_txn_value(value)
    return version, _txn_value_json(version, vdata)


def transaction_log_text(key: bytes | None, value: bytes | None, offset: int
                         ) -> tuple[str | None, str | None]:
    """``(key text, payload text)`` of a ``__transaction_state`` record at ``offset``."""
    return coordinator_record_text("transaction log", key, value, offset, decode_txn_key,
                                   _txn_value)

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

__all__ = ["offsets_text", "transaction_log_text"]

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


def offsets_text(key: bytes | None, value: bytes | None, offset: int
                 ) -> tuple[str | None, str | None]:
    """``(key text, payload text)`` of a ``__consumer_offsets`` record at ``offset``;
    payload None where Kafka prints none (a record it skips). Raises
    CoordinatorRecordError for a record without a key (Kafka's tool stops there)."""
    if key is None:
        raise CoordinatorRecordError(f"Failed to decode message at offset {offset} using "
                                     "offset topic decoder (message had a missing key)",
                                     offset=offset)
    try:
        rtype, kdata = decode_group_key(key)
        if kdata is None:
            return f"Unknown record type {rtype} at offset {offset}, skipping.", None
        if value is None:
            return _key_text(rtype, kdata), "<DELETE>"
        version, vdata = decode_group_value(rtype, value)
        if rtype == GROUP_METADATA:
            vdata = _consumer_members(vdata)
        elif rtype in SCHEMAS:
            vdata = json_data(rtype, version, vdata)
        return _key_text(rtype, kdata), _value_text(version, vdata)
    except CoordinatorRecordError as e:
        return f"Error at offset {offset}, skipping. {e.reason}", None


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


def transaction_log_text(key: bytes | None, value: bytes | None, offset: int
                         ) -> tuple[str | None, str | None]:
    """``(key text, payload text)`` of a ``__transaction_state`` record at ``offset``."""
    if key is None:
        raise CoordinatorRecordError(f"Failed to decode message at offset {offset} using "
                                     "transaction log decoder (message had a missing key)",
                                     offset=offset)
    try:
        rtype, kdata = decode_txn_key(key)
        if kdata is None:
            return f"Unknown record type {rtype} at offset {offset}, skipping.", None
        if value is None:
            return _key_text(rtype, kdata), "<DELETE>"
        version, vdata = decode_txn_value(value)
        return _key_text(rtype, kdata), _value_text(version, _txn_value_json(version, vdata))
    except CoordinatorRecordError as e:         # UnknownVersion included
        return f"Error at offset {offset}, skipping. {e.reason}", None

"""What the coordinator tables share: the columns saying where a row came from, the
latest-per-key rule, and JSON as Kafka's JSON converters print it (bytes as base64)."""
from __future__ import annotations

import base64
import json

import pyarrow as pa

__all__ = ["ORIGIN", "keep", "origin", "to_json"]

ORIGIN = [
    pa.field("key_version", pa.int16()),
    pa.field("value_version", pa.int16()),     # null: a tombstone
    pa.field("deleted", pa.bool_()),
    pa.field("record_partition", pa.int32()),
    pa.field("record_offset", pa.int64()),
    pa.field("record_timestamp", pa.int64()),
]


def origin(kv: int, vv: int | None, part: int, off: int, ts: int) -> dict:
    return {"key_version": kv, "value_version": vv, "deleted": vv is None,
            "record_partition": part, "record_offset": off, "record_timestamp": ts}


def keep(store, key, row, latest: bool) -> None:
    """Every row in order (``latest`` False), else the newest per key (a deleted row
    removes the key; dict order follows the log)."""
    if not latest:
        store.append(row)
    elif row["deleted"]:
        store.pop(key, None)
    else:
        store.pop(key, None)
        store[key] = row


def _default(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def to_json(obj) -> str:
    """Compact JSON, non-ASCII kept, bytes as base64 (Kafka's converters' form)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=_default)

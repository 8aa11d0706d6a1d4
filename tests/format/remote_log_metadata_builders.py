"""``__remote_log_metadata`` record values built by hand from Kafka's schemas
(storage/src/main/resources/message/*.json, Kafka 4.4) and its serde framing (unsigned
varints: frame version 1, api key, version), independently of our decoder."""
from __future__ import annotations

import base64
import struct


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7


def uuid(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cstring(text: str) -> bytes:
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def cbytes(raw: bytes | None) -> bytes:
    return b"\x00" if raw is None else uvarint(len(raw) + 1) + raw


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


TOPIC_ID = "SZk1efI7Rb6_pHIyub9QNw"
SEGMENT_ID = "3UKK1ojgR1CID4TpbQIHtw"


def tip(topic="orders", topic_id=TOPIC_ID, partition=3) -> bytes:
    return cstring(topic) + uuid(topic_id) + struct.pack(">i", partition) + tags()


def segment_id(segment=SEGMENT_ID, **kw) -> bytes:
    return tip(**kw) + uuid(segment) + tags()


def frame(api_key: int, body: bytes, version: int = 0, frame_version: int = 1) -> bytes:
    return uvarint(frame_version) + uvarint(api_key) + uvarint(version) + body


def epochs(pairs) -> bytes:
    return uvarint(len(pairs) + 1) + b"".join(struct.pack(">iq", e, o) + tags()
                                               for e, o in pairs)


def segment(start=0, end=99, broker=1, max_ts=1_700_000_000_123, event_ts=1_700_000_000_456,
            leader_epochs=((0, 0),), size=4096, custom=None, state=0, txn_empty=None,
            extra_tags=None, segment=SEGMENT_ID, **kw) -> bytes:
    t = dict(extra_tags or {})
    if txn_empty is not None:
        t[0] = bytes([1 if txn_empty else 0])
    body = (segment_id(segment, **kw) + struct.pack(">qqiqq", start, end, broker, max_ts,
                                                     event_ts)
            + epochs(leader_epochs) + struct.pack(">i", size) + cbytes(custom)
            + struct.pack(">b", state) + tags(t))
    return frame(0, body)


def update(state=1, broker=1, event_ts=1_700_000_000_789, custom=None, segment=SEGMENT_ID,
           **kw) -> bytes:
    body = (segment_id(segment, **kw) + struct.pack(">iq", broker, event_ts) + cbytes(custom)
            + struct.pack(">b", state) + tags())
    return frame(1, body)


def partition_delete(state=0, broker=1, event_ts=1_700_000_001_000, **kw) -> bytes:
    return frame(2, tip(**kw) + struct.pack(">iqb", broker, event_ts, state) + tags())


def snapshot(start=0, end=9, broker=1, max_ts=5, event_ts=6, leader_epochs=((2, 0),),
             size=10, custom=None, state=1, txn_empty=None) -> bytes:
    t = {} if txn_empty is None else {0: bytes([1 if txn_empty else 0])}
    body = (uuid(SEGMENT_ID) + struct.pack(">qqiqq", start, end, broker, max_ts, event_ts)
            + epochs(leader_epochs) + struct.pack(">i", size) + cbytes(custom)
            + struct.pack(">b", state) + tags(t))
    return frame(3, body)

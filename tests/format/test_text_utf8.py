"""kafka-dump-log's payload text (``_text.dump_records``): well-formed UTF-8 is printed as
it is, anything else as Java's ``new String(bytes, UTF_8)``. The well-formedness check is
_bytes.h's (the decoder's own); the oracle here is Python's strict UTF-8 decoder, which
follows the same Unicode table (no overlongs, no surrogates, nothing past U+10FFFF)."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from spark_kafkalog.format import decode, encode
from spark_kafkalog.format._text import dump_records, java_string

# every boundary of the table: lead bytes, second-byte ranges of E0/ED/F0/F4, cut-offs
BOUNDARY = [
    b"", b"plain", b"\x7f", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80",
    b"\xdf\xbf", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xee\x80\x80", b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf",
    b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
    b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"caf\xc3\xa9", b"12345678\xc3\xa9",
    b"1234567\xe9", b"\xf0\x9f\x98\x80" * 3,
]


def _payloads(values: list[bytes]) -> list[bytes]:
    t = pa.table({"key": pa.array([None] * len(values), pa.binary()),
                  "value": pa.array(values, pa.binary())})
    batch = decode(encode(t))
    out = dump_records(batch, 0, batch.num_rows, b"CreateTime", 2, 0, -1, False, True, 0,
                       True)
    lines = out.split(b"\n")[:-1]
    assert len(lines) == len(values)
    return [line.split(b" payload: ", 1)[1] for line in lines]


def _expected(value: bytes) -> bytes:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return java_string(value).encode("utf-8", "surrogatepass")
    return value


def test_boundary_table():
    assert _payloads(BOUNDARY) == [_expected(v) for v in BOUNDARY]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=24).map(lambda b: b.replace(b"\n", b"\x85")),  # one line each
                min_size=1, max_size=8))
def test_random_bytes(values):
    assert _payloads(values) == [_expected(v) for v in values]

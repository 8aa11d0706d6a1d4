"""The encoder reuses its last large output once the caller has dropped it (no fresh
pages to fault in), and never one somebody still references."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafkalog.format import decode, encode
from spark_kafkalog.format.encode import output_reuse_kept, set_output_reuse_limit

ROWS = 70_000          # ~9 MiB uncompressed: above the 1 MiB reuse threshold
NOW = 1_700_000_000_000  # fixed write time: outputs of one table are then byte-equal


def table(seed: int, rows: int = ROWS, width: int = 120) -> pa.Table:
    vals = [(b"%08d" % (i * 7 + seed)) * (width // 8) for i in range(rows)]
    return pa.table({"key": [b"k%d" % (i + seed) for i in range(rows)], "value": vals})


@pytest.fixture(autouse=True)
def _limit():
    old = set_output_reuse_limit(256 << 20)
    yield
    set_output_reuse_limit(old)


def values(data) -> list:
    return decode(data).column("value").to_pylist()


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_dropped_output_is_reused_and_rewritten(compression):
    a, b = table(1), table(2)
    out = encode(a, compression=compression, max_batch_bytes=16384, threads=1, now_ms=NOW)
    first = id(out)
    assert len(out) >= 8 << 20 or compression != "none"
    del out
    again = encode(b, compression=compression, max_batch_bytes=16384, threads=1,
                   now_ms=NOW)
    if compression == "none":
        assert id(again) == first          # the same object, written again in place
    assert again == encode(b, compression=compression, max_batch_bytes=16384, threads=1,
                           now_ms=NOW)
    assert values(again) == b.column("value").to_pylist()


def test_outputs_of_a_few_mib_are_reused_smaller_ones_not_kept():
    """The Spark writer encodes each partition of a 32 MiB flush separately (outputs of
    a few MiB) and drops each before the next: those are reused; tiny ones are not kept."""
    small = table(1, rows=12_000)                        # ~1.6 MiB
    out = encode(small, max_batch_bytes=16384, threads=1, now_ms=NOW)
    assert (1 << 20) <= len(out) < (8 << 20)
    first = id(out)
    assert output_reuse_kept() == len(out)
    del out
    again = encode(table(2, rows=12_000), max_batch_bytes=16384, threads=1, now_ms=NOW)
    assert id(again) == first
    assert values(again) == table(2, rows=12_000).column("value").to_pylist()
    del again
    tiny = encode(table(3, rows=100), max_batch_bytes=16384, threads=1, now_ms=NOW)
    assert len(tiny) < (1 << 20) and output_reuse_kept() != len(tiny)


def test_output_still_referenced_is_never_touched():
    a, b = table(1), table(2)
    out = encode(a, max_batch_bytes=16384, now_ms=NOW)
    copy = bytes(out)
    view = memoryview(out)
    del out                                  # the memoryview still holds it
    other = encode(b, max_batch_bytes=16384, now_ms=NOW)
    assert bytes(view) == copy
    # kept by the caller: the next call writes a fresh object
    kept = encode(a, max_batch_bytes=16384, now_ms=NOW)
    nxt = encode(b, max_batch_bytes=16384, now_ms=NOW)
    assert kept == copy and nxt == other and id(nxt) != id(kept)


def test_reused_output_has_no_stale_hash():
    a, b = table(1), table(2)
    out = encode(a, max_batch_bytes=16384, now_ms=NOW)
    stale = hash(out)
    del out
    again = encode(b, max_batch_bytes=16384, now_ms=NOW)
    assert hash(again) == hash(bytes(again)) != stale


def test_smaller_output_shrinks_the_spare():
    out = encode(table(1), max_batch_bytes=16384, now_ms=NOW)
    size = len(out)
    del out
    small = encode(table(3, rows=ROWS - 5000), max_batch_bytes=16384, now_ms=NOW)
    assert len(small) < size
    assert values(small) == table(3, rows=ROWS - 5000).column("value").to_pylist()


def test_limit_zero_keeps_nothing():
    out = encode(table(1), max_batch_bytes=16384, now_ms=NOW)
    assert output_reuse_kept() == len(out)
    assert set_output_reuse_limit(0) == 256 << 20
    assert output_reuse_kept() == 0
    del out
    again = encode(table(2), max_batch_bytes=16384, now_ms=NOW)
    assert values(again) == table(2).column("value").to_pylist()
    assert output_reuse_kept() == 0
    with pytest.raises(ValueError):
        set_output_reuse_limit(-1)

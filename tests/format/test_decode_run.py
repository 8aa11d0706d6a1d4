"""decode_run(): offset-range filtering inside the kernel, whole-batch skipping (without
decompressing), aborted-batch positions, and position_base in errors."""
from __future__ import annotations

import array

import pyarrow as pa
import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.format import wire
from spark_kafkalog.format.decode import decode, decode_run, scan_headers
from tests.format.builders import (
    control_batch,
    flip,
    legacy_message,
    legacy_set,
    legacy_wrapper,
    patch,
    refresh_crc,
    rows,
    v2_simple,
)

TS = 1_700_000_000_000


def _log():
    """Offsets 0..39 across batch kinds: v2 plain, v2 gzip with a gap, v0 set, v1 wrapper,
    control marker, v2 zstd."""
    parts = [
        v2_simple([(i, TS + i, b"k", b"%d" % i) for i in range(10)]),
        v2_simple([(i, TS + i, b"k", b"%d" % i) for i in range(10, 20) if i != 15],
                  base_offset=10, base_timestamp=TS + 10, codec=wire.CODEC_GZIP),
        legacy_set([(i, None, b"k", b"%d" % i) for i in range(20, 25)], magic=0),
        legacy_wrapper(b"".join(legacy_message(i, b"k", b"%d" % (25 + i), magic=1,
                                               timestamp=TS) for i in range(5)),
                       offset=29, magic=1, codec=wire.CODEC_SNAPPY, timestamp=TS),
        control_batch(wire.CONTROL_COMMIT, base_offset=30),
        v2_simple([(i, TS + i, b"k", b"%d" % i) for i in range(31, 40)], base_offset=31,
                  base_timestamp=TS + 31, codec=wire.CODEC_ZSTD),
    ]
    return parts, b"".join(parts)


ALL = [i for i in range(40) if i not in (15, 30)]


@pytest.mark.parametrize("start,end", [(None, None), (0, 40), (5, 6), (9, 11), (14, 16),
                                       (18, 23), (24, 28), (29, 32), (35, None),
                                       (None, 3), (40, 50), (-5, 0), (12, 12)])
def test_offset_range(start, end):
    _, data = _log()
    got = [r.offset for r in rows(decode_run(data, start_offset=start, end_offset=end))]
    lo = -10 ** 9 if start is None else start
    hi = 10 ** 9 if end is None else end
    assert got == [o for o in ALL if lo <= o < hi]
    assert [int(v) for v in (r.value for r in rows(decode_run(
        data, start_offset=start, end_offset=end)))] == got


def test_range_result_is_a_valid_batch():
    _, data = _log()
    batch = decode_run(data, start_offset=3, end_offset=37)
    batch.validate(full=True)
    assert batch.num_rows == len([o for o in ALL if 3 <= o < 37])


def test_batches_outside_the_range_are_not_decompressed_or_checked():
    parts, _ = _log()
    ruined = parts[1][:wire.V2_HEADER_SIZE] + b"\x00" * (len(parts[1]) - wire.V2_HEADER_SIZE)
    data = b"".join([parts[0], ruined] + parts[2:])
    assert [r.offset for r in rows(decode_run(data, start_offset=20))] == \
        [o for o in ALL if o >= 20]
    assert [r.offset for r in rows(decode_run(data, end_offset=10))] == list(range(10))
    with pytest.raises(CorruptRecordError) as info:
        decode_run(data, start_offset=12, position_base=4096)
    assert (info.value.position, info.value.offset) == (4096 + len(parts[0]), 10)


def test_legacy_wrapper_below_start_is_skipped_without_decompressing():
    parts, _ = _log()
    wrapper = parts[3]
    # break the compressed value: only reading it would notice
    ruined = refresh_crc(patch(wrapper, len(wrapper) - 8, ">q", 0))
    data = b"".join(parts[:3] + [ruined] + parts[4:])
    assert [r.offset for r in rows(decode_run(data, start_offset=30))] == list(range(31, 40))
    with pytest.raises(CorruptRecordError):
        decode_run(data, start_offset=29)


def test_skip_positions_drop_whole_batches():
    parts, data = _log()
    pos = [0]
    for p in parts[:-1]:
        pos.append(pos[-1] + len(p))
    # drop the gzip batch and the v1 wrapper, as if they were aborted transactions
    skip = [pos[1], pos[3]]
    expected = [o for o in ALL if not (10 <= o < 20 or 25 <= o < 30)]
    for form in (skip, array.array("q", skip), pa.array(skip, pa.int64()),
                 pa.chunked_array([[pos[1]], [pos[3]]], pa.int64()), pa.array(skip, pa.int32()),
                 tuple(skip), pa.array([99, pos[1], pos[3]]).slice(1)):
        assert [r.offset for r in rows(decode_run(data, skip_positions=form))] == expected
    # positions that are not batch starts are ignored
    assert [r.offset for r in rows(decode_run(data, skip_positions=[1, 2, 10 ** 9]))] == ALL
    assert [r.offset for r in rows(decode_run(data, skip_positions=[]))] == ALL
    # skipped batches are not checked either
    bad = flip(data, pos[1] + 70)
    with pytest.raises(CorruptRecordError):
        decode(bad)
    assert [r.offset for r in rows(decode_run(bad, skip_positions=[pos[1]]))] == \
        [o for o in ALL if not 10 <= o < 20]


def test_skip_positions_with_range_and_base():
    parts, data = _log()
    scan = scan_headers(data, position_base=1000)
    positions = scan.headers.column("position").to_pylist()
    # one row per legacy message: the zstd batch is the last row
    assert len(positions) == 10
    got = decode_run(data, start_offset=5, end_offset=35,
                     skip_positions=[positions[0] - 1000, positions[-1] - 1000],
                     position_base=1000)
    assert [r.offset for r in rows(got)] == [o for o in ALL if 10 <= o < 31]


def test_skip_positions_must_be_sorted_and_not_null():
    from spark_kafkalog.errors import InvalidOptionError
    _, data = _log()
    with pytest.raises(InvalidOptionError, match="sorted"):
        decode_run(data, skip_positions=[500, 100])
    with pytest.raises(InvalidOptionError, match="null"):
        decode_run(data, skip_positions=pa.array([1, None]))


def test_errors_in_range_report_position_base():
    parts, data = _log()
    cut = data[:-5]
    with pytest.raises(CorruptRecordError, match="partial batch") as info:
        decode_run(cut, start_offset=0, position_base=123_456)
    assert info.value.position == 123_456 + len(data) - len(parts[-1])
    assert info.value.offset == 31

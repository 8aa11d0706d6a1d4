"""scan_runs(): many runs of batches scanned in one kernel call, checked run by run
against scan_header_rows() of the same bytes alone (the independent computation), with
torn, corrupt, empty and legacy runs among clean ones."""
from __future__ import annotations

import numpy as np
import pytest

from spark_kafkalog.format import scan_runs
from spark_kafkalog.format.decode import BATCH_HEADER_DTYPE, scan_header_rows
from tests.format.builders import (
    client_batch,
    control_batch,
    flip,
    legacy_set,
    legacy_wrapper,
    v2_simple,
)

TS = 1_700_000_000_000


def _runs() -> list[tuple[bytes, int]]:
    """(bytes, first offset hint) of runs of every kind."""
    clean = (v2_simple([(100 + i, TS + i, b"k", b"v" * i) for i in range(5)], base_offset=100)
             + v2_simple([(105, TS + 9, None, b"x")], base_offset=105)
             + control_batch(1, base_offset=106))
    client = client_batch("kafka-python", 2, 1, [(TS, b"a", b"b" * 50, [])] * 4,
                          base_offset=7) + client_batch("aiokafka", 2, 3,
                                                        [(TS, None, b"c", [])] * 3,
                                                        base_offset=11)
    legacy = legacy_set([(3, TS, b"k", b"v"), (4, TS + 1, None, b"w")], magic=1)
    wrapped = legacy_wrapper(legacy_set([(20, TS, b"k", b"v"), (21, TS, b"k", b"v")],
                                        magic=1), offset=21, magic=1, codec=1)
    torn = clean[:-7]
    corrupt = flip(clean, 40)                      # inside the first batch's CRC'd bytes
    return [(clean, 100), (client, 7), (b"", 0), (legacy, 3), (wrapped, 20), (torn, 100),
            (corrupt, 100), (b"\x00" * 30, 0), (clean[:5], 100), (clean, 100)]


@pytest.mark.parametrize("verify_crc", [True, False])
def test_each_run_as_scanned_alone(verify_crc):
    runs = _runs()
    pad = b"\xee" * 13                            # bytes between runs belong to no run
    data = bytearray()
    starts = []
    for run, _ in runs:
        data += pad
        starts.append(len(data))
        data += run
    got = scan_runs(bytes(data), starts, [len(r) for r, _ in runs], [h for _, h in runs],
                    verify_crc=verify_crc)
    assert got.headers.dtype == BATCH_HEADER_DTYPE
    assert len(got.counts) == len(got.ends) == len(got.problems) == len(runs)
    at = 0
    for i, (run, hint) in enumerate(runs):
        alone = scan_header_rows(run, verify_crc=verify_crc, first_offset_hint=hint)
        n = int(got.counts[i])
        assert n == len(alone.headers), i
        for name in BATCH_HEADER_DTYPE.names:       # field by field (rows are padded)
            assert (got.headers[name][at:at + n] == alone.headers[name]).all(), (i, name)
        assert got.ends[i] == alone.end, i
        assert got.problems[i] == (alone.problem is not None), i
        at += n
    assert at == len(got.headers)
    # the kinds the runs were built to be
    assert list(got.problems) == [0, 0, 0, 0, 0, 1, int(verify_crc), 1, 1, 0]


def test_no_runs_and_bad_arguments():
    got = scan_runs(b"", [], [], [])
    assert len(got.headers) == 0 and len(got.counts) == 0
    data = v2_simple([(0, TS, b"k", b"v")])
    with pytest.raises(ValueError, match="outside the buffer"):
        scan_runs(data, [0], [len(data) + 1], [0])
    with pytest.raises(ValueError, match="outside the buffer"):
        scan_runs(data, [-1], [2], [0])
    with pytest.raises(ValueError, match="one entry per run"):
        scan_runs(data, [0, 0], [1], [0, 0])


def test_many_runs_grow_the_rows():
    runs = [v2_simple([(o, TS, b"k", b"v")], base_offset=o) for o in range(300)]
    data = b"".join(runs)
    starts = np.cumsum([0] + [len(r) for r in runs[:-1]])
    got = scan_runs(data, starts, [len(r) for r in runs], np.arange(300))
    assert list(got.counts) == [1] * 300 and not got.problems.any()
    assert list(got.headers["base_offset"]) == list(range(300))
    assert list(got.ends) == [len(r) for r in runs]

"""The compiled kernels read and write batch headers with _wire.pxd's constants; they
must be wire.py's, name for name (wire.py is where the layout is written down)."""
from __future__ import annotations

import pytest

from spark_kafkalog.format import _decode, _encode, wire

#: wire.py's integer constants that are not part of the byte layout
NOT_LAYOUT = {"DEFAULT_MAX_DECOMPRESSED"}


def _wire_ints() -> dict[str, int]:
    return {name: value for name, value in vars(wire).items()
            if name.isupper() and type(value) is int and name not in NOT_LAYOUT}


@pytest.mark.parametrize("kernel", [_decode, _encode], ids=["_decode", "_encode"])
def test_kernel_layout_is_wire_py(kernel):
    compiled = kernel.WIRE_LAYOUT
    assert compiled == _wire_ints()


def test_wire_py_layout_is_self_consistent():
    # the positions are those of the v2 header struct and the legacy structs
    assert wire.V2_HEADER.size == wire.V2_HEADER_SIZE == wire.V2_RECORDS_POS
    assert wire.V2_MIN_BATCH_LENGTH == wire.V2_HEADER_SIZE - wire.LOG_OVERHEAD
    assert wire.LEGACY_V0_HEADER.size == wire.LEGACY_V0_KEY_POS
    assert wire.LEGACY_V1_HEADER.size == wire.LEGACY_V1_KEY_POS

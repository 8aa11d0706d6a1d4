"""Shared fixtures for the log-layer tests."""
from __future__ import annotations

from pathlib import Path

import pytest

#: the real broker files (never copied into the repo; see their MANIFEST.md)
REAL_BROKER = (Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
               / "real-broker").resolve()


@pytest.fixture(scope="session")
def real_broker() -> Path:
    if not REAL_BROKER.is_dir():
        pytest.skip(f"real broker fixtures not found at {REAL_BROKER}")
    return REAL_BROKER


@pytest.fixture
def settle_waits(monkeypatch) -> list:
    """The waits a read makes before it lists a topic again (read/state.py's settle
    loop), recorded instead of slept."""
    from spark_kafkalog.log.read import state

    waits: list = []
    monkeypatch.setattr(state, "_pause", waits.append)
    return waits

"""Shared fixtures for the log-layer tests."""
from __future__ import annotations

import pytest

#: the real broker files (never copied into the repo; see their MANIFEST.md); the
#: ``real_broker`` fixture is tests/conftest.py's (a skip, but a failure under CI)
from tests.conftest import REAL_BROKER  # noqa: F401


@pytest.fixture
def settle_waits(monkeypatch) -> list:
    """The waits a read makes before it lists a topic again (read/state.py's settle
    loop), recorded instead of slept."""
    from spark_kafkalog.log.read import state

    waits: list = []
    monkeypatch.setattr(state, "_pause", waits.append)
    return waits

"""The test suite's own rules (issue 32, item 7): no absolute paths of one machine, no
empty ``match=``, and real-broker fixtures that are missing fail under CI."""
from __future__ import annotations

import re

import pytest

import tests.conftest as conftest

TESTS = conftest.REPO / "tests"
#: a string literal that starts with a home or work dir of some machine
_ABSOLUTE = re.compile(r"""["'](/(?:work|home|Users|root|mnt|srv|opt/[a-z])[^"']*)["']""")
_EMPTY_MATCH = re.compile(r"""match\s*=\s*r?(""|'')""")


def _sources():
    return sorted(p for p in TESTS.rglob("*.py") if p.name != "test_tests_can_fail.py")


def test_no_absolute_paths_in_tests():
    found = [f"{p.relative_to(conftest.REPO)}:{n}: {m.group(1)}"
             for p in _sources() for n, line in enumerate(p.read_text().splitlines(), 1)
             for m in _ABSOLUTE.finditer(line)]
    assert not found, found


def test_no_empty_match():
    found = [f"{p.relative_to(conftest.REPO)}:{n}"
             for p in _sources() for n, line in enumerate(p.read_text().splitlines(), 1)
             if _EMPTY_MATCH.search(line) or re.search(r"_err\([^,]+,\s*(\"\"|'')", line)]
    assert not found, found


def test_missing_fixtures_skip_locally_and_fail_under_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "REAL_BROKER", tmp_path / "missing")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="real broker fixtures not found.*CI"):
        conftest.require_real_broker()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="real broker fixtures not found"):
        conftest.require_real_broker()


def test_the_fixtures_are_found_from_the_repo_root():
    assert conftest.REAL_BROKER.name == "real-broker"
    assert any(conftest.REAL_BROKER == (d / "shared" / "fixtures" / "real-broker").resolve()
               for d in conftest.REPO.parents) or not conftest.REAL_BROKER.exists()

"""``kafkalog cat``, ``inspect`` and ``verify`` given a ``--remote-storage`` one level above
the remote tier's root (the broker's ``rsm.config.dir``, above LocalTieredStorage's
``kafka-tiered-storage``): ``cat`` refuses it as a usage error naming the directory that
holds the segments; ``inspect`` and ``verify`` say so in one line each instead of showing
the tier as fine or listing every object as missing. Both tiers built by hand
(tests/log/tiered_builder.py)."""
from __future__ import annotations

import io
import json

import pytest

from spark_kafkalog.cli import main

from .log.tiered_builder import TOPIC, build, tier


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([*map(str, argv)], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def tiered(tmp_path):
    p, full, bases = build(tmp_path)
    rsm = tmp_path / "rsm"
    data, remote = tier(tmp_path, p, full, bases, remote=rsm / "kafka-tiered-storage")
    return data, str(rsm), remote


def _wrong(rsm: str) -> str:
    return (f"--remote-storage: {rsm} holds no object of topic 'orders' (__remote_log_metadata "
            f"lists 3 remote segment(s) of it")


def test_cat_refuses_the_wrong_root_as_usage(tiered):
    data, rsm, remote = tiered
    for extra in ((), ("-E",)):
        code, out, err = run("cat", data, "-t", TOPIC, "--remote-storage", rsm, *extra)
        assert (code, out) == (2, "")
        (line,) = err.splitlines()
        assert line.startswith(f"kafkalog cat: error: {_wrong(rsm)}"), line
        assert line.endswith(f"did you mean --remote-storage {rsm}/kafka-tiered-storage?")
    code, out, _ = run("cat", data, "-t", TOPIC, "--remote-storage", remote, "-e")
    assert code == 0 and len(out.splitlines()) > 20


def test_inspect_and_verify_say_the_root_is_wrong(tiered):
    data, rsm, remote = tiered
    code, out, _ = run("inspect", data, "--topic", TOPIC, "--remote-storage", rsm)
    assert code == 0
    lines = [x for x in out.splitlines() if "WRONG ROOT" in x]
    assert len(lines) == 1 and _wrong(rsm) in lines[0], out
    assert f"did you mean --remote-storage {rsm}/kafka-tiered-storage?" in lines[0]
    code, out, _ = run("inspect", data, "--topic", TOPIC, "--remote-storage", rsm, "--json")
    assert json.loads(out)["remote_root_error"].startswith(_wrong(rsm))
    code, out, _ = run("inspect", data, "--topic", TOPIC, "--remote-storage", remote)
    assert "WRONG ROOT" not in out
    code, out, _ = run("verify", data, "--topic", TOPIC, "--remote-storage", rsm, "--json")
    found = json.loads(out)
    remote_findings = [f for f in found["findings"] if f["kind"] == "remote"]
    assert code == 1 and len(remote_findings) == 1, found
    assert remote_findings[0]["message"].startswith(_wrong(rsm))

"""Coverage-guided fuzzing (atheris over libFuzzer, kernels built with ASan + UBSan by
``fuzz/build_kernels.py``): every target of ``fuzz/targets.py`` -- the compiled decode,
scan and packed-segment kernels and the parsers of every file beside the ``.log`` --
runs briefly from its seeds (the real-broker fixtures), and every kept finding replays.

The smoke run needs clang (``make fuzz-kernels`` installs it and builds the kernels);
under CI a missing build fails instead of skipping. Long runs: ``fuzz/run.py --all
--seconds 600``.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format.decode import scan_header_rows
from tests.conftest import REAL_BROKER, REPO

sys.path.insert(0, str(REPO / "fuzz"))
import run as fuzz_run  # noqa: E402
import targets  # noqa: E402

#: the smoke run's whole budget, shared by the targets
SMOKE_SECONDS = 60


def _regressions():
    for target_dir in sorted((REPO / "fuzz" / "regressions").iterdir()):
        for case in sorted(target_dir.iterdir()):
            yield pytest.param(target_dir.name, case, id=f"{target_dir.name}/{case.name[:14]}")


@pytest.mark.parametrize("target,case", list(_regressions()))
def test_finding_stays_fixed(target, case):
    """Each kept finding, through the ordinary build: a result or our own error."""
    targets.TARGETS[target](case.read_bytes())


def test_every_target_has_seeds():
    if not REAL_BROKER.is_dir():
        pytest.fail(f"the real-broker fixtures are missing ({REAL_BROKER})")
    for name in targets.TARGETS:
        assert next(iter(targets.seeds(name)), None) is not None, name


def test_negative_first_offset_hint_is_an_option_error():
    """Found by the scan target: a hint of -2**63 overflowed ``hint - 1`` (UBSan)."""
    with pytest.raises(InvalidOptionError, match="first_offset_hint"):
        scan_header_rows(b"", first_offset_hint=-(1 << 63))
    with pytest.raises(InvalidOptionError, match="first_offset_hint"):
        scan_header_rows(b"", first_offset_hint=-1)


def test_instrumented_comparisons_do_not_leak(monkeypatch):
    """atheris 3.0.0's ``_trace_cmp`` keeps one reference to every comparison's result:
    the index parsers' numpy comparisons leaked an array per input until libFuzzer's RSS
    limit stopped the time_index and txn_index runs. ``run.py`` drops that reference."""
    import gc

    atheris = pytest.importorskip("atheris")
    monkeypatch.setattr(atheris, "_trace_cmp", atheris._trace_cmp)   # restored after

    class Result:
        pass

    class Operand:
        def __ge__(self, other):
            return Result()

    def compare(a, b):
        return a >= b

    fuzz_run._plug_trace_cmp_leak(atheris)
    compare = atheris.instrument_func(compare)
    gc.collect()
    before = sum(isinstance(o, Result) for o in gc.get_objects())
    for _ in range(100):
        assert isinstance(compare(Operand(), Operand()), Result)
    assert compare(1, 2) is False and compare("b", "a") is True
    gc.collect()
    assert sum(isinstance(o, Result) for o in gc.get_objects()) == before


def _instrumented_build_ready() -> bool:
    import build_kernels

    return shutil.which("clang") is not None and bool(build_kernels.kernels()) \
        and build_kernels.up_to_date()


@pytest.mark.slow
def test_guided_smoke_run(tmp_path, monkeypatch):
    if not _instrumented_build_ready():
        reason = "no instrumented kernels: run `make fuzz-kernels` (needs clang)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.setattr(fuzz_run, "CORPUS", tmp_path / "corpus")
    monkeypatch.setattr(fuzz_run, "FINDINGS", tmp_path / "findings")
    per_target = max(2, SMOKE_SECONDS // len(targets.TARGETS))
    failed = []
    for name in sorted(targets.TARGETS):
        out = fuzz_run.run(name, per_target)
        if out["returncode"] != 0 or out["execs"] == 0 or out["edges"] == 0:
            failed.append(f"{name}: exit {out['returncode']}, {out['execs']} executions, "
                          f"{out['edges']} edges\n{out['log'][-3000:]}")
    assert not failed, "\n\n".join(failed)


def test_long_run_goes_in_restarted_chunks(tmp_path, monkeypatch):
    """A run longer than ``chunk_seconds`` restarts the fuzzing process per chunk on the
    same corpus (txn_index's process grows until the RSS limit within 10 minutes):
    executions summed, edges of the last chunk, peak RSS the largest, and a chunk with a
    finding ends the run. No fuzzing here: the child processes are stand-ins."""
    import subprocess
    from types import SimpleNamespace

    import build_kernels

    monkeypatch.setattr(build_kernels, "build", lambda: None)
    monkeypatch.setattr(fuzz_run, "_preload", lambda: {})
    monkeypatch.setattr(fuzz_run, "CORPUS", tmp_path / "corpus")
    monkeypatch.setattr(fuzz_run, "FINDINGS", tmp_path / "findings")
    (tmp_path / "corpus" / "txn_index").mkdir(parents=True)
    (tmp_path / "corpus" / "txn_index" / "seed").write_bytes(b"x")
    calls = []

    def child(cmd, **kwargs):
        calls.append(cmd)
        n = len(calls)
        if n == 3 and crash:
            (tmp_path / "findings" / "txn_index" / "crash-1").write_bytes(b"boom")
        log = (f"#1 INITED cov: {100 * n} ft: 1 corp: 1/1b exec/s: 0 rss: {50 * n}Mb\n"
               f"stat::number_of_executed_units: {1000 * n}\n"
               f"stat::peak_rss_mb: {[0, 300, 700, 500][n]}\n")
        return SimpleNamespace(stdout="", stderr=log, returncode=1 if n == 3 and crash else 0)

    monkeypatch.setattr(subprocess, "run", child)
    crash = False
    out = fuzz_run.run("txn_index", 250, chunk_seconds=120)
    times = [next(a for a in c if a.startswith("-max_total_time=")) for c in calls]
    assert times == ["-max_total_time=120", "-max_total_time=120", "-max_total_time=10"]
    assert all(c[-1] == str(tmp_path / "corpus" / "txn_index") for c in calls)
    assert (out["chunks"], out["execs"], out["edges"], out["peak_rss_mb"],
            out["findings"], out["returncode"]) == (3, 6000, 300, 700, 0, 0)
    assert "-rss_limit_mb=3072" in calls[0]

    calls.clear()
    out = fuzz_run.run("txn_index", 100, chunk_seconds=120)      # short: one chunk
    assert len(calls) == 1 and "-max_total_time=100" in calls[0] and out["chunks"] == 1

    calls.clear()
    crash = True
    out = fuzz_run.run("txn_index", 600, chunk_seconds=120)
    assert len(calls) == 3 and out["chunks"] == 3
    assert (out["findings"], out["returncode"], out["execs"]) == (1, 1, 6000)

"""Run one fuzz target under atheris (libFuzzer) with the kernels built by
``build_kernels.py`` (edge coverage, ASan, UBSan) and the package's Python instrumented
for coverage.

    .venv/bin/python fuzz/run.py decode_buffer --seconds 600      # a long run
    .venv/bin/python fuzz/run.py --all --seconds 5                # every target briefly
    .venv/bin/python fuzz/run.py journal --replay fuzz/regressions/journal

The corpus lives in ``build/fuzz-corpus/<target>/`` (seeded from ``targets.seeds``);
a crashing input is written to ``build/fuzz-findings/<target>/``. Keep every fixed
finding in ``fuzz/regressions/<target>/``: ``--replay`` (and the test suite) runs them.
Each run prints one summary line: target, executions, edges covered, peak RSS, chunks,
findings. A run longer than ``--chunk-seconds`` (120) restarts the fuzzing process per
chunk, continuing from the same corpus.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO / "build" / "fuzz-corpus"
FINDINGS = REPO / "build" / "fuzz-findings"
REGRESSIONS = HERE / "regressions"


def _child(target: str, libfuzzer_args: list[str]) -> None:
    """Inside the instrumented process: the instrumented package shadows the source
    tree's, and the package's Python is instrumented for coverage as it is imported."""
    os.environ.pop("LD_PRELOAD", None)       # not for the symbolizer ASan may start
    import importlib.util

    import atheris

    sys.path.insert(0, str(REPO))
    sys.path.insert(1, str(HERE))
    import build_kernels

    instrumented = build_kernels.kernels()

    class Instrumented:
        """Loads the instrumented kernels in place of the source tree's."""
        @staticmethod
        def find_spec(name, path=None, target=None):
            where = instrumented.get(name)
            return importlib.util.spec_from_file_location(name, where) if where else None

    sys.meta_path.insert(0, Instrumented)
    _plug_trace_cmp_leak(atheris)
    with atheris.instrument_imports(include=["spark_kafkalog"]):
        import spark_kafkalog.format.decode  # noqa: F401  (kernels and their Python)
        import spark_kafkalog.log.files  # noqa: F401
        import spark_kafkalog.log.files.journal  # noqa: F401
        import spark_kafkalog.format.coordinator.records  # noqa: F401
        import spark_kafkalog.typed.avro  # noqa: F401  (the Avro kernel and its program)
    import targets

    fn = targets.TARGETS[target]
    atheris.Setup([sys.argv[0], *libfuzzer_args], fn)
    atheris.Fuzz()


def _plug_trace_cmp_leak(atheris) -> bool:
    """atheris 3.0.0's native ``_trace_cmp`` (which every instrumented comparison calls)
    returns its result with one reference too many, so every comparison's result lives
    forever: harmless for ``True``/``False``, but a parser comparing numpy arrays
    (``rel >= 0`` in the index parsers) leaks a fresh array per comparison per input:
    50,000 calls of the instrumented time_index / txn_index / offset_index target grew
    the process by 56 / 56 / 88 MB (flat with the wrapper), and the 10-minute runs of
    time_index and txn_index hit libFuzzer's RSS limit. When a probe shows the extra
    reference, the comparison goes through a wrapper that drops it (the tracing itself
    is unchanged); a fixed atheris is left alone. Returns whether the wrapper is in
    place."""
    import ctypes

    native = atheris._trace_cmp

    class Probe:
        def __lt__(self, other):
            return []                       # a fresh object, one reference: the caller's

    result = native(Probe(), Probe(), 0, 0, False)
    if sys.getrefcount(result) - 2 <= 0:    # 2: ``result`` and getrefcount's argument
        return False
    decref = ctypes.pythonapi.Py_DecRef
    decref.argtypes, decref.restype = [ctypes.py_object], None
    decref(result)

    def _trace_cmp(left, right, opid, idx, left_is_const):
        out = native(left, right, opid, idx, left_is_const)
        decref(out)                         # the reference native added; ``out`` keeps one
        return out

    atheris._trace_cmp = _trace_cmp         # the instrumented bytecode looks it up per call
    return True


def _preload() -> dict[str, str]:
    """The environment of the instrumented process: ASan + libFuzzer preloaded (see
    ``build_kernels.fuzz_runtime``); every sanitizer report aborts the run."""
    sys.path.insert(0, str(HERE))
    import build_kernels

    return {"LD_PRELOAD": str(build_kernels.fuzz_runtime()),
            "ASAN_OPTIONS": "detect_leaks=0:handle_segv=1:allocator_may_return_null=0",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "PYTHONMALLOC": "malloc"}


def _seed(target: str) -> Path:
    sys.path.insert(0, str(HERE))
    import targets

    corpus = CORPUS / target
    corpus.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        for data in targets.seeds(target):
            (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return corpus


#: a long run goes in restarted chunks of at most this many seconds (--chunk-seconds)
CHUNK_SECONDS = 120


def run(target: str, seconds: int, replay: Path | None = None, jobs: int = 1,
        chunk_seconds: int = CHUNK_SECONDS) -> dict:
    """Fuzz ``target`` for ``seconds`` (or run each file of ``replay`` once); returns
    ``{"target", "execs", "edges", "peak_rss_mb", "findings", "returncode", "chunks",
    "chunk_stats", "log"}``.

    A run longer than ``chunk_seconds`` goes in chunks: a fresh instrumented process per
    chunk, each continuing from the same corpus directory (libFuzzer adds its new inputs
    there, so the coverage carries over). The txn_index target's process grows steadily
    (~5 MB/s, cause unknown; a plain interpreter running it stays flat) and would reach
    the RSS limit within a 10-minute run; restarting keeps each process well under it.
    Executions and findings are summed over the chunks, the edges are the last chunk's,
    the peak RSS is the largest chunk's; a chunk that fails or writes a finding ends the
    run."""
    sys.path.insert(0, str(HERE))
    import build_kernels
    import targets

    build_kernels.build()
    findings = FINDINGS / target
    findings.mkdir(parents=True, exist_ok=True)
    before = set(findings.iterdir())
    args = [f"-max_len={targets.MAX_LEN}", "-rss_limit_mb=3072", "-timeout=20",
            f"-artifact_prefix={findings}/", "-print_final_stats=1"]
    if replay is not None:
        files = sorted(str(p) for p in replay.iterdir()) if replay.is_dir() else [str(replay)]
        if not files:
            return {"target": target, "execs": 0, "edges": 0, "peak_rss_mb": 0,
                    "findings": 0, "returncode": 0, "chunks": 0, "chunk_stats": [],
                    "log": ""}
        plan = [["-runs=1", *files]]
    else:
        corpus = str(_seed(target))
        step = max(1, chunk_seconds)
        plan = [[f"-max_total_time={min(step, seconds - start)}", corpus]
                for start in range(0, max(seconds, 1), step)]
    env = dict(os.environ, **_preload())
    total = {"target": target, "execs": 0, "edges": 0, "peak_rss_mb": 0, "findings": 0,
             "returncode": 0, "chunks": 0, "chunk_stats": [], "log": ""}
    logs = []
    for number, extra in enumerate(plan, 1):
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                               target, "--", *args, *extra], env=env, capture_output=True,
                              text=True, errors="replace", cwd=REPO)
        log = proc.stdout + proc.stderr
        logs.append(log if len(plan) == 1 else f"--- chunk {number}/{len(plan)} ---\n{log}")
        execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
        peak = (re.findall(r"stat::peak_rss_mb:\s*(\d+)", log)
                or re.findall(r"\brss: (\d+)Mb", log))
        edges = re.findall(r"\bcov: (\d+)", log)
        chunk = {"execs": int(execs[-1]) if execs else 0,
                 "edges": int(edges[-1]) if edges else 0,
                 "peak_rss_mb": max(map(int, peak)) if peak else 0,
                 "returncode": proc.returncode}
        found = len(set(findings.iterdir()) - before)
        chunk["findings"] = found - total["findings"]
        total["chunk_stats"].append(chunk)
        total.update(execs=total["execs"] + chunk["execs"], edges=chunk["edges"],
                     peak_rss_mb=max(total["peak_rss_mb"], chunk["peak_rss_mb"]),
                     findings=found, returncode=proc.returncode, chunks=number)
        if len(plan) > 1:
            print(f"{target} chunk {number}/{len(plan)}: {chunk['execs']:,} executions, "
                  f"{chunk['edges']:,} edges, peak rss {chunk['peak_rss_mb']:,} MB, "
                  f"{chunk['findings']} findings, exit {proc.returncode}",
                  file=sys.stderr, flush=True)
        if proc.returncode != 0 or chunk["findings"]:
            break
    total["log"] = "".join(logs)
    return total


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[3:])
        return 0
    sys.path.insert(0, str(HERE))
    import targets

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", choices=sorted(targets.TARGETS))
    ap.add_argument("--all", action="store_true", help="every target in turn")
    ap.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    ap.add_argument("--chunk-seconds", type=int, default=CHUNK_SECONDS,
                    help="restart the fuzzing process after this many seconds, continuing "
                         f"from the same corpus (default {CHUNK_SECONDS})")
    ap.add_argument("--replay", type=Path, help="run these inputs once each")
    ap.add_argument("--json", action="store_true", help="print the summaries as JSON")
    args = ap.parse_args(argv)
    names = sorted(targets.TARGETS) if args.all or not args.target else [args.target]
    failed = 0
    for name in names:
        replay = args.replay
        if replay is None and args.all and args.seconds == 0:
            replay = REGRESSIONS / name
        out = run(name, args.seconds, replay, chunk_seconds=args.chunk_seconds)
        ok = out["returncode"] == 0
        failed += not ok
        summary = {k: v for k, v in out.items() if k not in ("log", "chunk_stats")}
        print(json.dumps(summary) if args.json else
              f"{name}: {out['execs']:,} executions, {out['edges']:,} edges, "
              f"peak rss {out['peak_rss_mb']:,} MB, {out['chunks']} chunks, "
              f"{'ok' if ok else 'FINDING (exit %d)' % out['returncode']}", flush=True)
        if not ok:
            print(out["log"][-6000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

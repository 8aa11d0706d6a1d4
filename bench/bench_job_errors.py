"""How the jobs fail on bad input: exit status, the one-line reason, and how long it takes.

    .venv/bin/python bench/bench_job_errors.py [--keep DIR]

Builds its inputs in a temp dir (a 2000-record, 2-partition sample log, one export of it,
copies of the log: a destination, one with a corrupted first batch, one whose ``.lock`` a
second process holds as a running broker would), then runs each bad-input case as a
subprocess ``kafkalog job NAME ...`` and prints a Markdown table: exit status (1 data,
2 bad input, 3 lock held, 4 other), wall seconds from start to exit, stderr line count,
the last stderr line, and whether the destination (a tree hash: relative path -> sha256;
"absent" stays absent) is byte-identical afterwards.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv" / "bin"
KAFKALOG = str(VENV / "kafkalog")
ENV = dict(os.environ, PYSPARK_PYTHON=str(VENV / "python"),
           PYSPARK_DRIVER_PYTHON=str(VENV / "python"))

# A broker holds an exclusive POSIX record lock on <logdir>/.lock (Kafka's
# FileChannel.tryLock); the jobs probe it with fcntl.lockf (LOCK_SH), see
# spark_kafkalog/log/files/lock.py. A flock() would not conflict with that probe on Linux.
HOLDER = """import fcntl, sys, time
f = open(sys.argv[1], "a+")
fcntl.lockf(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(3600)
"""

# (job, bad input, args with {PLACEHOLDERS}, destination placeholder or None)
CASES = [
    ("export_parquet", "missing --path", "--output {FRESH}", "FRESH"),
    ("export_parquet", "unknown topic", "--path {LOG} --topic nosuch --output {FRESH}",
     "FRESH"),
    ("export_parquet", "output exists, --mode errorifexists",
     "--path {LOG} --output {EXPORT} --mode errorifexists", "EXPORT"),
    ("export_parquet", "Parquet codec brotli (over an existing output)",
     "--path {LOG} --output {EXPORT} --mode overwrite --parquet-compression brotli",
     "EXPORT"),
    ("export_parquet", "--from after --to",
     "--path {LOG} --output {FRESH} --from 2024-01-03T00:00:00Z --to 2024-01-01T00:00:00Z",
     "FRESH"),
    ("export_parquet", "unparsable --from",
     "--path {LOG} --output {FRESH} --from yesterday", "FRESH"),
    ("export_parquet", "bad --starting-offsets JSON",
     "--path {LOG} --output {FRESH} --starting-offsets {{events:", "FRESH"),
    ("export_parquet", "corrupt first batch", "--path {CORRUPT} --output {FRESH}", "FRESH"),
    ("import_files", "topic exists, --mode errorifexists",
     "--input {EXPORT} --output {DEST} --topic events --mode errorifexists", "DEST"),
    ("import_files", "--partitions 0",
     "--input {EXPORT} --output {FRESH} --topic t2 --partitions 0", "FRESH"),
    ("import_files", "destination .lock held",
     "--input {EXPORT} --output {LOCKED} --topic t2", "LOCKED"),
    ("import_files", "missing --input", "--input {TMP}/nope --output {FRESH} --topic t2",
     "FRESH"),
    ("copy_topic", "destination topic exists",
     "--path {LOG} --output {DEST} --topic events", "DEST"),
    ("copy_topic", "destination .lock held",
     "--path {LOG} --output {LOCKED} --topic events --rename events=e2", "LOCKED"),
    ("copy_topic", "rename to __consumer_offsets",
     "--path {LOG} --output {FRESH} --topic events --rename events=__consumer_offsets",
     "FRESH"),
    ("copy_topic", "--compression-type brotli",
     "--path {LOG} --output {FRESH} --topic events --compression-type brotli", "FRESH"),
    ("copy_topic", "--partitions 0",
     "--path {LOG} --output {FRESH} --topic events --partitions 0", "FRESH"),
    ("copy_topic", "bad --ending-offsets JSON",
     "--path {LOG} --output {FRESH} --topic events --ending-offsets 7", "FRESH"),
    ("copy_topic", "corrupt first batch",
     "--path {CORRUPT} --output {FRESH} --topic events", "FRESH"),
    ("compact", "unknown topic", "--path {DEST} --topic nosuch", "DEST"),
    ("compact", "log dir .lock held", "--path {LOCKED} --topic events --force", "LOCKED"),
    ("compact", "unknown --set name", "--path {DEST} --topic events --set bogus=1", "DEST"),
    ("compact", "partition not in the topic", "--path {DEST} --topic events --partition 7",
     "DEST"),
    ("compact", "corrupt first batch", "--path {CORRUPT} --topic events --force",
     "CORRUPT"),
    ("retention", "negative --retention-ms", "--path {DEST} --retention-ms -5", "DEST"),
    ("retention", "--config-file not JSON", "--path {DEST} --config-file {BADJSON}",
     "DEST"),
    ("retention", "log dir .lock held", "--path {LOCKED} --retention-ms 1", "LOCKED"),
    ("log_report", "missing --path dir", "--path {TMP}/nope", None),
    ("log_report", "unknown flag", "--path {LOG} --bogus", None),
    ("consumer_offsets", "no __consumer_offsets in log",
     "--path {LOG} --output {FRESH}", "FRESH"),
    ("consumer_offsets", "missing required --output", "--path {LOG}", None),
]


def tree_hash(root: Path) -> dict[str, str] | None:
    """relative path -> sha256 of every file under ``root`` ("dir" for a directory);
    None when ``root`` does not exist."""
    if not root.exists():
        return None
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def job(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([KAFKALOG, "job", name, *args], env=ENV, check=check, text=True,
                          capture_output=True, stdin=subprocess.DEVNULL)


def corrupt_first_batch(log_file: Path) -> None:
    """Flip bytes inside the CRC-covered part (attributes .. end) of the first batch."""
    data = bytearray(log_file.read_bytes())
    length = int.from_bytes(data[8:12], "big")          # batchLength: after offset+length
    assert data[16] == 2, "not a v2 record batch"
    at = min(61 + 16, 12 + length - 1)                 # within the records, past the header
    for i in range(at, at + 4):
        data[i] ^= 0xFF
    log_file.write_bytes(bytes(data))


def build_inputs(tmp: Path) -> dict[str, str]:
    paths = {k: tmp / k.lower() for k in ("LOG", "EXPORT", "DEST", "LOCKED", "CORRUPT")}
    job("make_sample_log", "--output", str(paths["LOG"]), "--records", "2000",
        "--partitions", "2")
    job("export_parquet", "--path", str(paths["LOG"]), "--output", str(paths["EXPORT"]))
    for k in ("DEST", "LOCKED", "CORRUPT"):
        shutil.copytree(paths["LOG"], paths[k])
    corrupt_first_batch(paths["CORRUPT"] / "events-0" / "00000000000000000000.log")
    (tmp / "bad.json").write_text('{"events": {"retention.ms": 1000,')
    return {**{k: str(v) for k, v in paths.items()}, "TMP": str(tmp),
            "FRESH": str(tmp / "fresh"), "BADJSON": str(tmp / "bad.json")}


def run_case(name: str, template: str, dest: str | None, where: dict) -> dict:
    args = template.format(**where).split()
    dest_path = Path(where[dest]) if dest else None
    before = tree_hash(dest_path) if dest_path else None
    t0 = time.monotonic()
    proc = subprocess.run([KAFKALOG, "job", name, *args], env=ENV, text=True,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=900)
    secs = time.monotonic() - t0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    same = "n/a"
    if dest_path:
        after = tree_hash(dest_path)
        same = "yes" if after == before else "**NO**"
        if dest == "FRESH" and after is not None:
            shutil.rmtree(dest_path)        # the next case needs it absent again
    return {"exit": proc.returncode, "secs": secs, "n": len(proc.stderr.splitlines()),
            "line": lines[-1] if lines else "(none)", "same": same}


def md(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", metavar="DIR", help="build the inputs here and keep them")
    opts = ap.parse_args()
    tmp = Path(opts.keep or tempfile.mkdtemp(prefix="kafkalog-errors-"))
    tmp.mkdir(parents=True, exist_ok=True)
    holder = None
    try:
        t0 = time.monotonic()
        where = build_inputs(tmp)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER,
                                   os.path.join(where["LOCKED"], ".lock")],
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        print(f"inputs built in {time.monotonic() - t0:.1f}s under {tmp}", file=sys.stderr)
        rows = []
        for name, bad, template, dest in CASES:
            r = run_case(name, template, dest, where)
            print(f"  {name}: {bad}: exit {r['exit']} in {r['secs']:.1f}s",
                  file=sys.stderr, flush=True)
            rows.append((name, bad, template, r))
        print("| job | bad input | exit | seconds | stderr lines | the line "
              "| destination unchanged |")
        print("|---|---|---|---|---|---|---|")
        for name, bad, template, r in rows:
            shown = f"kafkalog job {name} " + template.replace("{{", "{").replace("}}", "}")
            print(f"| {name} | {md(bad)}: `{md(shown)}` | {r['exit']} | {r['secs']:.2f} "
                  f"| {r['n']} | {md(r['line'])} | {r['same']} |")
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        if not opts.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""The main job, as ``make run`` runs it.

    jobs/run_main.py [--path LOGDIR] --output OUT

With no ``--path``, a sample log dir (a few million records over several partitions,
segments and codecs; see ``make_sample_log.py``) is generated once into ``sample/`` and
reused while its parameters are unchanged. Then ``jobs/export_parquet.py`` runs through
this environment's ``spark-submit`` with ``conf/`` as ``SPARK_CONF_DIR``, and the summary
is printed: rows, topic-partitions, time range, rows/s.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from spark_kafkalog import jobkit

#: the folder holding the ``spark_kafkalog`` package (the repo root in a source tree)
ROOT = Path(__file__).resolve().parents[2]
#: a source tree's Spark configuration (quiet logging), when there is one
CONF = ROOT / "conf"
SAMPLE_DIR = Path("sample") / "kafka-logs"
SAMPLE_VALUE_SCHEMA = "user_id long, event string, amount double"


def ensure_sample(records: int, partitions: int, sample_dir: Path = SAMPLE_DIR) -> Path:
    """The sample log dir, generated when missing or made with other parameters."""
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    stamp = sample_dir / "SAMPLE.json"
    if stamp.is_file():
        try:
            made = json.loads(stamp.read_text())
        except ValueError:
            made = {}
        if made.get("records") == records and made.get("partitions") == partitions:
            print(f"using the sample log dir {sample_dir} ({records:,} records)")
            return sample_dir
    print(f"generating a sample log dir of {records:,} records in {sample_dir} ...",
          flush=True)
    summary = make_sample_log(sample_dir, records=records, partitions=partitions)
    segs = sum(v["segments"] for v in summary["per_partition"].values())
    codecs = sorted({v["codec"] for v in summary["per_partition"].values()})
    print(f"  {jobkit.plural(partitions, 'partition')}, {jobkit.plural(segs, 'segment')}, "
          f"codecs {', '.join(codecs)}")
    return sample_dir


def spark_submit() -> str:
    """The venv's spark-submit (installed by pyspark next to this interpreter)."""
    exe = Path(sys.executable).parent / "spark-submit"
    if exe.exists():
        return str(exe)
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")



#: what every Spark 4 JVM prints at start: Spark's launcher adds
#: --add-modules=jdk.incubator.vector, and the JVM has no option to silence the notice
JVM_INCUBATOR_NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector"


def run_quiet_jvm(cmd: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run ``cmd`` with its stdout as is and its stderr passed through line by line,
    less the JVM's incubator-module notice (a plain ``make run`` prints no warning)."""
    with subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE) as proc:
        for line in proc.stderr:
            if line.rstrip(b"\r\n").decode("utf-8", "replace") != JVM_INCUBATOR_NOTICE:
                sys.stderr.buffer.write(line)
                sys.stderr.buffer.flush()
        proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode)


#: the environment run_main sets for spark-submit, shown in the command it prints
SHOWN_ENV = ("PYTHONPATH", "SPARK_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def shown_command(cmd: list[str], env: dict, base: dict) -> str:
    """``cmd`` as a shell line to paste: quoted, preceded by the variables ``env`` sets
    differently from ``base`` (the caller's environment), less ``--summary-json FILE``
    (a temporary file of this run)."""
    words = list(cmd)
    if "--summary-json" in words:
        i = words.index("--summary-json")
        del words[i:i + 2]
    # an assignment's value is quoted, never the whole word (it would be a command)
    assigned = [f"{k}={shlex.quote(env[k])}" for k in SHOWN_ENV
                if k in env and env[k] != base.get(k)]
    return " ".join(assigned + [shlex.join(words)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", help="log dir to export (default: generate a sample)")
    ap.add_argument("--output", required=True, help="Parquet output directory")
    ap.add_argument("--records", type=int, default=3_000_000,
                    help="records in the generated sample (default 3,000,000)")
    ap.add_argument("--partitions", type=int, default=6,
                    help="partitions of the generated sample (default 6)")
    ap.add_argument("--sample-dir", default=str(SAMPLE_DIR),
                    help=f"where the sample is generated (default {SAMPLE_DIR})")
    ap.add_argument("--master", default=None, help="Spark master (default: conf / local[*])")
    ap.add_argument("extra", nargs=argparse.REMAINDER,
                    help="after --: more export_parquet.py arguments")
    args = ap.parse_args(argv)

    extra = [a for a in args.extra if a != "--"]
    if args.path:
        logdir = Path(args.path)
    else:
        logdir = ensure_sample(args.records, args.partitions, Path(args.sample_dir))
        if "--value-schema" not in extra:
            extra += ["--value-schema", SAMPLE_VALUE_SCHEMA]

    env = dict(os.environ)
    if CONF.is_dir():
        env.setdefault("SPARK_CONF_DIR", str(CONF))
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Run from the source tree: make the package (and its pyspark_kafkalog shim, which
    # Spark's data source lookup finds on sys.path) importable in every Python worker.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])

    with tempfile.TemporaryDirectory(prefix="kafkalog-run-") as tmp:
        summary_file = Path(tmp) / "summary.json"
        cmd = [spark_submit()]
        if args.master:
            cmd += ["--master", args.master]
        cmd += [str(Path(__file__).with_name("export_parquet.py")), "--path", str(logdir),
                "--output", str(Path(args.output).resolve()),
                "--summary-json", str(summary_file)] + extra
        print("running:", shown_command(cmd, env, os.environ), flush=True)
        proc = run_quiet_jvm(cmd, env)
        if proc.returncode != 0:
            print(f"export_parquet.py failed (exit status {proc.returncode})",
                  file=sys.stderr)
            return proc.returncode
        summary = json.loads(summary_file.read_text())

    print()
    print(summary_text(summary))
    return 0


def summary_text(summary: dict) -> str:
    """The closing block of ``make run``, from export_parquet's ``--summary-json``."""
    return "\n".join([
        "main job summary",
        f"  rows        {summary['rows']:,}",
        f"  partitions  {jobkit.plural(summary['partitions'], 'topic-partition')} in "
        f"{jobkit.plural(summary['topics'], 'topic')}, "
        f"{jobkit.plural(summary['dates'], 'date partition')}",
        f"  time range  {summary['first_timestamp']} .. {summary['last_timestamp']}",
        f"  throughput  {summary['seconds']:.1f}s to read, convert and write Parquet"
        + jobkit.rate_text(summary["rows"], summary["seconds"], "rows", ": ", ""),
        f"  output      {summary['output']}"])


if __name__ == "__main__":
    sys.exit(main())

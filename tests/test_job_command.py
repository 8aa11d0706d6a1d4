"""`kafkalog job`: list the jobs, print a job's file for spark-submit, run one in this
process with its own exit status and one-line failure. No Spark (retention needs none)."""
import io
import subprocess
import sys
from pathlib import Path

import spark_kafkalog
from spark_kafkalog.cli import main
from spark_kafkalog.jobkit import LOG4J_CONF
from spark_kafkalog.jobs import JOBS


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_list_file_and_log4j():
    code, out, _ = _run(["job", "--list"])
    assert code == 0 and out.split() == list(JOBS)
    pkg = Path(spark_kafkalog.__file__).parent
    for job in JOBS:
        code, out, _ = _run(["job", "--file", job])
        assert code == 0 and Path(out.strip()) == pkg / "jobs" / f"{job}.py"
        assert Path(out.strip()).is_file()
    code, out, _ = _run(["job", "--log4j"])
    assert code == 0 and Path(out.strip()) == LOG4J_CONF and LOG4J_CONF.is_file()
    assert "rootLogger.level = warn" in LOG4J_CONF.read_text()


def test_unknown_job_and_no_job_are_usage_errors():
    code, out, err = _run(["job", "nope"])
    assert code == 2 and "no job 'nope'" in err and "retention" in err
    code, out, _ = _run(["job"])
    assert code == 2 and out.startswith("usage: kafkalog job NAME")
    code, out, _ = _run(["job", "--help"])
    assert code == 0 and "jobs: export_parquet" in out


def test_a_job_runs_with_its_own_status_and_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", "job", "retention",
                           "--path", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"retention: JobInputError: --path: log directory {tmp_path / 'missing'} does not "
        "exist"]
    proc = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", "job", "retention",
                           "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "kafkalog job retention --path" in proc.stdout

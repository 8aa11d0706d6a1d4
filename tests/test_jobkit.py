"""The jobs' shared scaffolding: parser, time parsing, summary output, error exits,
progress lines."""
import io
import json
import threading

import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.errors import CorruptRecordError


def test_parser_has_example_summary_json_and_progress_switch():
    ap = jobkit.parser("x.py", "First paragraph.\n\nMore text.", example="spark-submit x.py --a")
    text = ap.format_help()
    assert "First paragraph." in text and "More text." not in text
    assert text.rstrip().endswith("spark-submit x.py --a")
    args = ap.parse_args(["--summary-json", "s.json", "--no-progress"])
    assert args.summary_json == "s.json" and args.progress is False
    assert ap.parse_args(["--progress"]).progress is True
    # default: progress only when stderr is a terminal (pytest captures it: not one)
    assert ap.parse_args([]).progress is False
    assert ap.parse_args(["--verbose"]).verbose is True


def test_alias_is_hidden_deprecated_and_satisfies_required(capsys):
    ap = jobkit.parser("x", "Doc.", example="x")
    ap.add_argument("--output", required=True, dest="out")
    ap.add_argument("--topic", action="append")
    jobkit.add_mode(ap, "append", "replace it")
    jobkit.alias(ap, "--out", "--output")
    jobkit.alias(ap, "--topics", "--topic")
    assert "--out " not in ap.format_help() and "--topics" not in ap.format_help()
    assert "error," not in ap.format_help()
    args = ap.parse_args(["--out", "o", "--topics", "a,b", "--topic", "c", "--mode", "error"])
    assert args.out == "o" and jobkit.topic_list(args.topic) == ["a", "b", "c"]
    assert args.mode == "errorifexists"
    err = capsys.readouterr().err.splitlines()
    assert err == ["x: note: --mode error is now errorifexists (the old spelling still works)",
                   "x: note: --out is now --output (the old spelling still works)",
                   "x: note: --topics is now --topic (the old spelling still works)"]
    assert ap.parse_args(["--output=o"]).out == "o"
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as exc:
        ap.parse_args([])
    assert exc.value.code == 2
    assert "the following arguments are required: --output" in capsys.readouterr().err


def test_parse_time_ms():
    assert jobkit.parse_time_ms("1700000000123", "--from") == 1700000000123
    assert jobkit.parse_time_ms("1970-01-01T00:00:01Z", "--from") == 1000
    assert jobkit.parse_time_ms("1970-01-01T00:00:01", "--from") == 1000
    assert jobkit.parse_time_ms("1970-01-01T01:00:01+01:00", "--from") == 1000
    with pytest.raises(jobkit.JobInputError, match="--to: 'yesterday'"):
        jobkit.parse_time_ms("yesterday", "--to")


def test_parse_kv():
    assert jobkit.parse_kv(["a=1", " b =x=y"], "--option") == {"a": "1", "b": "x=y"}
    with pytest.raises(jobkit.JobInputError, match="--option expects KEY=VALUE, got 'a'"):
        jobkit.parse_kv(["a"], "--option")


def test_emit_prints_line_and_writes_json(tmp_path):
    out = io.StringIO()
    path = tmp_path / "s.json"
    jobkit.emit({"rows": 3}, "copied 3 rows", str(path), out=out)
    assert out.getvalue() == "copied 3 rows\n"
    assert json.loads(path.read_text()) == {"rows": 3}


def _one_line(status, exc, argv=()):
    err = io.StringIO()

    def fail():
        raise exc

    assert jobkit.run("job", fail, err=err, argv=list(argv)) == status
    lines = err.getvalue().splitlines()
    return lines


def test_run_prints_one_line_and_exit_status_by_kind():
    from spark_kafkalog.errors import (DataLossError, InternalError, LockError,
                                       LogLayoutError, StorageError)

    corrupt = CorruptRecordError("bad CRC\nmore", path="a.log", position=61, offset=7)
    assert _one_line(jobkit.EXIT_DATA, corrupt) == [
        "job: CorruptRecordError: bad CRC"]          # one line, whatever the message
    assert _one_line(1, DataLossError("gone")) == ["job: DataLossError: gone"]
    assert _one_line(2, jobkit.JobInputError("--topic: x not found")) == [
        "job: JobInputError: --topic: x not found"]
    assert _one_line(2, LogLayoutError("log directory does not exist", path="/x")) == [
        "job: LogLayoutError: log directory does not exist (file /x)"]
    assert _one_line(2, FileNotFoundError(2, "No such file", "/y")) == [
        "job: FileNotFoundError: [Errno 2] No such file: '/y'"]
    assert _one_line(jobkit.EXIT_LOCKED, LockError("a running Kafka broker holds this log "
                                                   "dir", path="/l/.lock")) == [
        "job: LockError: a running Kafka broker holds this log dir (file /l/.lock)"]
    assert _one_line(4, InternalError("plan and bytes disagree")) == [
        "job: InternalError: plan and bytes disagree"]
    # a full disk is neither bad input nor bad data (an OSError, yet not exit 2)
    full = StorageError("cannot write to file: ENOSPC (No space left on device)",
                        path="/l/t-0/x.log", errno=28)
    assert _one_line(jobkit.EXIT_FAILED, full) == [
        "job: StorageError: cannot write to file: ENOSPC (No space left on device) "
        "(file /l/t-0/x.log)"]
    assert jobkit.run("job", lambda: 0, err=io.StringIO(), argv=[]) == 0


def test_run_finds_our_error_inside_sparks():
    class AnalysisException(Exception):
        pass

    spark_text = ("[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read "
                  "partitions: Traceback (most recent call last):\n  File \"x.py\", line 3\n"
                  "spark_kafkalog.errors.LockError: a running Kafka broker holds this log "
                  "dir (file /l/.lock)\n\tat org.apache.spark.Foo(Foo.scala:1)")
    assert _one_line(3, AnalysisException(spark_text)) == [
        "job: LockError: a running Kafka broker holds this log dir (file /l/.lock)"]
    # Spark's own analysis errors are bad input too, shown by their first line
    assert _one_line(2, AnalysisException("[PATH_NOT_FOUND] Path does not exist: /p\nx")) == [
        "job: AnalysisException: [PATH_NOT_FOUND] Path does not exist: /p"]


def test_run_shows_a_bugs_trace_only_with_verbose():
    lines = _one_line(jobkit.EXIT_FAILED, ZeroDivisionError("integer division by zero"))
    assert lines == ["job: ZeroDivisionError: integer division by zero (--verbose shows the "
                     "trace)"]
    lines = _one_line(4, ZeroDivisionError("integer division by zero"), argv=["--verbose"])
    assert lines[0] == "Traceback (most recent call last):" and len(lines) > 3
    assert lines[-1].startswith("job: ZeroDivisionError")


class _Info:
    def __init__(self, done, total):
        self.numCompletedTasks, self.numTasks = done, total


class _Tracker:
    def __init__(self):
        self.stages = {3: _Info(1, 4)}

    def getActiveStageIds(self):
        return list(self.stages)

    def getStageInfo(self, stage_id):
        return self.stages.get(stage_id)


class _Spark:
    class sparkContext:  # noqa: N801 - mimics the attribute
        tracker = _Tracker()

        @classmethod
        def statusTracker(cls):
            return cls.tracker


def test_progress_prints_when_something_moved():
    stream = io.StringIO()
    progress = jobkit.SparkProgress(_Spark, "copy", interval=0.01, stream=stream)
    assert progress.status() == "stage 3: 1/4 tasks"
    with progress:
        deadline = threading.Event()
        for _ in range(500):
            if "1/4" in stream.getvalue():
                break
            deadline.wait(0.01)
        _Spark.sparkContext.tracker.stages[3] = _Info(4, 4)
        for _ in range(500):
            if "4/4" in stream.getvalue():
                break
            deadline.wait(0.01)
    lines = stream.getvalue().splitlines()
    assert lines == ["copy: stage 3: 1/4 tasks", "copy: stage 3: 4/4 tasks"]
    assert jobkit.SparkProgress(_Spark, "x", enabled=False).status() is None


def test_a_jvm_failure_shows_its_root_cause():
    class _J:
        def __init__(self, text, cause=None):
            self.text, self.cause = text, cause

        def toString(self):  # noqa: N802 - py4j's name
            return self.text

        def getCause(self):  # noqa: N802
            return self.cause

    class Py4JJavaError(Exception):
        java_exception = _J("org.apache.spark.SparkException: Job aborted\n\tat x",
                            _J("java.lang.IllegalArgumentException: No codec brotli\n\tat y"))

    assert _one_line(4, Py4JJavaError("An error occurred while calling o87.parquet.")) == [
        "job: java.lang.IllegalArgumentException: No codec brotli (--verbose shows the "
        "trace)"]


def test_a_missing_data_source_says_what_to_do():
    """Spark's worker Python without this package: the one line says to set
    PYSPARK_PYTHON, exit 2 (the set-up, not a bug). Both shapes Spark gives it: the
    lookup's DATA_SOURCE_NOT_FOUND, and the JVM's ClassNotFoundException behind a
    Py4JJavaError (what a job run with PYSPARK_PYTHON unset printed)."""
    class AnalysisException(Exception):
        pass

    class _Java:
        def __init__(self, text, cause=None):
            self.text, self.cause = text, cause

        def getCause(self):
            return self.cause

        def toString(self):
            return self.text

    class Py4JJavaError(Exception):
        def __init__(self, java):
            super().__init__("An error occurred while calling o87.parquet.")
            self.java_exception = java

    expected = [f"job: {jobkit.NOT_FOUND_HINT}"]
    assert "PYSPARK_PYTHON" in jobkit.NOT_FOUND_HINT
    assert _one_line(2, AnalysisException(
        "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: kafkalog. Make sure the "
        "provider name is correct")) == expected
    java = _Java("org.apache.spark.SparkClassNotFoundException: boom",
                 _Java("java.lang.ClassNotFoundException: kafkalog.DefaultSource\n\tat x"))
    assert _one_line(2, Py4JJavaError(java)) == expected
    # another data source's absence is not ours to explain
    assert _one_line(2, AnalysisException(
        "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: avro.")) == [
        "job: AnalysisException: [DATA_SOURCE_NOT_FOUND] Failed to find the data source: "
        "avro."]

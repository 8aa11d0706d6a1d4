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
    assert ap.parse_args([]).progress is True


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


def test_run_turns_bad_input_into_one_line_and_exit_2():
    err = io.StringIO()

    def bad():
        raise CorruptRecordError("a.log: batch at position 61 (offset 7): bad CRC\nmore")

    assert jobkit.run("job", bad, err=err) == 2
    line = err.getvalue()
    assert line.startswith("job: a.log: batch at position 61 (offset 7): bad CRC (after ")
    assert line.count("\n") == 1
    assert jobkit.run("job", lambda: 0, err=err) == 0


def test_run_keeps_traceback_of_bugs():
    with pytest.raises(ZeroDivisionError):
        jobkit.run("job", lambda: 1 // 0, err=io.StringIO())


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

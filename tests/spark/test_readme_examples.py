"""Every Python example of the README runs, in order, on the shared Spark session, with
its ``/data/...`` paths pointed at a log dir built here; the ``kafkalog`` command lines
of the README run too. (The install and cluster commands are what
tests/test_packaging.py does; ``spark-submit jobs/...`` is tests/spark/test_jobs.py.)"""
from __future__ import annotations

import glob
import io
import re
import shlex

import pytest

from spark_kafkalog.cli import main
from tests.conftest import REPO
from tests.log.logbuilder import LogDirBuilder, rec

README = (REPO / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


@pytest.fixture()
def data(tmp_path):
    """``/data`` of the examples: a log dir with topic ``orders`` (2 partitions)."""
    b = LogDirBuilder(tmp_path / "kafka-logs")
    for q in (0, 1):
        p = b.partition("orders", q, base_timestamp=1_700_000_000_000)
        p.append([rec(b"k%d" % i, b'{"id": %d}' % i) for i in range(5)])
        p.append([rec(None, b"tail")])
    b.write()
    return tmp_path


def _localize(code: str, data) -> str:
    return code.replace("/data/", f"{data}/")


def test_python_examples_run(spark, data):
    blocks = _blocks("python")
    assert len(blocks) >= 6
    stream_in = data / "stream-in"
    spark.createDataFrame([("a",), ("b",)], "value string").write.parquet(str(stream_in))
    ns = {"spark": spark,
          "stream_df": spark.readStream.schema("value string").parquet(str(stream_in))}
    for code in blocks:
        exec(compile(_localize(code, data), "README.md", "exec"), ns)
    assert ns["df"].count() == 12
    assert ns["table"].num_rows == 12 and ns["batch"].num_rows == 6
    copy = (spark.read.format("kafkalog").option("subscribe", "orders-copy")
            .load(str(data / "kafka-copy")))
    assert copy.count() == 12 + 2                        # the batch write, the stream


def test_command_examples_run(data):
    (block,) = [b for b in _blocks("sh") if "kafkalog inspect" in b]
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) == 6
    for line in lines:
        argv = []
        for word in shlex.split(_localize(line, data))[1:]:
            argv += sorted(glob.glob(word)) if "*" in word else [word]
        out, err = io.StringIO(), io.StringIO()
        code = main(argv, stdout=out, stderr=err)
        assert code == 0, (line, err.getvalue())
        if argv[0] == "report":
            assert (data / "report.html").read_text().startswith("<!doctype html>")
        if argv[0] == "cat":
            assert out.getvalue() == "".join(f'{i} k{i} {{"id": {i}}}\n' for i in (2, 3, 4))

"""Every Python example of the README runs, as written, in order, on the shared Spark
session, with its ``/data/...`` paths pointed at a log dir built here (an example with
any other absolute path fails), and what the Reading, Streaming reads and Writing
examples produce is checked; the ``kafkalog`` command lines of the README run too. (The
install and cluster commands are what tests/test_packaging.py does; ``spark-submit
jobs/...`` is tests/spark/test_jobs.py.)"""
from __future__ import annotations

import glob
import io
from collections import Counter
import re
import shlex
import shutil

import pytest

from spark_kafkalog.cli import main
from tests.conftest import REPO
from tests.log import tiered_builder
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import typed_logs

README = (REPO / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


@pytest.fixture()
def data(tmp_path):
    """``/data`` of the examples: a log dir with topic ``orders`` (2 partitions), and
    ``tiered/``: a broker's log dir whose ``orders`` has its first segments only in the
    remote root ``tiered/remote`` (LocalTieredStorage's layout, listed in the log dir's
    ``__remote_log_metadata``)."""
    b = LogDirBuilder(tmp_path / "kafka-logs")
    for q in (0, 1):
        p = b.partition("orders", q, base_timestamp=1_700_000_000_000)
        p.append([rec(b"k%d" % i, b'{"id": %d}' % i) for i in range(5)])
        p.append([rec(None, b"tail")])
    b.write()
    src = tmp_path / "tiered-source"
    p, full, bases = tiered_builder.build(src)
    tiered_builder.tier(src, p, full, bases, data=tmp_path / "tiered" / "kafka-logs",
                        remote=tmp_path / "tiered" / "remote")
    # the typed examples' log dir: a _schemas topic as the registry writes it and an
    # "orders" topic of Avro values in two schema versions (tests/typed/typed_logs.py)
    typed_logs.build(tmp_path / "registry-logs")
    return tmp_path, p


def _localize(code: str, data) -> str:
    """``/data/...`` pointed at ``data``; any other absolute path fails the test (an
    example must not write outside the test's directory)."""
    code = code.replace("/data/", f"{data}/")
    stray = [p for p in re.findall(r"[\"'](/[^\"']*)[\"']", code)
             if not p.startswith(str(data))]
    assert not stray, f"an example path outside /data/: {stray}"
    return code


def _section(title: str) -> str:
    """The README text under ``## title`` (up to the next ``## `` heading)."""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _run(code: str, ns: dict, data) -> None:
    exec(compile(_localize(code, data), "README.md", "exec"), ns)


def _rows(table) -> list[tuple]:
    return sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(),
                      table["key"].to_pylist(), table["value"].to_pylist()))


def test_python_examples_run(spark, data):
    """Every Python block, in README order, on one namespace; what each section's examples
    wrote is checked against the source log."""
    import pyarrow.parquet as pq

    from spark_kafkalog.log import read_table
    from spark_kafkalog.log.write import topic_partitions
    from spark_kafkalog.log.io import resolve_filesystem

    data, tiered = data
    ns = {"spark": spark}
    sections = ("Reading", "Streaming reads", "Writing")
    covered = [b for title in sections for b in re.findall(r"```python\n(.*?)```",
                                                          _section(title), flags=re.S)]
    blocks = _blocks("python")
    assert len(covered) == 7 and set(covered) <= set(blocks)
    for code in blocks:
        _run(code, ns, data)
    source = _rows(read_table(str(data / "kafka-logs"), "orders"))
    assert len(source) == 12
    # Reading
    assert ns["df"].count() == 12
    assert ns["table"].num_rows == 12 and ns["batch"].num_rows == 6
    # Reading, tiered: both tiers from offset 0, as built (the builder's own record list)
    whole = tiered.expected_table()
    assert ns["history_table"].equals(whole)
    assert sorted(r.offset for r in ns["history"].select("offset").collect()) == \
        whole.column("offset").to_pylist()
    # Streaming reads: the replay read the whole topic
    assert not ns["q"].isActive and ns["q"].exception() is None
    assert pq.read_table(data / "orders-parquet").num_rows == 12
    # Writing: the batch write (keys and values), the stream (a mirror: each record in its
    # partition), the restore with offsets kept (every record at its partition and offset)
    copy = read_table(str(data / "kafka-copy"), "orders-copy")
    assert Counter(zip(copy["key"].to_pylist(), copy["value"].to_pylist())) == \
        Counter((k, v) for _, _, k, v in source)
    mirror = _rows(read_table(str(data / "kafka-copy"), "orders-mirror"))
    assert [(p, k, v) for p, _, k, v in mirror] == [(p, k, v) for p, _, k, v in source]
    assert _rows(read_table(str(data / "restore"), "orders")) == source
    fs, root = resolve_filesystem(str(data / "restore"))
    assert topic_partitions(fs, root, "orders") == list(range(12))
    # Iceberg, typed: the table holds every record of the typed read, decoded
    typed = read_table(str(data / "registry-logs"), "orders", value_format="avro",
                       on_decode_error="null")
    lake = ns["catalog"].load_table("kafka.orders_typed").scan().to_arrow()
    assert lake.num_rows == typed.num_rows > 0
    def by_offset(t):
        return sorted(zip(t["partition"].to_pylist(), t["offset"].to_pylist(),
                          t["value"].to_pylist()), key=lambda r: r[:2])
    assert by_offset(lake) == by_offset(typed)


def test_command_examples_run(data):
    data, _ = data
    (block,) = [b for b in _blocks("sh") if b.startswith("kafkalog inspect")]
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) == 8
    # the backup the manifest line audits: a whole copy of the log dir
    shutil.copytree(data / "kafka-logs", data / "backup" / "kafka-logs")
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

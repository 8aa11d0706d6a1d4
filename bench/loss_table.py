"""Every data-loss shape of tests/log/loss_shapes.py (plus a journal one built here, and
the look-alikes that are not loss, as controls) read through each reader: the library's
read_table (failing, and with fail_on_data_loss=False), a Spark batch, a Spark stream
(availableNow), `kafkalog cat` and `kafkalog verify`. Prints one Markdown table.

Run: PYSPARK_PYTHON=... SPARK_CONF_DIR=conf .venv/bin/python bench/loss_table.py
"""
from __future__ import annotations

import io
import logging
import os
import struct
import sys
import tempfile
import warnings
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_kafkalog import cli, errors  # noqa: E402
from spark_kafkalog.log import read_table  # noqa: E402
from spark_kafkalog.log.write.table import write_table  # noqa: E402
from tests.log.loss_shapes import LOSSES, NOT_LOSS, TOPIC  # noqa: E402

WIDTH = 120


def journal_past_end(root: Path):
    """Three write_table commits of 10 records (journal: committed end 30), then the log
    cut at offset 26 and both checkpoints set to 26: only the journal promises more."""
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        write_table(str(root), TOPIC, pa.table({"value": [b"v%d" % i for i in range(10)]}),
                    batch_bytes=62)
    seg = root / f"{TOPIC}-0" / "00000000000000000000.log"
    data, pos = seg.read_bytes(), 0
    while struct.unpack(">q", data[pos:pos + 8])[0] != 26:
        pos += 12 + struct.unpack(">i", data[pos + 8:pos + 12])[0]
    os.truncate(seg, pos)
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        (root / name).write_text(f"0\n1\n{TOPIC} 0 26\n")
    return "journal", 26, 30


SHAPES = {**LOSSES, "journal_past_end": journal_past_end}


def short(text: str, root: Path) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    line = line.replace(str(root), "$D").replace("|", "\\|")
    return line[:WIDTH] + ("…" if len(line) > WIDTH else "")


def err(e: BaseException | None, root: Path) -> str:
    if e is None:
        return "ok"
    ours = errors.unwrap(e)
    if ours is None:
        return f"NOT OURS {type(e).__name__}: {short(e, root)}"
    return f"{type(ours).__name__}: {short(ours, root)}"


class Grab(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def library(root: Path) -> tuple[str, str]:
    try:
        t = read_table(str(root), TOPIC)
        failing = f"ok ({t.num_rows} rows)"
    except Exception as e:  # noqa: BLE001
        failing = err(e, root)
    grab = Grab()
    lg = logging.getLogger("spark_kafkalog")
    level = lg.level        # warnings shown whatever the caller configured
    lg.setLevel(logging.WARNING)
    lg.addHandler(grab)
    try:
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            t = read_table(str(root), TOPIC, fail_on_data_loss=False)
        said = grab.lines + [f"{w.category.__name__}: {w.message}" for w in ws]
        said.sort(key=lambda x: "data loss" not in x)       # the loss warning first
        lenient = f"{t.num_rows} rows; " + (
            f"{len(said)} warning(s): " + short(said[0], root) if said else "no warning")
    except Exception as e:  # noqa: BLE001
        lenient = err(e, root)
    finally:
        lg.removeHandler(grab)
        lg.setLevel(level)
    return failing, lenient


def run_cli(*argv) -> tuple[int, str]:
    out, er = io.StringIO(), io.StringIO()
    code = cli.main([str(a) for a in argv], stdout=out, stderr=er)
    lines = er.getvalue().strip().splitlines()
    return code, lines[-1] if lines else ""


def spark_batch(spark, root: Path) -> str:
    try:
        n = spark.read.format("kafkalog").option("subscribe", TOPIC) \
            .option("startingOffsets", "earliest").load(str(root)).count()
        return f"ok ({n} rows)"
    except Exception as e:  # noqa: BLE001
        return err(e, root)


def spark_stream(spark, root: Path, tmp: Path) -> str:
    try:
        q = spark.readStream.format("kafkalog").option("path", str(root)) \
            .option("subscribe", TOPIC).option("startingOffsets", "earliest").load() \
            .writeStream.format("noop").option("checkpointLocation", str(tmp / "ckpt")) \
            .trigger(availableNow=True).start()
        try:
            q.awaitTermination()
        finally:
            q.stop()
        return "ok (no error)"
    except Exception as e:  # noqa: BLE001
        return err(e, root)


def main() -> None:
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[2]").appName("loss_table") \
        .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1") \
        .config("spark.driver.bindAddress", "127.0.0.1") \
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rows = []
    cases = [(n, f, True) for n, f in SHAPES.items()] + \
        [(n, f, False) for n, f in NOT_LOSS.items()]
    for name, build, is_loss in cases:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "logs"
            shown = build(root)
            label = f"{name} ({shown[0]} {shown[1]}..{shown[2] - 1})" if is_loss \
                else f"control: {name} (not loss)"
            lib, lenient = library(root)
            batch = spark_batch(spark, root)
            stream = spark_stream(spark, root, Path(tmp))
            c_code, c_line = run_cli("cat", root, "-t", TOPIC, "-C", "-e", "-f", "%o\\n")
            v_code, _ = run_cli("verify", root)
            rows.append((label, lib, lenient, batch, stream,
                         f"{c_code}: {short(c_line, root)}", str(v_code)))
        print(f"done {name}", file=sys.stderr, flush=True)
    spark.stop()
    head = ("shape", "library", "library (failOnDataLoss=false)", "Spark batch", "stream",
            "cat exit/line", "verify exit")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()

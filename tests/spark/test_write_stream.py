"""df.writeStream.format("kafkalog"): exactly once across replays, restarts and kills.

Input: parquet files of unique ids, read with ``maxFilesPerTrigger=1`` so each file is one
micro-batch. Check: every id is in the log exactly once (offsets contiguous, CRCs valid).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import recover
from spark_kafkalog.log.write import topic_partitions
from tests.log.test_appender_util import read_kp

FS = pafs.LocalFileSystem()
REPO = Path(__file__).resolve().parents[2]


def make_inputs(directory: Path, files: range, per_file: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for f in files:
        ids = range(f * per_file, (f + 1) * per_file)
        pq.write_table(pa.table({"key": [f"id-{i}" for i in ids],
                                 "value": [f"payload-{i}" for i in ids]}),
                       directory / f"part-{f:04d}.parquet")


def values_in_log(root: str, topic: str) -> list[bytes]:
    out = []
    for p in topic_partitions(FS, root, topic):
        out += [r[2] for r in read_kp(f"{root}/{topic}-{p}")]
    return out


def run_stream(spark, inputs: Path, root: str, ckpt: Path):
    df = spark.readStream.schema("key string, value string") \
        .option("maxFilesPerTrigger", 1).parquet(str(inputs))
    q = df.writeStream.format("kafkalog").option("path", root).option("topic", "s") \
        .option("partitions", "3").option("checkpointLocation", str(ckpt)) \
        .trigger(availableNow=True).start()
    q.awaitTermination()
    return q


def test_stream_restart_and_replay_write_each_record_once(spark, tmp_path):
    inputs, root, ckpt = tmp_path / "in", str(tmp_path / "log"), tmp_path / "ckpt"
    make_inputs(inputs, range(3), 40)
    q = run_stream(spark, inputs, root, ckpt)
    assert sorted(values_in_log(root, "s")) == sorted(f"payload-{i}".encode()
                                                      for i in range(120))
    st = jr.load(FS, root, "s")
    assert st.streams == {q.id: 2}
    # Spark forgets it committed the last batch (its commit log entry is lost, as when the
    # driver dies between our commit and Spark's): the restart replays batch 2 -- the
    # journal makes that a no-op
    (ckpt / "commits" / "2").unlink()
    (ckpt / "commits" / ".2.crc").unlink(missing_ok=True)
    make_inputs(inputs, range(3, 5), 40)
    run_stream(spark, inputs, root, ckpt)
    assert (ckpt / "commits" / "2").exists()               # batch 2 was run again
    got = values_in_log(root, "s")
    assert len(got) == len(set(got)) == 200
    assert jr.load(FS, root, "s").streams == {q.id: 4}


_DRIVER = r"""
import sys
sys.path.insert(0, {repo!r})
from tests.conftest import spark_env, spark_test_conf
spark_env()
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
b = SparkSession.builder.master("local[2]").appName("kill-restart")
for k, v in spark_test_conf().items():
    b = b.config(k, v)
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

class Progress(StreamingQueryListener):
    def onQueryStarted(self, e): pass
    def onQueryProgress(self, e):
        print("progress", e.progress.batchId, flush=True)
    def onQueryIdle(self, e): pass
    def onQueryTerminated(self, e): pass

spark.streams.addListener(Progress())
df = spark.readStream.schema("key string, value string") \
    .option("maxFilesPerTrigger", 1).parquet({inputs!r})
q = df.writeStream.format("kafkalog").option("path", {root!r}).option("topic", "s") \
    .option("partitions", "2").option("checkpointLocation", {ckpt!r}) \
    .trigger(availableNow=True).start()
q.awaitTermination()
print("finished", flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)       # each restart starts a JVM: ~20 s idle, minutes when loaded
def test_stream_killed_and_restarted_writes_each_record_once(tmp_path):
    """SIGKILL the whole driver (JVM and Python workers) after k progress events, several
    times; then let it finish. Each input record is in the log exactly once."""
    inputs, root, ckpt = tmp_path / "in", str(tmp_path / "log"), str(tmp_path / "ckpt")
    n_files, per_file = 12, 300
    make_inputs(inputs, range(n_files), per_file)
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER.format(repo=str(REPO), inputs=str(inputs), root=root,
                                     ckpt=ckpt))
    kills = 0
    for k in (1, 3, 2):
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        try:
            seen = 0
            for line in proc.stdout:
                if line.startswith("progress"):
                    seen += 1
                    if seen == k:
                        os.killpg(proc.pid, signal.SIGKILL)
                        kills += 1
                        break
                if line.startswith("finished"):
                    break
        finally:
            if proc.poll() is None and seen < k:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=120)
            proc.stdout.close()
        # whatever the kill interrupted, after recovery (what the next writer runs first)
        # the log holds whole micro-batches only
        if os.path.exists(jr.journal_path(root, "s")):
            recover(FS, root, "s")
        got = values_in_log(root, "s") if os.path.isdir(root) else []
        assert len(got) == len(set(got)) and len(got) % per_file == 0
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=900, start_new_session=True)
    assert "finished" in out.stdout, out.stderr[-3000:]
    got = values_in_log(root, "s")
    want = sorted(f"payload-{i}".encode() for i in range(n_files * per_file))
    assert sorted(got) == want                  # every record, exactly once
    assert kills == 3

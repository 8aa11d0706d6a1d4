"""A stream's option error reaches the user as our InvalidOptionError, found by
errors.unwrap in the StreamingQueryException, not as pyspark's UnboundLocalError (its
streaming runner's ``finally: reader.stop()`` on a reader that was never made)."""
from __future__ import annotations

import sys

import pytest

from spark_kafkalog.errors import InvalidOptionError, unwrap
from spark_kafkalog.spark import KafkaLogDataSource
from spark_kafkalog.spark.stream_reader import FailedStreamReader
from tests.spark.test_read_stream import build

BAD = [({"endingOffsets": "latest"}, "endingOffsets is not valid in streaming"),
       ({"memoryMap": "true"}, "memoryMap=true is not supported in streaming")]


def test_in_the_runner_the_error_waits_for_the_first_call(monkeypatch):
    opts = {"path": "/logs", "subscribe": "t", "endingOffsets": "latest"}
    with pytest.raises(InvalidOptionError):          # called directly: raised at once
        KafkaLogDataSource(opts).streamReader(None)
    monkeypatch.setitem(sys.modules, "pyspark.sql.streaming.python_streaming_source_runner",
                        sys.modules[__name__])
    r = KafkaLogDataSource(opts).streamReader(None)
    assert isinstance(r, FailedStreamReader)
    r.stop()                                          # what the runner's finally calls
    for call in (r.initialOffset, r.latestOffset, lambda: r.partitions({}, {})):
        with pytest.raises(InvalidOptionError, match="endingOffsets is not valid"):
            call()


@pytest.mark.parametrize("extra,message", BAD)
def test_stream_option_error_is_ours_at_the_query(spark, tmp_path, extra, message):
    build(tmp_path, [5])
    df = spark.readStream.format("kafkalog").options(
        path=str(tmp_path), subscribe="t", **extra).load()
    q = df.writeStream.format("noop").trigger(availableNow=True).start()
    with pytest.raises(Exception) as failed:
        q.awaitTermination()
    err = unwrap(failed.value)
    assert isinstance(err, InvalidOptionError) and message in str(err), failed.value
    assert "UnboundLocalError" not in str(failed.value)

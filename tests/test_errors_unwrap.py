"""errors.unwrap: our error out of the exceptions Spark raises (their text, a JVM cause
chain, Python causes), rebuilt with its class, path, position and offset."""
from spark_kafkalog import errors
from spark_kafkalog.errors import (
    CodecError,
    CorruptRecordError,
    InvalidOptionError,
    KafkaLogError,
    LockError,
    unwrap,
)

TRACE = """[PYTHON_DATA_SOURCE_ERROR] Failed to generate Python data source read partitions: \
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/sql/worker/plan_data_source_read.py", line 1
    raise x
spark_kafkalog.errors.CodecError: zstd frame does not decompress (file /d/t-0/00000000000000000000.log, position 699980, offset 11290)
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:1)
"""


def test_unwrap_reads_class_message_and_location_from_spark_text():
    err = unwrap(RuntimeError(TRACE))
    assert type(err) is CodecError and isinstance(err, CorruptRecordError)
    assert err.reason == "zstd frame does not decompress"
    assert (err.path, err.position, err.offset) == (
        "/d/t-0/00000000000000000000.log", 699980, 11290)
    assert str(err) == ("zstd frame does not decompress (file /d/t-0/00000000000000000000.log,"
                        " position 699980, offset 11290)")


def test_unwrap_takes_the_last_of_ours_in_a_chained_traceback():
    text = ("Traceback:\nspark_kafkalog.errors.CorruptRecordError: bad CRC (offset 3)\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "spark_kafkalog.errors.InvalidOptionError: onCorruption=fail: stopped\n")
    err = unwrap(Exception(text))
    assert type(err) is InvalidOptionError and err.reason == "onCorruption=fail: stopped"
    assert err.offset is None


class _Java:
    """A py4j JavaObject stand-in: toString and getCause."""

    def __init__(self, text, cause=None):
        self.text, self.cause = text, cause

    def toString(self):  # noqa: N802 - the JVM's name
        return self.text

    def getCause(self):  # noqa: N802
        return self.cause


def test_unwrap_follows_the_jvm_cause_chain_and_python_causes():
    class Py4JJavaError(Exception):
        def __init__(self, java):
            super().__init__("An error occurred while calling o52.save.")
            self.java_exception = java

    java = _Java("org.apache.spark.SparkException: Job aborted",
                 _Java("org.apache.spark.api.python.PythonException: Traceback ...\n"
                       "spark_kafkalog.errors.LockError: a running Kafka broker holds this "
                       "log dir (file /l/.lock)"))
    err = unwrap(Py4JJavaError(java))
    assert type(err) is LockError and err.path == "/l/.lock"
    # an error of ours raised in this process is returned as it is
    mine = InvalidOptionError("subscribe: no topic")
    try:
        try:
            raise mine
        except KafkaLogError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert unwrap(outer) is mine


def test_unwrap_returns_none_without_our_error():
    assert unwrap(RuntimeError("java.lang.OutOfMemoryError: Java heap space")) is None
    assert unwrap(ValueError("somepackage.errors.CorruptRecordError: not ours")) is None
    assert unwrap(ValueError("ValueError: x")) is None


def test_every_error_class_is_found_by_name():
    for name, cls in errors._error_classes().items():
        got = unwrap(RuntimeError(f"x\nspark_kafkalog.errors.{name}: it broke\ny"))
        assert type(got) is cls and str(got) == "it broke", name


def test_our_name_after_a_foreign_one_on_the_same_line():
    line = ("org.apache.spark.api.python.PythonException: Traceback: "
            "spark_kafkalog.errors.DataLossError: offsets 5..9 are gone (offset 5)")
    err = unwrap(RuntimeError(line))
    assert type(err) is errors.DataLossError and err.offset == 5

"""Shared test fixtures.

ONE Spark session for the whole test run (``spark``): local[2], tiny shuffle, no UI,
pushdown on, workers on this interpreter. Starting a JVM costs seconds, so every Spark test
shares it; tests that need another master (local-cluster, Spark Connect) start their own
and are marked ``slow``. pyspark is imported only when a Spark test runs, so format/ and
log/ tests never pay for it.

Any test using the ``spark`` fixture is marked ``spark`` automatically.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.fixture_dirs import FIXTURE_DIR
from tests.fixture_dirs import real_broker_dir

REPO = Path(__file__).resolve().parents[1]

#: broker-written log dirs, outside the repo (see its MANIFEST.md)
REAL_BROKER = real_broker_dir(REPO)


def require_real_broker() -> Path:
    """:data:`REAL_BROKER`; when it is missing the test skips, but fails under CI
    (``CI=true``): there a skip would hide that the tests never ran."""
    if not REAL_BROKER.is_dir():
        msg = (f"real broker fixtures not found at {REAL_BROKER} "
               f"(looked for {FIXTURE_DIR} in every directory above {REPO})")
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(msg + ": CI must have them")
        pytest.skip(msg)
    return REAL_BROKER


def spark_test_conf() -> dict[str, str]:
    """The settings of the shared session (also used by tests that start their own)."""
    return {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.python.worker.reuse": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }


def spark_env() -> None:
    """Environment every Spark JVM of the test run needs: Python workers on this
    interpreter (the venv, where pyarrow and this package live) and our conf dir."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))


@pytest.fixture(scope="session")
def spark():
    spark_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("spark_kafkalog-tests")
    for key, value in spark_test_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def real_broker() -> Path:
    """The real-broker fixture root (:func:`require_real_broker`: skips when the shared
    fixtures are not present, fails under CI)."""
    return require_real_broker()


#: directories whose files are the long ones (Spark sessions, jobs, brokers)
_LONG_DIRS = {"spark", "lake", "kafka"}
#: test files under this directory go to one test worker together: they share the
#: session's brokers (tests/kafka/conftest.py), which each worker would start again
_BROKER_DIR = "tests/kafka/"


def pytest_collection_modifyitems(config, items):
    long_files = set()
    for item in items:
        path = item.path
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
            long_files.add(path)
        elif path.parent.name in _LONG_DIRS or item.get_closest_marker("slow"):
            long_files.add(path)

    # The brokers' tests, then the other long files, each file's tests kept together and
    # in their order: the test workers (Makefile TEST_JOBS: pytest-xdist by file, with
    # --no-loadscope-reorder) are handed files in this order, so the run ends on short
    # files instead of one worker finishing a long one while the other waits.
    def rank(item):
        if item.nodeid.startswith(_BROKER_DIR):
            return 0
        return 1 if item.path in long_files else 2
    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)      # only when pytest-xdist is installed
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with every test under tests/kafka/ as one unit (see
    :data:`_BROKER_DIR`)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BrokersTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _BROKER_DIR if nodeid.startswith(_BROKER_DIR) else super()._split_scope(nodeid)

    return BrokersTogether(config, log)

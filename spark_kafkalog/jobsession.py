"""The Spark session a job starts, and how it ends.

- The worker Python: a job that starts its own JVM sets ``PYSPARK_PYTHON`` (and the
  driver's) to this interpreter where the user set none, so that Spark's lookup of Python
  data sources, which runs in that Python, finds ``pyspark_kafkalog``.
- Quiet: WARN-level log4j from the JVM's first line, and the JVM's one start-up line
  "Using incubator modules" (Spark's launcher always adds one) left out of stderr.
- Ctrl-C: the first one cancels the running Spark jobs from another thread instead of
  interrupting the py4j call the main thread is in (PySpark's own handler does that,
  and py4j then prints "reentrant call" tracebacks); the JVM's logging goes quiet for the
  shutdown. :func:`interrupted` tells ``jobkit.run`` that the failure that follows is the
  interrupt. A second Ctrl-C ends the process at once.
- Progress: :class:`SparkProgress` prints the running stages' task counts on stderr.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator, TextIO

#: the quiet log4j2 configuration jobs start Spark's JVM with (WARN, to stderr)
LOG4J_CONF = Path(__file__).with_name("jobs") / "log4j2.properties"
#: the JVM's start-up line that says nothing to a job's user
_INCUBATOR = b"WARNING: Using incubator modules"

_interrupt = threading.Event()
_job = {"name": "job"}


def begin(name: str) -> None:
    """A job named ``name`` starts in this process (``jobkit.run``): no interrupt yet."""
    _job["name"] = name
    _interrupt.clear()


def interrupted() -> bool:
    """Whether Ctrl-C (SIGINT) arrived while a job's Spark session ran."""
    return _interrupt.is_set()


def worker_python(environ=os.environ) -> list[str]:
    """Set ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` in ``environ`` to this
    interpreter where they are unset (or empty); the names set. Spark otherwise runs
    ``python3`` from the ``PATH``, which need not be the Python this package is in."""
    chosen = []
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        if not environ.get(name):
            environ[name] = sys.executable
            chosen.append(name)
    return chosen


def _own_jvm() -> bool:
    """Whether this process will start the JVM (not spark-submit, not a session that
    is already up)."""
    from pyspark import SparkContext

    return SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ


def _pump(pipe, out) -> None:
    """Copy the JVM's stderr to ours, less the incubator-modules line."""
    with pipe:
        for line in iter(pipe.readline, b""):
            if line.startswith(_INCUBATOR):
                continue
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):      # our stderr is gone: keep draining
                pass


def _launch_quiet(conf: dict[str, str]) -> None:
    """Start the JVM as PySpark would, its stderr through :func:`_pump`."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        spark_conf.set(key, value)
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        out = getattr(sys.stderr, "buffer", None)
        if out is None:
            out = open(os.dup(2), "wb", buffering=0)
        threading.Thread(target=_pump, args=(proc.stderr, out), name="kafkalog-jvm-stderr",
                         daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def _in_py4j(frame) -> bool:
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j."):
            return True
        frame = frame.f_back
    return False


class _CtrlC:
    """The SIGINT handler of a job's session (see the module doc)."""

    def __init__(self, spark, verbose: bool):
        self.sc = spark.sparkContext
        self.verbose = verbose
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self, signum, frame) -> None:
        if _interrupt.is_set():
            if _in_py4j(frame):               # the second Ctrl-C: out now
                print(f"{_job['name']}: interrupted", file=sys.stderr, flush=True)
                os._exit(130)
            raise KeyboardInterrupt
        _interrupt.set()
        if self.thread is None:
            self.thread = threading.Thread(target=self._cancel, name="kafkalog-cancel",
                                           daemon=True)
            self.thread.start()
        if not _in_py4j(frame):
            raise KeyboardInterrupt
        # else: the py4j call fails when its Spark job is cancelled

    def _cancel(self) -> None:
        """Cancel every Spark job, and keep cancelling the ones started until the session
        stops (a job may start after the call the main thread was in returns)."""
        try:
            if not self.verbose:
                self.sc.setLogLevel("OFF")
            while True:
                self.sc.cancelAllJobs()
                if self.done.wait(0.2):
                    return
        except Exception:          # the session is stopping: nothing left to cancel
            return


@contextlib.contextmanager
def spark_session(app_name: str, conf: dict[str, str] | None = None,
                  verbose: bool = False) -> Iterator:
    """The job's SparkSession (session time zone UTC, so days and windows are the same
    on every cluster), stopped on the way out.

    Quiet unless ``verbose``: a JVM this process starts (``python -m``, ``kafkalog job``)
    gets :data:`LOG4J_CONF` (WARN and above) from its first line; under ``spark-submit``
    the JVM is already running, and ``spark.log.level=WARN`` applies from the
    SparkContext's start (a few lines printed before it remain)."""
    from pyspark.sql import SparkSession

    settings = {"spark.app.name": app_name}
    own = _own_jvm()
    if own:
        worker_python()
    if not verbose:
        if own:
            opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
            if "log4j2.configurationFile" not in opts:
                os.environ["SPARK_SUBMIT_OPTS"] = \
                    f"{opts} -Dlog4j2.configurationFile={LOG4J_CONF.as_uri()}".strip()
        else:
            settings["spark.log.level"] = "WARN"
        settings["spark.ui.showConsoleProgress"] = "false"
    settings.update(conf or {})
    if own and not verbose:
        _launch_quiet(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    spark = builder.getOrCreate()         # PySpark's SIGINT handler: replaced below
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    handler = _CtrlC(spark, verbose)
    if main:
        signal.signal(signal.SIGINT, handler)
    try:
        yield spark
    finally:
        handler.done.set()
        try:
            spark.stop()
        finally:
            if main:
                signal.signal(signal.SIGINT, before if callable(before) or before in (
                    signal.SIG_IGN, signal.SIG_DFL) else signal.default_int_handler)


class SparkProgress:
    """Prints ``<label>: stage N: done/total tasks`` on stderr while Spark jobs run, at
    most every ``interval`` seconds and only when something moved, from a daemon thread
    that reads the status tracker (no listener in the JVM, so nothing to unregister)."""

    def __init__(self, spark, label: str, enabled: bool = True, interval: float = 2.0,
                 stream: TextIO | None = None):
        self._tracker = spark.sparkContext.statusTracker() if enabled else None
        self.label = label
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: str | None = None

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            line = self.status()
            if line and line != self._last:
                self._last = line
                print(f"{self.label}: {line}", file=self.stream, flush=True)

    def status(self) -> str | None:
        """One line of what runs now (None when nothing does)."""
        tracker = self._tracker
        if tracker is None:
            return None
        parts = []
        try:
            for stage_id in sorted(tracker.getActiveStageIds()):
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(f"stage {stage_id}: {info.numCompletedTasks}/"
                                 f"{info.numTasks} tasks")
        except Exception:      # the session is stopping; progress is best effort
            return None
        return ", ".join(parts) or None

    def __enter__(self) -> "SparkProgress":
        if self._tracker is not None:
            self._thread = threading.Thread(target=self._poll, name="kafkalog-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 1)

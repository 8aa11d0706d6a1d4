"""A single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1, run
from the jars ``make kafka-jars`` fetched, plus the Java programs of the test tier:
:class:`KafkaTool` (Kafka's own producer, consumer and admin client, ``KafkaTool.java``)
and Kafka's ``DumpLogSegments``. Two Kafka versions: :data:`KAFKA4` (4.3.1, the tier's
main one) and :data:`KAFKA39` (3.9.1, the last 3.x line); each has its own jars.

Used by ``tests/kafka/conftest.py`` (one broker per test session) and by
``bench/bench_kafka.py``. The broker listens only on loopback ports chosen free; its log
dir, metadata and own log (``server.log``) live in the directory it is given.
"""
from __future__ import annotations

import atexit
import base64
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KAFKA_JARS = REPO / ".cache" / "kafka-jars"
KAFKA39_JARS = REPO / ".cache" / "kafka39-jars"
KAFKA44_JARS = REPO / ".cache" / "kafka44-jars"
SPARK_KAFKA_JARS = REPO / ".cache" / "spark-kafka-jars"
HERE = Path(__file__).resolve().parent
#: the JDK's java and javac (Kafka 4 needs 17+): $JAVA_HOME's when set, else PATH's
_JDK = Path(os.environ["JAVA_HOME"]) / "bin" if os.environ.get("JAVA_HOME") else None
JAVA = str(_JDK / "java") if _JDK else "java"
JAVAC = str(_JDK / "javac") if _JDK else "javac"
#: short-lived client JVMs: small heap, no C2 (they run for seconds)
CLIENT_JVM = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
STARTED = "Kafka Server started"


@dataclass(frozen=True)
class Kafka:
    """One Apache Kafka version of the tier: its jars and where its classes differ."""
    version: str
    jars: Path
    #: DumpLogSegments' class (3.x: Scala, in the broker's jar; 4.x: kafka-tools)
    dump_log: str
    #: the logging the version's broker uses: log4j2 (4.x) or reload4j, log4j 1 (3.x)
    log4j2: bool


KAFKA4 = Kafka("4.3.1", KAFKA_JARS, "org.apache.kafka.tools.DumpLogSegments", True)
KAFKA39 = Kafka("3.9.1", KAFKA39_JARS, "kafka.tools.DumpLogSegments", False)
#: the newest release: kafka-dump-log parity and tiered storage (its jars hold LocalTieredStorage)
KAFKA44 = Kafka("4.4.0", KAFKA44_JARS, "org.apache.kafka.tools.DumpLogSegments", True)


class KafkaTierError(RuntimeError):
    """The tier cannot run (jars missing, broker did not start): one line saying why."""


def jars_present(folder: Path = KAFKA_JARS) -> bool:
    return folder.is_dir() and any(folder.glob("kafka-clients-*.jar"))


def require_jars(folder: Path = KAFKA_JARS) -> None:
    if not jars_present(folder):
        raise KafkaTierError(f"Apache Kafka's jars are not in {folder}: run `make kafka-jars` "
                             "(Maven fetches them from Maven Central)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_id() -> str:
    """What ``kafka-storage random-uuid`` prints: 16 random bytes, URL-safe base64."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def classpath(*extra: Path, kafka: Kafka = KAFKA4) -> str:
    return os.pathsep.join([*(str(e) for e in extra), str(kafka.jars / "*")])


def log_config(home: Path, kafka: Kafka) -> tuple[Path, str]:
    """A logging config writing to ``home/server.log`` in the version's own format, and
    the JVM flag that loads it."""
    if kafka.log4j2:
        path = home / "log4j2.properties"
        path.write_text(
            "status = error\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {home / 'server.log'}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = info\n"
            "rootLogger.appenderRef.file.ref = file\n")
        return path, f"-Dlog4j2.configurationFile={path}"
    path = home / "log4j.properties"
    path.write_text(
        "log4j.rootLogger = INFO, file\n"
        "log4j.appender.file = org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File = {home / 'server.log'}\n"
        "log4j.appender.file.layout = org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern = [%d] %p %m (%c)%n\n")
    return path, f"-Dlog4j.configuration=file:{path}"


class Broker:
    """One KRaft node. ``start()`` formats the storage on first use and waits (bounded)
    until the broker serves; ``stop()`` is a clean shutdown (SIGTERM, checkpoints
    written); ``start()`` again reuses the same dirs and ports."""

    def __init__(self, home: Path, *, heap: str = "512m", overrides: dict | None = None,
                 kafka: Kafka = KAFKA4, extra_jars: tuple[Path, ...] = ()):
        require_jars(kafka.jars)
        self.kafka = kafka
        #: jars put before the version's own on the broker's class path (a plugin)
        self.extra_jars = tuple(extra_jars)
        self.home = Path(home)
        self.logdir = self.home / "data"
        self.port = free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.proc: subprocess.Popen | None = None
        self.home.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.logdir),
            "metadata.log.dir": str(self.home / "metadata"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            # the tier's reads follow the checkpointed high watermark: keep it current
            "replica.high.watermark.checkpoint.interval.ms": "200",
            "log.cleaner.backoff.ms": "200",
            "log.initial.task.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
        }
        props.update(overrides or {})
        self.config = self.home / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log4j, self.log_flag = log_config(self.home, kafka)
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def server_log(self) -> Path:
        return self.home / "server.log"

    def _jvm(self, *args: str, heap: str | None = None) -> list[str]:
        return [JAVA, f"-Xmx{heap or self.heap}", self.log_flag,
                "-cp", classpath(*self.extra_jars, kafka=self.kafka), *args]

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.server_log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server.log)"

    def start(self, timeout: float = 180.0) -> None:
        if not self._formatted:
            out = subprocess.run(
                self._jvm("kafka.tools.StorageTool", "format", "-t", cluster_id(),
                          "-c", str(self.config), "--ignore-formatted", heap="256m"),
                capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                raise KafkaTierError("kafka-storage format failed: "
                                     + (out.stderr or out.stdout).strip().splitlines()[-1])
            self._formatted = True
        seen = self.server_log.read_text(errors="replace").count(STARTED) \
            if self.server_log.exists() else 0
        with open(self.home / "stdout.log", "ab") as out:     # the broker keeps its copy
            self.proc = subprocess.Popen(
                self._jvm("-XX:+UseSerialGC", "kafka.Kafka", str(self.config)),
                stdout=out, stderr=subprocess.STDOUT)
        # never outlive the test run, even when it ends without the fixture's teardown
        atexit.register(self.kill)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise KafkaTierError(f"the broker exited with {self.proc.returncode} while "
                                     f"starting; server.log ends:\n{self.log_tail()}")
            if self._serving(seen):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise KafkaTierError(f"the broker did not start within {timeout:.0f} s; "
                                     f"server.log ends:\n{self.log_tail()}")
            time.sleep(0.2)

    def _serving(self, seen: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        try:
            return self.server_log.read_text(errors="replace").count(STARTED) > seen
        except OSError:
            return False

    def stop(self, timeout: float = 90.0) -> None:
        """Clean shutdown: the broker flushes, writes its checkpoints and
        ``.kafka_cleanshutdown``."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = None
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise KafkaTierError(f"the broker did not stop within {timeout:.0f} s (killed)")
        finally:
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.proc = None

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.logdir / f"{topic}-{partition}"


class KafkaTool:
    """``KafkaTool.java`` compiled once into ``build_dir``; each call is one JVM."""

    def __init__(self, broker: Broker, build_dir: Path):
        self.broker = broker
        self.build_dir = Path(build_dir)
        self.build_dir.mkdir(parents=True, exist_ok=True)
        out = subprocess.run([JAVAC, "-nowarn", "-cp", classpath(kafka=broker.kafka), "-d",
                              str(self.build_dir), str(HERE / "KafkaTool.java")],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise KafkaTierError("javac KafkaTool.java failed: " + out.stderr.strip())
        self._n = 0

    def command(self, *args: str) -> list[str]:
        return [JAVA, *CLIENT_JVM, self.broker.log_flag,
                "-cp", classpath(self.build_dir, kafka=self.broker.kafka), "KafkaTool", *args]

    def run(self, *args: str, timeout: float = 300) -> str:
        out = subprocess.run(self.command(*args), capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode != 0:
            raise AssertionError(f"KafkaTool {args[0]} failed ({out.returncode}):\n"
                                 f"{out.stderr[-4000:]}")
        return out.stdout

    def _spec(self, spec) -> str:
        self._n += 1
        path = self.build_dir / f"spec-{self._n}.json"
        path.write_text(json.dumps(spec))
        return str(path)

    def create_topics(self, topics: list[dict]) -> None:
        self.run("admin", self.broker.bootstrap, self._spec(topics))

    def produce(self, spec: list[dict]) -> None:
        self.run("produce", self.broker.bootstrap, self._spec(spec))

    def group(self, group: str, protocol: str, topics: list[str]) -> dict:
        """A group consumer of ``protocol`` reads ``topics`` to their end, commits and
        leaves: what it was told and read (``KafkaTool.java``'s ``group``)."""
        self._n += 1
        out = self.build_dir / f"group-{self._n}.json"
        self.run("group", self.broker.bootstrap, group, protocol, str(out), *topics)
        return json.loads(out.read_text())

    def consume(self, topics: list[str], isolation: str = "read_uncommitted"):
        """Every record of ``topics`` as the Java consumer returns it: (records, ends)
        where a record is a dict with bytes for key/value/header values and ends maps
        ``(topic, partition)`` to the end offset the consumer stopped at."""
        self._n += 1
        out = self.build_dir / f"consumed-{self._n}.jsonl"
        self.run("consume", self.broker.bootstrap, isolation, str(out), *topics)
        records, ends = [], {}
        for line in out.read_text().splitlines():
            row = json.loads(line)
            if "end" in row:
                for name, off in row["end"].items():
                    topic, _, part = name.rpartition("-")
                    ends[(topic, int(part))] = off
                continue
            records.append({
                "topic": row["topic"], "partition": row["partition"], "offset": row["offset"],
                "key": unb64(row["key"]), "value": unb64(row["value"]),
                "timestamp": row["timestamp"], "timestampType": row["timestampType"],
                "headers": [(k, unb64(v)) for k, v in row["headers"]] or None,
            })
        return records, ends


def unb64(text):
    return None if text is None else base64.b64decode(text)


def b64(data):
    return None if data is None else base64.b64encode(data).decode()


def dump_log_segments(files: list[Path], *extra: str, timeout: float = 300,
                      kafka: Kafka = KAFKA4) -> str:
    """Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``) of ``kafka``'s version over
    ``files`` in one JVM; returns its stdout, raises on a non-zero exit."""
    out = subprocess.run([JAVA, *CLIENT_JVM, "-cp", classpath(kafka=kafka), kafka.dump_log,
                          "--files", ",".join(str(f) for f in files), *extra],
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError(f"DumpLogSegments failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return out.stdout

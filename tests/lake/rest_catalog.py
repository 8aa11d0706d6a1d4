"""Apache Iceberg's REST catalog on 127.0.0.1 for the lake tests (``LoopbackRestCatalog.java``
over ``make iceberg-rest-jars``'s jars: iceberg-core's RESTCatalogAdapter and
RESTCatalogServlet on Jetty, a JdbcCatalog on SQLite behind them, S3FileIO for an S3
warehouse), and Iceberg's Java reader through it (``IcebergReader.java``, REST form)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.lake.oracle import HERE, JAVA, JAVAC, JVM, REPO

ICEBERG_REST_JARS = REPO / ".cache" / "iceberg-rest-jars"


def s3_java_properties(endpoint: str, region: str) -> dict[str, str]:
    """Catalog properties of Iceberg's S3FileIO for a loopback S3 endpoint (moto)."""
    return {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "s3.endpoint": endpoint,
            "s3.path-style-access": "true", "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing", "client.region": region}


class RestCatalog:
    """The server, started in :meth:`start` and stopped in :meth:`stop` (its stdin
    closed); ``uri`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, build_dir: Path, properties: dict[str, str]):
        if not (ICEBERG_REST_JARS / ".fetched").exists():
            raise AssertionError(f"{ICEBERG_REST_JARS} is missing: run `make iceberg-rest-jars` "
                                 "(Maven fetches Apache Iceberg's REST server)")
        self.build_dir = build_dir
        self.cp = os.pathsep.join([str(build_dir), str(ICEBERG_REST_JARS / "*")])
        self.properties = properties
        out = subprocess.run([JAVAC, "-nowarn", "-cp", self.cp, "-d", str(build_dir),
                              str(HERE / "LoopbackRestCatalog.java")],
                             capture_output=True, text=True)
        if out.returncode:
            raise AssertionError("javac LoopbackRestCatalog.java failed: " + out.stderr.strip())
        self.proc: subprocess.Popen | None = None
        self.uri = ""

    def _props(self, extra: dict[str, str] | None = None) -> list[str]:
        return [f"-Dcatalog.{k}={v}" for k, v in {**self.properties, **(extra or {})}.items()]

    def start(self, backend_uri: str, warehouse: str) -> str:
        """Start the server over JDBC catalog ``backend_uri`` with tables under
        ``warehouse``; its URI."""
        self.log = self.build_dir / "rest-catalog.stderr"
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [JAVA, *JVM, "-cp", self.cp,
                 *self._props({"uri": backend_uri, "warehouse": warehouse}),
                 "LoopbackRestCatalog"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, text=True)
        line = self.proc.stdout.readline()       # "port N" once Jetty listens
        if not line.startswith("port "):
            self.stop()
            raise AssertionError(f"the REST catalog did not start: {line!r} "
                                 f"{self.log.read_text()}")
        self.uri = f"http://127.0.0.1:{int(line.split()[1])}"
        return self.uri

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.proc.stdout.close()

    def reader(self, build_dir: Path):
        """Iceberg's Java reader (:class:`tests.lake.oracle.JavaReader`) on this class
        path, with the server's S3FileIO settings; ``reader.read(rest.uri, "rest", ident)``
        finds a table through Iceberg's RESTCatalog."""
        from tests.lake.oracle import JavaReader

        return JavaReader(build_dir, ICEBERG_REST_JARS, tuple(self._props()),
                          make_target="iceberg-rest-jars")

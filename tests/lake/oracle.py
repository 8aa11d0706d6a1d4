"""What the lake tests compare: rows of a table read by Apache Iceberg's Java library
(``IcebergReader.java`` over ``make iceberg-jars``'s jars, the implementation the export
does not use) or by pyiceberg, and the rows ``log.read_table`` gives for the same offsets,
all as the same plain tuples."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ICEBERG_JARS = REPO / ".cache" / "iceberg-jars"
HERE = Path(__file__).resolve().parent
_JDK = Path(os.environ["JAVA_HOME"]) / "bin" if os.environ.get("JAVA_HOME") else None
JAVA = str(_JDK / "java") if _JDK else "java"
JAVAC = str(_JDK / "javac") if _JDK else "javac"
#: a short-lived JVM: small heap, no C2
JVM = ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


def _hex(b):
    return None if b is None else bytes(b).hex()


def row_tuples(table) -> list[tuple]:
    """Rows of an Arrow table in Spark's Kafka schema (or the Iceberg table's) as
    ``(topic, partition, offset, timestamp µs, timestampType, key hex, value hex,
    ((header key, value hex), ...))`` sorted by topic, partition, offset. A record with
    no headers has ``()``: Kafka's format does not tell null from empty (the export
    writes empty lists)."""
    cols = {c: table.column(c).to_pylist() for c in
            ("topic", "partition", "offset", "timestampType", "key", "value", "headers")}
    ts = table.column("timestamp").cast("int64").to_pylist()
    out = []
    for i in range(table.num_rows):
        hdrs = tuple((h["key"], _hex(h["value"])) for h in cols["headers"][i] or ())
        out.append((cols["topic"][i], cols["partition"][i], cols["offset"][i], ts[i],
                    cols["timestampType"][i], _hex(cols["key"][i]), _hex(cols["value"][i]),
                    hdrs))
    return sorted(out, key=lambda r: r[:3])


def metadata_location(warehouse: Path, identifier: str) -> str:
    """The table's current metadata file, read from the embedded catalog's SQLite file
    with sqlite3 (not through pyiceberg)."""
    ns, name = identifier.rsplit(".", 1)
    with sqlite3.connect(warehouse / "kafkalog-catalog.db") as db:
        row = db.execute("select metadata_location from iceberg_tables where "
                         "table_namespace = ? and table_name = ?", (ns, name)).fetchone()
    assert row is not None, f"{identifier} is not in the catalog"
    return row[0]


class JavaReader:
    """``IcebergReader.java`` compiled once into ``build_dir``; each read is one JVM.
    ``jars``: the class path's jar directory (``make iceberg-jars``'s by default; the REST
    tests use ``make iceberg-rest-jars``'s, with S3FileIO); ``jvm_args``: e.g. the
    ``-Dcatalog.<property>`` settings of the reader's REST form."""

    def __init__(self, build_dir: Path, jars: Path = ICEBERG_JARS, jvm_args: tuple = (),
                 make_target: str = "iceberg-jars"):
        if not (jars / ".fetched").exists():
            raise AssertionError(f"{jars} is missing: run `make {make_target}` "
                                 "(Maven fetches Apache Iceberg's Java library)")
        self.build_dir = build_dir
        self.jvm_args = list(jvm_args)
        self.cp = os.pathsep.join([str(build_dir), str(jars / "*")])
        out = subprocess.run([JAVAC, "-nowarn", "-cp", self.cp, "-d", str(build_dir),
                              str(HERE / "IcebergReader.java")], capture_output=True, text=True)
        if out.returncode:
            raise AssertionError("javac IcebergReader.java failed: " + out.stderr.strip())

    def read_catalog(self, warehouse: Path, identifier: str, *,
                     raw: bool = False) -> tuple[dict, list]:
        """:meth:`read` (``raw``: :meth:`read_json`) of the table Iceberg's own
        JdbcCatalog finds in the embedded catalog's SQLite file (pyiceberg's SQL
        catalog tables)."""
        return (self.read_json if raw else self.read)(
            f"jdbc:sqlite:{warehouse / 'kafkalog-catalog.db'}", "kafkalog", identifier,
            f"file://{warehouse}")

    def read_json(self, *args: str) -> tuple[dict, list[dict]]:
        """The table line and each row as the reader printed it (JSON objects; a typed
        value is an object, raw bytes hex, columns beyond Kafka's under ``extra``)."""
        out = subprocess.run([JAVA, *JVM, *self.jvm_args, "-cp", self.cp, "IcebergReader",
                              *args],
                             capture_output=True, text=True, timeout=300)
        if out.returncode:
            raise AssertionError(f"IcebergReader failed ({out.returncode}):\n{out.stderr}")
        lines = out.stdout.splitlines()
        return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]

    def read(self, *args: str) -> tuple[dict, list[tuple]]:
        """The table line (schema, spec, snapshots) and the rows as :func:`row_tuples`;
        ``args``: a metadata file, or what :meth:`read_catalog` passes."""
        head, lines = self.read_json(*args)
        rows = []
        for r in lines:
            rows.append((r["topic"], r["partition"], r["offset"], r["timestamp"],
                         r["timestampType"], r["key"], r["value"],
                         tuple(tuple(h) for h in r["headers"] or ())))
        return head, sorted(rows, key=lambda r: r[:3])

"""export_iceberg's data files: ``--target-file-size`` sets the table's
``write.target-file-size-bytes`` and the files written aim at it on disk (pyiceberg 0.12
alone would read the target as in-memory Arrow bytes and write files several times
smaller)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from spark_kafkalog.jobs import run_job
from spark_kafkalog.lake import open_catalog
from spark_kafkalog.log import read_table
from tests.lake.oracle import row_tuples
from tests.log.logbuilder import LogDirBuilder, rec

T0 = 1_700_000_000_000
IDENT = "kafka.t"


def _log(root: Path, n: int = 6000) -> str:
    """Topic ``t``, one partition: ``n`` records whose values are half random bytes (so
    that Parquet's size is not a matter of dictionary luck), in lz4 batches."""
    rng = random.Random(39)
    b = LogDirBuilder(root)
    p = b.partition("t", 0)
    for lo in range(0, n, 2500):
        p.append([rec(b"k%d" % i, b"%d-" % i + rng.randbytes(60) + b"a" * 60, ts=T0 + i)
                  for i in range(lo, min(n, lo + 2500))], compression="lz4")
    p.high_watermark = p.log_end_offset
    b.write()
    return b.uris()


def _job(tmp_path, *extra):
    return run_job("export_iceberg", ["--path", str(tmp_path / "logs"), "--warehouse",
                                      str(tmp_path / "wh"), "--table", IDENT,
                                      "--no-progress", "--partition-by", "none", *extra])


def test_target_file_size_gives_files_near_it(tmp_path):
    logs = _log(tmp_path / "logs")
    target = 96 << 10
    assert _job(tmp_path, "--target-file-size", "96k") == 0
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    assert table.properties["write.target-file-size-bytes"] == str(target)
    sizes = sorted(t.file.file_size_in_bytes for t in table.scan().plan_files())
    assert len(sizes) >= 4, sizes
    # every file but the remainder within a quarter of the target, on disk
    assert all(0.75 * target <= s <= 1.25 * target for s in sizes[1:]), sizes
    assert sizes[0] <= 1.25 * target
    assert row_tuples(table.scan().to_arrow()) == row_tuples(read_table(logs, "t"))


def test_target_file_size_changes_an_existing_table(tmp_path):
    _log(tmp_path / "logs", n=100)
    assert _job(tmp_path) == 0
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    assert "write.target-file-size-bytes" not in table.properties
    assert _job(tmp_path, "--target-file-size", "1m") == 0
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    assert table.properties["write.target-file-size-bytes"] == str(1 << 20)


def test_target_file_size_bad_value_is_one_line(tmp_path, capsys):
    _log(tmp_path / "logs", n=10)
    with pytest.raises(SystemExit) as exit_:
        _job(tmp_path, "--target-file-size", "12q")
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--target-file-size" in line and "not a positive size in bytes: '12q'" in line
    assert not (tmp_path / "wh").exists()

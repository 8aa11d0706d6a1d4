"""The jobs (export, import, copy/restore, consumer offsets, compaction, retention,
report), installed with the package so that ``pip install`` brings them; the repo's
``jobs/`` links here. Each runs as ``kafkalog job NAME ...``, ``python -m
spark_kafkalog.jobs.NAME ...`` or ``spark-submit $(kafkalog job --file NAME) ...``, and
uses only the public data source and library API.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Sequence

#: the jobs a user runs (make_sample_log generates a test log; run_main is ``make run``)
JOBS = ("export_parquet", "export_iceberg", "import_files", "copy_topic", "consumer_offsets", "compact",
        "retention", "log_report", "make_sample_log")


def job_file(name: str) -> Path:
    """The installed file of job ``name`` (what ``spark-submit`` runs)."""
    if name not in JOBS:
        raise KeyError(name)
    return Path(__file__).with_name(f"{name}.py")


def run_job(name: str, argv: Sequence[str]) -> int:
    """Run job ``name`` with ``argv`` in this process; its exit status."""
    from spark_kafkalog import jobkit

    module = importlib.import_module(f"spark_kafkalog.jobs.{name}")
    return jobkit.run(name, lambda: module.main(list(argv)), argv=argv)

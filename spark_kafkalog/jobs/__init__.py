"""The spark-submit jobs (export, import, copy/restore, consumer offsets, compaction,
retention, report), installed with the package so that ``pip install`` brings them; the
repo's ``jobs/`` links here. Each module runs as a script (``spark-submit FILE``) or with
``python -m spark_kafkalog.jobs.NAME``, and uses only the public data source and library API.
"""

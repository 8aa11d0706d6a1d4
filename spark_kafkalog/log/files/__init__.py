"""Kafka's small files beside the ``.log``: parsed and built in one place each.

``index`` (``.index``/``.timeindex``), ``txn`` (``.txnindex`` and producer ``.snapshot``),
``checkpoint`` (the text checkpoint files at a root and in a partition dir),
``partition_metadata`` (a partition dir's topic id); and our own two, which the readers
read as well as the writer: ``journal`` (a topic's commit journal) and ``lock`` (the writer's
and the broker's locks).
"""

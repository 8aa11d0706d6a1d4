"""Diagnosing a log dir: :mod:`.inspect` describes, :mod:`.verify` judges, both report
:class:`~.findings.Finding` records (file, byte position, offset)."""

"""Diagnosing a log dir: :mod:`.inspect` describes, :mod:`.verify` judges, both report
:class:`~.findings.Finding` records (file, byte position, offset); :mod:`.dump` (with
:mod:`.dump_segment` for segments) is the byte parsing behind ``kafkalog dump``. Nothing
here prints."""

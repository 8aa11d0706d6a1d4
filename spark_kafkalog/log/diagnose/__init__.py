"""Looking at a log file by file, for damage and detail: the byte parsing behind
``kafkalog dump`` (:mod:`.dump` for every file kind, :mod:`.dump_segment` for segments).
It yields records and prints nothing."""

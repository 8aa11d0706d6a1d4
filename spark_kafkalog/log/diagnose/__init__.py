"""Looking at a log for damage and detail: what ``kafkalog dump`` prints
(:mod:`~spark_kafkalog.log.diagnose.dump`)."""

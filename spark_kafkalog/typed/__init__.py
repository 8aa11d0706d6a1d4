"""Typed records (issue 38): schemas in, Arrow columns out, no files — the Avro decoder,
and the typed ``value`` / ``key`` columns of a read (:mod:`.columns`)."""

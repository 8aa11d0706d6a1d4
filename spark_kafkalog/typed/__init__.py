"""Typed records: schema-registry values (Avro) decoded into Arrow columns.

Bytes and schemas in, Arrow columns out, no files (beside ``format/``). Imports only pyarrow,
numpy, the standard library and :mod:`spark_kafkalog.errors`.
"""

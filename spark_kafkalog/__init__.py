"""spark_kafkalog: read and write Kafka's on-disk log from Spark and Arrow, no broker.

Layers (imports flow one way): ``spark -> log -> format``, ``cli -> log -> format``.

- :mod:`spark_kafkalog.format`: bytes in, Arrow columns out (and back). No file I/O.
- :mod:`spark_kafkalog.log`: Kafka's storage layout through ``pyarrow.fs``.
- :mod:`spark_kafkalog.spark`: the ``kafkalog`` Spark data source.
"""
from spark_kafkalog.errors import KafkaLogError

__version__ = "0.1.0"
__all__ = ["KafkaLogError", "__version__"]

"""The coordinators' internal topics, decoded: ``__consumer_offsets`` (committed offsets,
classic group metadata with members and assignments, Kafka 4's consumer/share/streams
group records) and ``__transaction_state``.

Byte layouts: :mod:`.protocol` (Kafka's message-protocol primitives), :mod:`.records`
(every key/value schema version) and :mod:`.schemas` (the field tables of record types
3..23). Arrow tables: :mod:`.tables` and :mod:`.modern`. What Kafka's
DumpLogSegments prints with its decoders: :mod:`.text`. No file I/O, no Spark.

The imports below are the package's public names; the modules inside import each name
from the module defining it (importing through this package would be a cycle).
"""
from spark_kafkalog.format.coordinator.records import (
    GROUP_RECORD_TYPES,
    TRANSACTION_STATES,
    decode_assignment,
    decode_group_key,
    decode_group_value,
    decode_subscription,
    decode_txn_key,
    decode_txn_value,
)
from spark_kafkalog.format.coordinator.tables import (
    COMMITS_SCHEMA,
    CONSUMER_GROUPS_SCHEMA,
    GROUP_RECORDS_SCHEMA,
    GROUPS_SCHEMA,
    OTHER_SCHEMA,
    TRANSACTIONS_SCHEMA,
    GroupState,
    TransactionState,
)
from spark_kafkalog.format.coordinator.text import offsets_text, transaction_log_text

__all__ = [
    "COMMITS_SCHEMA", "CONSUMER_GROUPS_SCHEMA", "GROUPS_SCHEMA", "GROUP_RECORDS_SCHEMA", "GROUP_RECORD_TYPES", "GroupState", "OTHER_SCHEMA",
    "TRANSACTIONS_SCHEMA", "TRANSACTION_STATES", "TransactionState", "decode_assignment",
    "decode_group_key", "decode_group_value", "decode_subscription", "decode_txn_key",
    "decode_txn_value", "offsets_text", "transaction_log_text",
]

"""The KRaft metadata records of ``__cluster_metadata`` (Kafka 4.4's
``metadata/src/main/resources/common/metadata/*.json``), restated as tables for
:mod:`spark_kafkalog.format.cluster_metadata`'s reader.

``RECORDS``: apiKey -> (record name, MetadataRecordType name, valid versions, flexible
versions, fields). A field: ``(JSON name, type, versions, nullable versions, tag, tagged
versions, default[, fields])``; a version range is ``(low, high)`` (high None: and up), or
None for none; types are Kafka's (``int8 int16 int32 int64 uint16 float64 bool string
bytes uuid``, ``struct``, ``[]`` in front for an array).
Records that read alike (FenceBroker / UnfenceBroker, ...) are separate Kafka schemas, each
versioned on its own: one entry per schema, as Kafka's JSON files have them.
"""
from __future__ import annotations

__all__ = ["RECORDS"]

RECORDS = {
    0: ('RegisterBrokerRecord', 'REGISTER_BROKER_RECORD', (0, 4), (0, None), (
        ('brokerId', 'int32', (0, None), None, None, None, None),
        ('isMigratingZkBroker', 'bool', (2, None), None, None, None, 'false'),
        ('incarnationId', 'uuid', (0, None), None, None, None, None),
        ('brokerEpoch', 'int64', (0, None), None, None, None, None),
        ('endPoints', '[]struct', (0, None), None, None, None, None, (
            ('name', 'string', (0, None), None, None, None, None),
            ('host', 'string', (0, None), None, None, None, None),
            ('port', 'uint16', (0, None), None, None, None, None),
            ('securityProtocol', 'int16', (0, None), None, None, None, None),
        )),
        ('features', '[]struct', (0, None), None, None, None, None, (
            ('name', 'string', (0, None), None, None, None, None),
            ('minSupportedVersion', 'int16', (0, None), None, None, None, None),
            ('maxSupportedVersion', 'int16', (0, None), None, None, None, None),
        )),
        ('rack', 'string', (0, None), (0, None), None, None, None),
        ('fenced', 'bool', (0, None), None, None, None, 'true'),
        ('inControlledShutdown', 'bool', (1, None), None, None, None, 'false'),
        ('logDirs', '[]uuid', (3, None), None, 0, (3, None), None),
        ('cordonedLogDirs', '[]uuid', (4, None), (4, None), 1, (4, None), 'null'),
    )),
    1: ('UnregisterBrokerRecord', 'UNREGISTER_BROKER_RECORD', (0, 0), (0, None), (
        ('brokerId', 'int32', (0, None), None, None, None, None),
        ('brokerEpoch', 'int64', (0, None), None, None, None, None),
    )),
    2: ('TopicRecord', 'TOPIC_RECORD', (0, 0), (0, None), (
        ('name', 'string', (0, None), None, None, None, None),
        ('topicId', 'uuid', (0, None), None, None, None, None),
    )),
    3: ('PartitionRecord', 'PARTITION_RECORD', (0, 2), (0, None), (
        ('partitionId', 'int32', (0, None), None, None, None, '-1'),
        ('topicId', 'uuid', (0, None), None, None, None, None),
        ('replicas', '[]int32', (0, None), None, None, None, None),
        ('isr', '[]int32', (0, None), None, None, None, None),
        ('removingReplicas', '[]int32', (0, None), None, None, None, None),
        ('addingReplicas', '[]int32', (0, None), None, None, None, None),
        ('leader', 'int32', (0, None), None, None, None, '-1'),
        ('leaderRecoveryState', 'int8', (0, None), None, 0, (0, None), '0'),
        ('leaderEpoch', 'int32', (0, None), None, None, None, '-1'),
        ('partitionEpoch', 'int32', (0, None), None, None, None, '-1'),
        ('directories', '[]uuid', (1, None), None, None, None, None),
        ('eligibleLeaderReplicas', '[]int32', (2, None), (2, None), 1, (2, None), 'null'),
        ('lastKnownElr', '[]int32', (2, None), (2, None), 2, (2, None), 'null'),
    )),
    4: ('ConfigRecord', 'CONFIG_RECORD', (0, 0), (0, None), (
        ('resourceType', 'int8', (0, None), None, None, None, None),
        ('resourceName', 'string', (0, None), None, None, None, None),
        ('name', 'string', (0, None), None, None, None, None),
        ('value', 'string', (0, None), (0, None), None, None, None),
    )),
    5: ('PartitionChangeRecord', 'PARTITION_CHANGE_RECORD', (0, 2), (0, None), (
        ('partitionId', 'int32', (0, None), None, None, None, '-1'),
        ('topicId', 'uuid', (0, None), None, None, None, None),
        ('isr', '[]int32', (0, None), (0, None), 0, (0, None), 'null'),
        ('leader', 'int32', (0, None), None, 1, (0, None), '-2'),
        ('replicas', '[]int32', (0, None), (0, None), 2, (0, None), 'null'),
        ('removingReplicas', '[]int32', (0, None), (0, None), 3, (0, None), 'null'),
        ('addingReplicas', '[]int32', (0, None), (0, None), 4, (0, None), 'null'),
        ('leaderRecoveryState', 'int8', (0, None), None, 5, (0, None), '-1'),
        ('directories', '[]uuid', (1, None), (1, None), 8, (1, None), 'null'),
        ('eligibleLeaderReplicas', '[]int32', (2, None), (2, None), 6, (2, None), 'null'),
        ('lastKnownElr', '[]int32', (2, None), (2, None), 7, (2, None), 'null'),
    )),
    7: ('FenceBrokerRecord', 'FENCE_BROKER_RECORD', (0, 0), (0, None), (
        ('id', 'int32', (0, None), None, None, None, None),
        ('epoch', 'int64', (0, None), None, None, None, None),
    )),
    8: ('UnfenceBrokerRecord', 'UNFENCE_BROKER_RECORD', (0, 0), (0, None), (
        ('id', 'int32', (0, None), None, None, None, None),
        ('epoch', 'int64', (0, None), None, None, None, None),
    )),
    9: ('RemoveTopicRecord', 'REMOVE_TOPIC_RECORD', (0, 0), (0, None), (
        ('topicId', 'uuid', (0, None), None, None, None, None),
    )),
    10: ('DelegationTokenRecord', 'DELEGATION_TOKEN_RECORD', (0, 0), (0, None), (
        ('owner', 'string', (0, None), None, None, None, None),
        ('requester', 'string', (0, None), None, None, None, None),
        ('renewers', '[]string', (0, None), None, None, None, None),
        ('issueTimestamp', 'int64', (0, None), None, None, None, None),
        ('maxTimestamp', 'int64', (0, None), None, None, None, None),
        ('expirationTimestamp', 'int64', (0, None), None, None, None, None),
        ('tokenId', 'string', (0, None), None, None, None, None),
    )),
    11: ('UserScramCredentialRecord', 'USER_SCRAM_CREDENTIAL_RECORD', (0, 0), (0, None), (
        ('name', 'string', (0, None), None, None, None, None),
        ('mechanism', 'int8', (0, None), None, None, None, None),
        ('salt', 'bytes', (0, None), None, None, None, None),
        ('storedKey', 'bytes', (0, None), None, None, None, None),
        ('serverKey', 'bytes', (0, None), None, None, None, None),
        ('iterations', 'int32', (0, None), None, None, None, None),
    )),
    12: ('FeatureLevelRecord', 'FEATURE_LEVEL_RECORD', (0, 0), (0, None), (
        ('name', 'string', (0, None), None, None, None, None),
        ('featureLevel', 'int16', (0, None), None, None, None, None),
    )),
    14: ('ClientQuotaRecord', 'CLIENT_QUOTA_RECORD', (0, 0), (0, None), (
        ('entity', '[]struct', (0, None), None, None, None, None, (
            ('entityType', 'string', (0, None), None, None, None, None),
            ('entityName', 'string', (0, None), (0, None), None, None, None),
        )),
        ('key', 'string', (0, None), None, None, None, None),
        ('value', 'float64', (0, None), None, None, None, None),
        ('remove', 'bool', (0, None), None, None, None, None),
    )),
    15: ('ProducerIdsRecord', 'PRODUCER_IDS_RECORD', (0, 0), (0, None), (
        ('brokerId', 'int32', (0, None), None, None, None, None),
        ('brokerEpoch', 'int64', (0, None), None, None, None, '-1'),
        ('nextProducerId', 'int64', (0, None), None, None, None, None),
    )),
    17: ('BrokerRegistrationChangeRecord', 'BROKER_REGISTRATION_CHANGE_RECORD', (0, 3), (0, None), (
        ('brokerId', 'int32', (0, None), None, None, None, None),
        ('brokerEpoch', 'int64', (0, None), None, None, None, None),
        ('fenced', 'int8', (0, None), None, 0, (0, None), None),
        ('inControlledShutdown', 'int8', (1, None), None, 1, (1, None), None),
        ('logDirs', '[]uuid', (2, None), None, 2, (2, None), None),
        ('cordonedLogDirs', '[]uuid', (3, None), (3, None), 3, (3, None), 'null'),
    )),
    18: ('AccessControlEntryRecord', 'ACCESS_CONTROL_ENTRY_RECORD', (0, 0), (0, None), (
        ('id', 'uuid', (0, None), None, None, None, None),
        ('resourceType', 'int8', (0, None), None, None, None, None),
        ('resourceName', 'string', (0, None), None, None, None, None),
        ('patternType', 'int8', (0, None), None, None, None, None),
        ('principal', 'string', (0, None), None, None, None, None),
        ('host', 'string', (0, None), None, None, None, None),
        ('operation', 'int8', (0, None), None, None, None, None),
        ('permissionType', 'int8', (0, None), None, None, None, None),
    )),
    19: ('RemoveAccessControlEntryRecord', 'REMOVE_ACCESS_CONTROL_ENTRY_RECORD', (0, 0), (0, None), (
        ('id', 'uuid', (0, None), None, None, None, None),
    )),
    20: ('NoOpRecord', 'NO_OP_RECORD', (0, 0), (0, None), (
    )),
    21: ('ZkMigrationStateRecord', 'ZK_MIGRATION_STATE_RECORD', (0, 0), (0, None), (
        ('zkMigrationState', 'int8', (0, None), None, None, None, None),
    )),
    22: ('RemoveUserScramCredentialRecord', 'REMOVE_USER_SCRAM_CREDENTIAL_RECORD', (0, 0), (0, None), (
        ('name', 'string', (0, None), None, None, None, None),
        ('mechanism', 'int8', (0, None), None, None, None, None),
    )),
    23: ('BeginTransactionRecord', 'BEGIN_TRANSACTION_RECORD', (0, 0), (0, None), (
        ('name', 'string', (0, None), (0, None), 0, (0, None), 'null'),
    )),
    24: ('EndTransactionRecord', 'END_TRANSACTION_RECORD', (0, 0), (0, None), (
    )),
    25: ('AbortTransactionRecord', 'ABORT_TRANSACTION_RECORD', (0, 0), (0, None), (
        ('reason', 'string', (0, None), (0, None), 0, (0, None), 'null'),
    )),
    26: ('RemoveDelegationTokenRecord', 'REMOVE_DELEGATION_TOKEN_RECORD', (0, 0), (0, None), (
        ('tokenId', 'string', (0, None), None, None, None, None),
    )),
    27: ('RegisterControllerRecord', 'REGISTER_CONTROLLER_RECORD', (0, 0), (0, None), (
        ('controllerId', 'int32', (0, None), None, None, None, None),
        ('incarnationId', 'uuid', (0, None), None, None, None, None),
        ('zkMigrationReady', 'bool', (0, None), None, None, None, None),
        ('endPoints', '[]struct', (0, None), None, None, None, None, (
            ('name', 'string', (0, None), None, None, None, None),
            ('host', 'string', (0, None), None, None, None, None),
            ('port', 'uint16', (0, None), None, None, None, None),
            ('securityProtocol', 'int16', (0, None), None, None, None, None),
        )),
        ('features', '[]struct', (0, None), None, None, None, None, (
            ('name', 'string', (0, None), None, None, None, None),
            ('minSupportedVersion', 'int16', (0, None), None, None, None, None),
            ('maxSupportedVersion', 'int16', (0, None), None, None, None, None),
        )),
    )),
    28: ('ClearElrRecord', 'CLEAR_ELR_RECORD', (0, 0), (0, None), (
        ('topicName', 'string', (0, None), None, None, None, None),
    )),
    29: ('UnregisterControllerRecord', 'UNREGISTER_CONTROLLER_RECORD', (0, 0), (0, None), (
        ('controllerId', 'int32', (0, None), None, None, None, None),
    )),
}

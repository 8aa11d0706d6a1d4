"""Kafka's on-disk record formats, written down once.

The compiled kernels use the same constants under the same names from ``_wire.pxd``
(a test checks that the two agree).

Every record batch in a segment file starts with the same 17 bytes, whatever its magic:
``offset int64, length int32, (4 bytes: partitionLeaderEpoch or crc), magic int8`` —
so a scanner peeks the length and magic at fixed positions, then dispatches.

v2 record batch (magic 2, Kafka >= 0.11)::

    RecordBatch =>
      baseOffset           int64
      batchLength          int32   bytes that follow this field
      partitionLeaderEpoch int32
      magic                int8    2
      crc                  uint32  CRC-32C of [attributes, end of batch)
      attributes           int16   bits 0-2 codec, 3 timestampType (1 = LogAppendTime),
                                   4 transactional, 5 control, 6 hasDeleteHorizonMs
      lastOffsetDelta      int32
      baseTimestamp        int64   deleteHorizonMs when bit 6 is set
      maxTimestamp         int64
      producerId           int64
      producerEpoch        int16
      baseSequence         int32
      recordCount          int32
      records              [Record], compressed as one payload when codec != 0

    Record =>
      length          varint  bytes that follow
      attributes      int8    unused, 0
      timestampDelta  varlong from baseTimestamp
      offsetDelta     varint  from baseOffset (gaps after compaction)
      keyLength       varint  -1 = null
      key             bytes
      valueLength     varint  -1 = null
      value           bytes
      headerCount     varint
      Header => keyLength varint, key utf-8 (never null), valueLength varint (-1 null), value

    Varints are zig-zag encoded base-128, at most 5 bytes (varint) / 10 (varlong).

Control batch records (attribute bit 5) carry a key ``version int16, type int16``;
type 0 = ABORT, 1 = COMMIT (transaction markers), 2+ = KRaft control records
(LEADER_CHANGE, SNAPSHOT_HEADER, ...). They are never returned as data rows.

Legacy message (magic 0 and 1, "message set" entries)::

    LogEntry =>
      offset       int64   v0 compressed wrapper: offset of the last inner message;
                           inner offsets absolute.  v1 wrapper: offset of the last
                           inner message; inner offsets relative (0, 1, ... n-1).
      messageSize  int32   bytes that follow this field
      crc          uint32  CRC-32 (IEEE) of [magic, end of message)
      magic        int8    0 or 1
      attributes   int8    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
                           bit 3 (v1) timestampType (1 = LogAppendTime)
      timestamp    int64   v1 only; -1 = none
      key          int32 length (-1 null) + bytes
      value        int32 length (-1 null) + bytes; a compressed wrapper's value is the
                   compressed inner message set

A v1 wrapper with LogAppendTime gives its own timestamp to every inner message.
"""
from __future__ import annotations

import struct

# ---- the prefix shared by every magic -----------------------------------------------
#: offset int64, length int32
LOG_OVERHEAD = struct.calcsize(">qi")                # 12
OFFSET_POS = 0
SIZE_POS = struct.calcsize(">q")                     # 8: batchLength / messageSize
MAGIC_POS = struct.calcsize(">qii")                  # 16: magic is at the same place
HEADER_PEEK = MAGIC_POS + 1                          # 17 bytes identify any batch

# ---- v2 record batch header -----------------------------------------------------------
V2_HEADER = struct.Struct(
    ">q"   # baseOffset
    "i"    # batchLength
    "i"    # partitionLeaderEpoch
    "b"    # magic
    "I"    # crc (CRC-32C)
    "h"    # attributes
    "i"    # lastOffsetDelta
    "q"    # baseTimestamp
    "q"    # maxTimestamp
    "q"    # producerId
    "h"    # producerEpoch
    "i"    # baseSequence
    "i"    # recordCount
)
V2_HEADER_SIZE = V2_HEADER.size                              # 61
V2_PARTITION_LEADER_EPOCH_POS = struct.calcsize(">qi")         # 12
V2_CRC_POS = struct.calcsize(">qiib")                        # 17
V2_ATTRIBUTES_POS = struct.calcsize(">qiibI")                # 21: CRC covers from here
V2_LAST_OFFSET_DELTA_POS = V2_ATTRIBUTES_POS + 2             # 23
V2_BASE_TIMESTAMP_POS = V2_LAST_OFFSET_DELTA_POS + 4         # 27
V2_MAX_TIMESTAMP_POS = V2_BASE_TIMESTAMP_POS + 8             # 35
V2_PRODUCER_ID_POS = V2_MAX_TIMESTAMP_POS + 8                # 43
V2_PRODUCER_EPOCH_POS = V2_PRODUCER_ID_POS + 8               # 51
V2_BASE_SEQUENCE_POS = V2_PRODUCER_EPOCH_POS + 2             # 53
V2_RECORD_COUNT_POS = V2_BASE_SEQUENCE_POS + 4               # 57
V2_RECORDS_POS = V2_RECORD_COUNT_POS + 4                     # 61
#: smallest batchLength a v2 batch may carry (header after the length field)
V2_MIN_BATCH_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD          # 49
#: smallest v2 record: length, attributes, timestampDelta, offsetDelta, keyLength,
#: valueLength, headerCount, one byte each
V2_MIN_RECORD_SIZE = 7

# v2 attribute bits
ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

# ---- legacy (magic 0 / 1) message ------------------------------------------------------
LEGACY_V0_HEADER = struct.Struct(">qiIbb")       # offset, size, crc, magic, attributes
LEGACY_V1_HEADER = struct.Struct(">qiIbbq")      # ... plus timestamp
LEGACY_CRC_POS = LOG_OVERHEAD                    # 12
LEGACY_MAGIC_POS = LEGACY_CRC_POS + 4            # 16 (== MAGIC_POS): CRC-32 covers from here
LEGACY_ATTRIBUTES_POS = LEGACY_MAGIC_POS + 1     # 17
LEGACY_V1_TIMESTAMP_POS = LEGACY_ATTRIBUTES_POS + 1  # 18
LEGACY_V0_KEY_POS = LEGACY_ATTRIBUTES_POS + 1        # 18: keyLength, then key
LEGACY_V1_KEY_POS = LEGACY_V1_TIMESTAMP_POS + 8      # 26
#: smallest messageSize: crc, magic, attributes, [timestamp], keyLength, valueLength
LEGACY_V0_MIN_SIZE = struct.calcsize(">Ibbii")        # 14
LEGACY_V1_MIN_SIZE = struct.calcsize(">Ibbqii")       # 22
LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE = 0x08

# ---- shared constants --------------------------------------------------------------------
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
TIMESTAMP_TYPE_NONE = -1        # magic 0
TIMESTAMP_TYPE_CREATE = 0
TIMESTAMP_TYPE_LOG_APPEND = 1

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy",
               CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

#: default cap on one batch's decompressed payload
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

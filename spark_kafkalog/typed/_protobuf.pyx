# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled Protobuf kernel: a binary column of Protobuf messages -> Arrow buffers.

Use it through :class:`spark_kafkalog.typed.protobuf.ProtobufDecoder`, which builds the plan
(``proto_schema.Plan``: flat tables of columns, messages, fields, enums) and the Arrow arrays
from the buffers :meth:`Kernel.run` returns.

Wire format (protobuf encoding guide): a message is a sequence of ``tag value``; ``tag`` is a
varint ``field_number << 3 | wire_type``; wire types 0 varint (at most 10 bytes), 1 eight
bytes, 2 a varint length then that many bytes (strings, bytes, messages, packed repeated
scalars), 5 four bytes, 3/4 start/end of a (deprecated) group. Fields come in any order and
may repeat: a singular scalar keeps its last value, a singular message merges every
occurrence (their bytes concatenated), a repeated field collects them in order.

Each message is read in two passes over its bytes: the first finds, per reader field, its
count and its last occurrence (unknown numbers and wire types that do not fit are skipped);
the second writes the fields in the reader's order (repeated fields rescan from their first
occurrence). Every length is checked against the end of its enclosing value: hostile input
ends in an error code, never a read past the buffer, and every loop consumes bytes.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.stdio cimport snprintf

import numpy as np
import pyarrow as pa

cdef enum:
    K_BOOL = 1
    K_I32 = 2
    K_I64 = 3
    K_F32 = 4
    K_F64 = 5
    K_BIN = 6
    K_STRUCT = 7
    K_LIST = 8

cdef enum:
    T_DOUBLE = 1
    T_FLOAT = 2
    T_INT64 = 3
    T_UINT64 = 4
    T_INT32 = 5
    T_FIXED64 = 6
    T_FIXED32 = 7
    T_BOOL = 8
    T_STRING = 9
    T_GROUP = 10
    T_MESSAGE = 11
    T_BYTES = 12
    T_UINT32 = 13
    T_ENUM = 14
    T_SFIXED32 = 15
    T_SFIXED64 = 16
    T_SINT32 = 17
    T_SINT64 = 18
    T_TIMESTAMP = 100
    T_DURATION = 101
    T_MAP = 102
    T_WRAPPER = 103

cdef enum:
    P_IMPLICIT = 0
    P_EXPLICIT = 1
    P_ALWAYS = 2
    P_REQUIRED = 3

cdef enum:
    E_OK = 0
    E_TRUNCATED = 1
    E_VARINT = 2
    E_TAG = 3
    E_WIRETYPE = 4
    E_GROUP = 5
    E_LENGTH = 6
    E_PACKED = 7
    E_UTF8 = 8
    E_REQUIRED = 9
    E_OVERFLOW = 10
    E_NOMAGIC = 11
    E_MAGIC = 12
    E_SCHEMA_ID = 13
    E_INDEXES = 14
    E_MESSAGE = 15
    E_NOMEM = 16
    E_TOOBIG = 17
    E_SHORT = 18

E_NOMEM_CODE = E_NOMEM
E_TOOBIG_CODE = E_TOOBIG

#: error code -> message; ``{d}`` is the detail the kernel reports
ERRORS = {
    E_TRUNCATED: "truncated message: a value runs past the end of its message ({d} bytes declared)",
    E_VARINT: "varint longer than 10 bytes",
    E_TAG: "invalid tag {d} (field number 0 or over 2**29-1)",
    E_WIRETYPE: "invalid wire type {d}",
    E_GROUP: "unbalanced or too deeply nested group (field {d})",
    E_LENGTH: "length {d} past the end of the enclosing value",
    E_PACKED: "packed fixed-width field of {d} bytes is not a whole number of items",
    E_UTF8: "string of {d} bytes is not valid UTF-8",
    E_REQUIRED: "required field number {d} is missing",
    E_OVERFLOW: "Timestamp/Duration of {d} seconds overflows microseconds",
    E_NOMAGIC: "empty value: no magic byte of the schema-registry framing",
    E_MAGIC: "magic byte {d} is not the schema-registry framing's 0",
    E_SCHEMA_ID: "unknown schema id {d}",
    E_INDEXES: "message indexes (count {d}) do not name the reader's message in the writer schema",
    E_MESSAGE: "bad message indexes (count {d})",
    E_NOMEM: "out of memory decoding Protobuf values",
    E_TOOBIG: "a column would exceed 2 GiB ({d} bytes); decode fewer rows at once",
    E_SHORT: "value of {d} bytes is shorter than the 5-byte schema-registry header",
}

cdef enum:
    NF = 15          # field table width (proto_schema.Plan.F_*)
    NM = 7           # message table width (Plan.M_*)
    MAX_GROUP_DEPTH = 64
    BIN_LIMIT = 0x7fffffff

cdef extern from *:
    """
    #define PB_MAX_SECS 9223372036854LL  /* seconds * 10**6 fits an int64 */
    """
    int64_t MAX_SECS "PB_MAX_SECS"

ctypedef struct col_t:
    int32_t kind, width, nullable
    int64_t n, cap
    uint8_t *valid
    uint8_t *data
    int64_t dlen, dcap
    int32_t *offs
    int64_t kid0, nkids

ctypedef struct fld_t:
    int64_t number, ftype, col, elem, repeated, presence, oneof, sub, enum_id, closed
    int64_t has_default, def_i, def_off, def_len, inner

ctypedef struct msg_t:
    int64_t f0, nf, col, lut0, lutn, oneof0, noneof

ctypedef struct slot_t:
    # per reader field, during a message's first pass
    int64_t cnt
    const uint8_t *first       # tag of the first occurrence
    const uint8_t *last        # value of the last occurrence (after a length)
    const uint8_t *last_end
    int64_t last_wt

ctypedef struct ctx_t:
    col_t *cols
    int64_t ncols
    const fld_t *flds
    const msg_t *msgs
    const int32_t *lut
    const int64_t *kids
    const int64_t *enum_vals     # (number, off, len) rows
    const int64_t *enums         # (v0, nv, off, len) rows
    const uint8_t *consts
    slot_t *slots                # one per field row
    int64_t *oneof_win           # one per oneof of every message
    int err
    const uint8_t *err_at
    int64_t err_detail


# The module's parts, in this order (textually one module: one extension, one C unit; the
# names as before). The cdef functions call each other across parts (dec_msg and put_value
# recurse), which Cython resolves within the module.
include "_protobuf_wire.pxi"
include "_protobuf_columns.pxi"
include "_protobuf_values.pxi"
include "_protobuf_message.pxi"
include "_protobuf_run.pxi"

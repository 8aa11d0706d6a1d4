# cython: language_level=3
"""The Java producer's default partitioner over an Arrow key column, compiled.

Keyed records: ``toPositive(murmur2(key)) % numPartitions`` — Kafka's
``BuiltInPartitioner.partitionForKey`` with ``Utils.murmur2`` / ``Utils.toPositive``
(``n & 0x7fffffff``), byte for byte. murmur2 there is MurmurHash2 (32-bit) with seed
``0x9747b28c``, the key read as little-endian 4-byte words, Java ``int`` arithmetic
(wrapping; ``>>>`` a logical shift) — reproduced here with ``uint32`` arithmetic.

Null keys: the Java client's sticky partitioner sends a run of null-keyed records to one
partition until a batch is full, then moves on, which spreads them evenly over time.
The writer groups every partition's rows into batches itself, so runs buy nothing: null
keys are dealt round-robin, record by record, starting at ``null_start`` (the Spark task
passes its partition id so tasks do not all start at partition 0). Counts per partition
therefore differ by at most one per task.

The key bytes (not their Spark type) are hashed: a string key hashes as its UTF-8 bytes,
exactly what the Java client's StringSerializer produces.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import InvalidOptionError

cdef extern from "_fastmod.h":
    uint32_t kl_fastmod_u32(uint32_t a, uint64_t m, uint32_t d) noexcept nogil


cdef uint32_t _SEED = 0x9747b28c
cdef uint32_t _M = 0x5bd1e995


cdef inline uint32_t _murmur2(const uint8_t* data, int64_t length) noexcept nogil:
    cdef uint32_t h = _SEED ^ <uint32_t>length
    cdef uint32_t k
    cdef int64_t i4
    cdef int64_t n4 = length >> 2
    cdef int64_t i
    for i in range(n4):
        i4 = i << 2
        k = (<uint32_t>data[i4] | (<uint32_t>data[i4 + 1] << 8)
             | (<uint32_t>data[i4 + 2] << 16) | (<uint32_t>data[i4 + 3] << 24))
        k *= _M
        k ^= k >> 24
        k *= _M
        h *= _M
        h ^= k
    cdef int64_t tail = length & ~(<int64_t>3)
    cdef int64_t rem = length & 3
    if rem == 3:
        h ^= <uint32_t>data[tail + 2] << 16
    if rem >= 2:
        h ^= <uint32_t>data[tail + 1] << 8
    if rem >= 1:
        h ^= <uint32_t>data[tail]
        h *= _M
    h ^= h >> 13
    h *= _M
    h ^= h >> 15
    return h


def murmur2(key) -> int:
    """Kafka's ``Utils.murmur2(byte[])`` of ``key`` (bytes-like) as a signed 32-bit int."""
    cdef const uint8_t[::1] view = memoryview(key).cast("B")
    cdef uint32_t h
    if view.shape[0] == 0:
        h = _murmur2(<const uint8_t*>NULL, 0)
    else:
        h = _murmur2(&view[0], view.shape[0])
    return <int32_t>h


_EMPTY = b"\0"


cdef inline bint _valid(const uint8_t[::1] bitmap, int64_t i) noexcept nogil:
    return (bitmap[i >> 3] >> (i & 7)) & 1


def _as_plain_binary(keys):
    """Any binary-like Arrow array -> (binary or large_binary) array of the same bytes."""
    t = keys.type
    if pa.types.is_dictionary(t):
        keys = keys.dictionary_decode()
        t = keys.type
    if pa.types.is_string(t):
        return keys.view(pa.binary())
    if pa.types.is_large_string(t):
        return keys.view(pa.large_binary())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return keys
    if (pa.types.is_binary_view(t) or pa.types.is_string_view(t)
            or pa.types.is_fixed_size_binary(t)):
        return pc.cast(keys, pa.large_binary())
    if pa.types.is_null(t):
        return pa.array([None] * len(keys), pa.binary())
    raise InvalidOptionError(f"key column must be binary or string, not {t}")


def partition_for_keys(keys, int num_partitions, int64_t null_start=0):
    """``numpy.int32`` partition of every row: ``(murmur2(key) & 0x7fffffff) % n`` for a
    non-null key, round-robin from ``null_start`` for null keys. ``keys``: a pyarrow
    Array or ChunkedArray of binary / string (any width, view or dictionary encoded)."""
    if num_partitions < 1:
        raise InvalidOptionError("num_partitions must be >= 1")
    result = np.empty(len(keys), dtype=np.int32)
    cdef int64_t at = 0
    for chunk in (keys.chunks if isinstance(keys, pa.ChunkedArray) else (keys,)):
        _hash_into(chunk, result[at:at + len(chunk)], num_partitions, null_start)
        null_start += chunk.null_count
        at += len(chunk)
    return result


cdef _hash_into(keys, int32_t[::1] out, int num_partitions, int64_t null_start):
    """:func:`partition_for_keys` of one Array, into ``out``."""
    arr = _as_plain_binary(keys)
    cdef int64_t n = len(arr)
    if n == 0:
        return
    bufs = arr.buffers()
    cdef bint large = pa.types.is_large_binary(arr.type)
    cdef int64_t off = arr.offset
    cdef const uint8_t[::1] bitmap
    cdef bint has_nulls = arr.null_count > 0 and bufs[0] is not None
    if has_nulls:
        bitmap = np.frombuffer(bufs[0], dtype=np.uint8)
        if bitmap.shape[0] * 8 < off + n:
            raise InvalidOptionError("key column validity bitmap is too short")
    cdef const uint8_t[::1] data = np.frombuffer(
        bufs[2] if bufs[2] is not None and bufs[2].size else _EMPTY, dtype=np.uint8)
    cdef const int32_t[::1] off32
    cdef const int64_t[::1] off64
    if large:
        off64 = np.frombuffer(bufs[1], dtype=np.int64)
        if off64.shape[0] < off + n + 1:
            raise InvalidOptionError("key column offsets buffer is too short")
    else:
        off32 = np.frombuffer(bufs[1], dtype=np.int32)
        if off32.shape[0] < off + n + 1:
            raise InvalidOptionError("key column offsets buffer is too short")
    cdef int64_t i, a, b, j
    cdef int64_t nulls = null_start % num_partitions
    cdef uint32_t h
    cdef uint32_t np_ = <uint32_t>num_partitions
    cdef uint64_t m = (<uint64_t>0xFFFFFFFFFFFFFFFF) // np_ + 1
    cdef int64_t data_len = data.shape[0]
    with nogil:
        for i in range(n):
            j = i + off
            if has_nulls and not _valid(bitmap, j):
                out[i] = <int32_t>nulls
                nulls += 1
                if nulls == num_partitions:
                    nulls = 0
                continue
            if large:
                a = off64[j]
                b = off64[j + 1]
            else:
                a = off32[j]
                b = off32[j + 1]
            if a < 0 or b < a or b > data_len:
                with gil:
                    raise InvalidOptionError(f"key column offsets are out of range at row {i}")
            if b == a:
                h = _murmur2(&data[0], 0)
            else:
                h = _murmur2(&data[a], b - a)
            out[i] = <int32_t>kl_fastmod_u32(h & 0x7fffffff, m, np_)


def group_by_partition(parts, int num_partitions):
    """Counting sort of row numbers by partition: ``(order, counts)`` where ``order``
    (int64) lists the rows of partition 0, then 1, ... each in row order (stable), and
    ``counts[p]`` is the number of rows of partition ``p``. O(rows), two passes.
    Raises InvalidOptionError for a partition outside ``[0, num_partitions)``."""
    if num_partitions < 1:
        raise InvalidOptionError("num_partitions must be >= 1")
    cdef const int32_t[::1] p = np.ascontiguousarray(parts, dtype=np.int32)
    cdef int64_t n = p.shape[0]
    counts_arr = np.zeros(num_partitions, dtype=np.int64)
    order_arr = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] counts = counts_arr
    cdef int64_t[::1] order = order_arr
    cdef int64_t[::1] start = np.empty(num_partitions, dtype=np.int64)
    cdef int64_t i, acc = 0
    cdef int32_t v
    with nogil:
        for i in range(n):
            v = p[i]
            if v < 0 or v >= num_partitions:
                with gil:
                    raise InvalidOptionError(f"row {i} has partition {v}, outside "
                                     f"[0, {num_partitions})")
            counts[v] += 1
        for i in range(num_partitions):
            start[i] = acc
            acc += counts[i]
        for i in range(n):
            v = p[i]
            order[start[v]] = i
            start[v] += 1
    return order_arr, counts_arr

# What Cython uses of _blockcache.h (the decode kernel's mapped output blocks, compiled
# from _blockcache.c: _decode.pyx names it in its `distutils: sources` line).
from libc.stdint cimport uint8_t
cdef extern from "_blockcache.h":
    size_t KL_BLOCK_MIN
    int kl_ncache
    size_t kl_cache_bytes
    size_t kl_cache_limit
    uint8_t* kl_block_get(size_t need, size_t* cap) noexcept nogil
    void kl_block_put(uint8_t* p, size_t cap) noexcept nogil
    void kl_cache_set_limit(size_t limit) noexcept nogil

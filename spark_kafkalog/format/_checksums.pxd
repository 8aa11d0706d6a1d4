# What Cython uses of _checksums.h (CRC-32C, CRC-32, xxHash32), shared by the kernels.
# Extern declarations only: no module.
from libc.stdint cimport uint8_t, uint32_t

cdef extern from "_checksums.h":
    int kl_crc32c_hw
    int kl_crc32c_init() noexcept nogil
    uint32_t kl_crc32c(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    void kl_crc32_init() noexcept nogil
    uint32_t kl_crc32(const uint8_t* p, size_t n) noexcept nogil
    uint32_t kl_xxh32(const uint8_t* p, size_t n, uint32_t seed) noexcept nogil

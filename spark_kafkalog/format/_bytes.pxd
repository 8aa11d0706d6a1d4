# What Cython uses of _bytes.h (big-endian loads, zig-zag varints, UTF-8 checks: static
# functions compiled into each kernel that cimports this). Extern declarations only.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "_bytes.h":
    uint16_t kl_be16(const uint8_t* p) noexcept nogil
    uint32_t kl_be32(const uint8_t* p) noexcept nogil
    uint64_t kl_be64(const uint8_t* p) noexcept nogil
    const uint8_t* kl_varint(const uint8_t* p, const uint8_t* end, int32_t* out,
                             int* err) noexcept nogil
    const uint8_t* kl_varlong(const uint8_t* p, const uint8_t* end, int64_t* out,
                              int* err) noexcept nogil
    int kl_utf8_valid(const uint8_t* p, size_t n) noexcept nogil
    size_t kl_utf8_fix(const uint8_t* p, size_t n, uint8_t* dst) noexcept nogil

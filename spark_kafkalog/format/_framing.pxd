# What Cython uses of _framing.h (the codec framings in C: static functions compiled
# into the unit of the kernel that cimports this). Extern declarations only: no module.
from libc.stdint cimport int64_t, uint8_t, uint64_t

cdef extern from "_framing.h":
    ctypedef struct kl_ferr:
        int code
        uint64_t pos, a, b
    enum:
        KL_SLACK
        KF_OK, KF_TOO_LARGE, KF_EMPTY, KF_STRAY, KF_SKIP_TRUNC, KF_SKIP_PAST, KF_LZ4_MAGIC,
        KF_LZ4_HEADER_TRUNC, KF_LZ4_VERSION, KF_LZ4_RESERVED, KF_LZ4_DICT, KF_LZ4_BLOCK_ID,
        KF_LZ4_HC, KF_LZ4_NO_END, KF_LZ4_BLOCK_BIG, KF_LZ4_BLOCK_PAST, KF_LZ4_CSUM_TRUNC,
        KF_LZ4_SIZE_CAP, KF_LZ4_BLOCK_SUM, KF_LZ4_BLOCK_BAD, KF_LZ4_BLOCK_OVER,
        KF_LZ4_SIZE_MISMATCH, KF_LZ4_CSUM, KF_SNAPPY_HEADER_TRUNC, KF_SNAPPY_LEN_TRUNC,
        KF_SNAPPY_BLOCK_PAST, KF_SNAPPY_PREAMBLE, KF_SNAPPY_DECLARED, KF_SNAPPY_BLOCK_BAD,
        KF_ZSTD_MAGIC, KF_ZSTD_HEADER_TRUNC, KF_ZSTD_RESERVED, KF_ZSTD_TRUNC,
        KF_ZSTD_BLOCK_TYPE, KF_ZSTD_BLOCK_BIG, KF_ZSTD_BLOCK_PAST, KF_ZSTD_CSUM_TRUNC
    enum:
        KL_LZ4_MAGIC, KL_XERIAL_HEADER_SIZE, KL_ZSTD_MAGIC
    ctypedef struct kl_zstd_frame:
        size_t start, end
        int has_size, dict
        uint64_t content_size, bound
    const uint8_t kl_xerial_magic[8]
    int kl_lz4_walk(const uint8_t* src, size_t n, int magic, uint64_t* bound,
                    kl_ferr* e) noexcept nogil
    int64_t kl_lz4_decode(const uint8_t* src, size_t n, int magic, uint8_t* dst, size_t cap,
                          kl_ferr* e) noexcept nogil
    int kl_snappy_walk(const uint8_t* src, size_t n, uint64_t max_size, uint64_t* total,
                       kl_ferr* e) noexcept nogil
    int kl_snappy_decode(const uint8_t* src, size_t n, uint8_t* dst, kl_ferr* e) noexcept nogil
    int kl_zstd_next(const uint8_t* src, size_t n, size_t* pos, kl_zstd_frame* f,
                     kl_ferr* e) noexcept nogil
    int64_t kl_zstd_sized_frame(const uint8_t* src, size_t n) noexcept nogil

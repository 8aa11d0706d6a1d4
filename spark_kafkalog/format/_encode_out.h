/* Output-buffer helpers of the encode kernel (static, compiled into _encode.pyx's
   unit: kl_copy_field runs per field). Declared for Cython in _encode_out.pxd. */
#ifndef KL_ENCODE_OUT_H
#define KL_ENCODE_OUT_H
#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
/* Ask for transparent huge pages on the 2 MiB-aligned interior of a big, freshly
   allocated output buffer. Filling 100+ MiB of new memory otherwise costs one page
   fault per 4 KiB -- more than writing the records themselves. A hint only. */
static void kl_hint_hugepages(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    uintptr_t a = ((uintptr_t)p + 0x1FFFFF) & ~(uintptr_t)0x1FFFFF;
    uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)0x1FFFFF;
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p; (void)n;
#endif
}

/* Copy n bytes, never reading or writing outside [s, s+n) / [d, d+n): fields of a
   few dozen bytes (keys, values, header keys) are copied by fixed-size moves the
   compiler inlines -- overlapping pairs below 16 bytes, 16-byte steps and an
   overlapping last step up to 256 -- instead of a libc call per field. */
static inline void kl_copy_field(uint8_t *d, const uint8_t *s, size_t n) {
    size_t k;
    if (n >= 16) {
        if (n > 256) { memcpy(d, s, n); return; }
        for (k = 0; k + 16 < n; k += 16) memcpy(d + k, s + k, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, s, 8); memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4); memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (k = 0; k < n; k++) d[k] = s[k];
    }
}

/* A bytes object about to be rewritten in place forgets any hash computed over its
   old contents (ob_shash: CPython <= 3.14). Returns 0 where that field is unknown,
   and then the caller does not reuse the object. */
static int kl_bytes_reset_hash(PyObject *o) {
#if PY_VERSION_HEX < 0x030F0000
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ((PyBytesObject *)o)->ob_shash = -1;
#pragma GCC diagnostic pop
    return 1;
#else
    (void)o;
    return 0;
#endif
}

#endif /* KL_ENCODE_OUT_H */

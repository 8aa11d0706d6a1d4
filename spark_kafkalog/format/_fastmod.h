/* Remainder without a division, for the partitioner (static, compiled into
   _partition.pyx's unit: it runs per row). */
#ifndef KL_FASTMOD_H
#define KL_FASTMOD_H
#include <stdint.h>

/* a % d without a division: Lemire, Kaser and Kurz, "Faster remainder by direct
   computation" (2019); m = UINT64_MAX / d + 1, exact for every 32-bit a and d */
static inline uint32_t kl_fastmod_u32(uint32_t a, uint64_t m, uint32_t d) {
    uint64_t low = m * a;
    return (uint32_t)(((__uint128_t)low * d) >> 64);
}

#endif /* KL_FASTMOD_H */

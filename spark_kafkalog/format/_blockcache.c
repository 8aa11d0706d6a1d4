/* The decode kernel's cache of mapped output blocks (see _blockcache.h). Its own
   translation unit: called once per output buffer, never per record. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "_blockcache.h"
#define KL_BLOCK_ROUND ((size_t)2 << 20)
#define KL_CACHE_SLOTS 32
static uint8_t* kl_cache_p[KL_CACHE_SLOTS];
static size_t kl_cache_cap[KL_CACHE_SLOTS];
int kl_ncache = 0;
size_t kl_cache_bytes = 0;
size_t kl_cache_limit = (size_t)384 << 20;

static void kl_cache_drop(int i) {
    munmap(kl_cache_p[i], kl_cache_cap[i]);
    kl_cache_bytes -= kl_cache_cap[i];
    memmove(kl_cache_p + i, kl_cache_p + i + 1, (size_t)(kl_ncache - i - 1) * sizeof(uint8_t*));
    memmove(kl_cache_cap + i, kl_cache_cap + i + 1, (size_t)(kl_ncache - i - 1) * sizeof(size_t));
    kl_ncache--;
}

/* A block of at least `need` bytes (*cap gets its size), or NULL. A cached block is
   taken when it is no more than twice (plus one rounding step) the request. */
uint8_t* kl_block_get(size_t need, size_t* cap) {
    int i, best = -1;
    size_t want = (need + KL_BLOCK_ROUND - 1) / KL_BLOCK_ROUND * KL_BLOCK_ROUND;
    void* p;
    for (i = 0; i < kl_ncache; i++)
        if (kl_cache_cap[i] >= want && kl_cache_cap[i] <= 2 * want + KL_BLOCK_ROUND
            && (best < 0 || kl_cache_cap[i] < kl_cache_cap[best]))
            best = i;
    if (best >= 0) {
        uint8_t* b = kl_cache_p[best];
        *cap = kl_cache_cap[best];
        kl_cache_bytes -= kl_cache_cap[best];
        memmove(kl_cache_p + best, kl_cache_p + best + 1,
                (size_t)(kl_ncache - best - 1) * sizeof(uint8_t*));
        memmove(kl_cache_cap + best, kl_cache_cap + best + 1,
                (size_t)(kl_ncache - best - 1) * sizeof(size_t));
        kl_ncache--;
        return b;
    }
    p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, want, MADV_HUGEPAGE);
#endif
    *cap = want;
    return (uint8_t*)p;
}

/* Give a block back: cached (evicting the oldest) when it fits the limit, else unmapped. */
void kl_block_put(uint8_t* p, size_t cap) {
    if (cap > kl_cache_limit) { munmap(p, cap); return; }
    while (kl_ncache && (kl_ncache == KL_CACHE_SLOTS || kl_cache_bytes + cap > kl_cache_limit))
        kl_cache_drop(0);
    kl_cache_p[kl_ncache] = p;
    kl_cache_cap[kl_ncache] = cap;
    kl_ncache++;
    kl_cache_bytes += cap;
}

void kl_cache_set_limit(size_t limit) {
    kl_cache_limit = limit;
    while (kl_ncache && kl_cache_bytes > kl_cache_limit) kl_cache_drop(0);
}

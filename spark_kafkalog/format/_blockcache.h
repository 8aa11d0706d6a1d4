/* Output buffers of 1 MiB and more come from anonymous mappings that are cached
   when the Arrow buffers over them are released, and handed out again by the next
   decode call. Fresh memory from the OS is zeroed by the kernel page by page on
   first touch; for a decode call that writes ~150 bytes of output per record that
   zeroing (and, for transparent huge pages, finding and compacting free 2 MiB
   pages) costs as much as a fifth of the call, and pyarrow's allocator returns big
   blocks to the OS between calls. The cache is bounded (kl_cache_limit bytes of
   idle blocks, KL_CACHE_SLOTS blocks; the oldest are unmapped first). */
#ifndef KL_BLOCKCACHE_H
#define KL_BLOCKCACHE_H
#include <stddef.h>
#include <stdint.h>

/* outputs below this size come from pyarrow's pool, not from a block */
#define KL_BLOCK_MIN ((size_t)1 << 20)

/* private to the extension module that links _blockcache.c */
#pragma GCC visibility push(hidden)
extern int kl_ncache;          /* idle blocks cached */
extern size_t kl_cache_bytes;  /* their bytes */
extern size_t kl_cache_limit;  /* bound on kl_cache_bytes (kl_cache_set_limit) */

/* A block of at least `need` bytes (*cap gets its size), or NULL. */
uint8_t* kl_block_get(size_t need, size_t* cap);
/* Give a block back: cached (evicting the oldest) when it fits the limit, else unmapped. */
void kl_block_put(uint8_t* p, size_t cap);
void kl_cache_set_limit(size_t limit);
#pragma GCC visibility pop

#endif /* KL_BLOCKCACHE_H */

/* engine/block_hash: the chained 128-bit hash that names a full KV block for prefix caching.
 * H(parent, tokens of the block, extra key): equal hashes mean equal token prefixes (and equal
 * salts), so a cached block can serve any request whose prefix hashes the same.
 * Pure functions; any thread. */
#ifndef XI_BLOCK_HASH_H
#define XI_BLOCK_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct xi_block_hash {
    uint64_t lo, hi;
} xi_block_hash;

/* parent == NULL for a request's first block. extra (may be NULL) separates namespaces,
 * e.g. a request's cache_salt; it is mixed into the first block only, the chain carries it. */
xi_block_hash xi_block_hash_compute(const xi_block_hash *parent, const int32_t *tokens, int n,
                                    const void *extra, size_t extra_len);

static inline int xi_block_hash_eq(const xi_block_hash *a, const xi_block_hash *b) {
    return a->lo == b->lo && a->hi == b->hi;
}

#endif

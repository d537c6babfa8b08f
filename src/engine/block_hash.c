#define XXH_STATIC_LINKING_ONLY
#include "engine/block_hash.h"

#include <xxhash.h>

/* The root's parent is a fixed non-zero constant so that an empty salt and "no parent" still
 * hash differently from any real parent value of zero. */
static const xi_block_hash ROOT = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full};

xi_block_hash xi_block_hash_compute(const xi_block_hash *parent, const int32_t *tokens, int n,
                                    const void *extra, size_t extra_len) {
    /* Streaming state on the stack: hashing runs in the token loop, which must not allocate. */
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    const xi_block_hash *p = parent ? parent : &ROOT;
    uint64_t words[2] = {p->lo, p->hi};
    XXH3_128bits_update(&st, words, sizeof words);
    uint32_t len = (uint32_t)n;
    XXH3_128bits_update(&st, &len, sizeof len);
    XXH3_128bits_update(&st, tokens, (size_t)n * sizeof *tokens);
    if (extra && extra_len) {
        uint64_t elen = extra_len;
        XXH3_128bits_update(&st, &elen, sizeof elen);
        XXH3_128bits_update(&st, extra, extra_len);
    }
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    return (xi_block_hash){h.low64, h.high64};
}

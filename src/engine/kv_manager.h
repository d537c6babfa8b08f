/* engine/kv_manager: per-request block tables on top of the block pool (vLLM v1's
 * KVCacheManager for one full-attention group): prefix-cache lookup, slot allocation for the
 * tokens scheduled this step, caching of blocks as they fill, freeing. Token counts and block
 * ids only. Engine thread only. */
#ifndef XI_KV_MANAGER_H
#define XI_KV_MANAGER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/block_pool.h"
#include "engine/request.h"

typedef struct xi_kv_manager {
    xi_block_pool pool;
    int block_size;
    int enable_caching;
    int max_model_len;
    /* prefix-cache statistics in tokens; lookups of preempted requests are kept apart so the
     * hit rate describes what clients sent */
    int64_t queries, hits;
    int64_t preempted_queries, preempted_hits;
} xi_kv_manager;

int xi_kv_manager_init(xi_kv_manager *km, int n_blocks, int block_size, int enable_caching,
                       int max_model_len, char *err, size_t errlen);
void xi_kv_manager_free(xi_kv_manager *km);

/* Longest run of cached full blocks that prefixes r's tokens, capped at n_tokens - 1 tokens
 * so the last token is always computed (its logits are needed). Writes the block ids to
 * out[r->cap_blocks] and returns their count (tokens = count * block_size). Nothing is
 * touched yet; allocate_slots does that. */
int xi_kv_manager_get_computed_blocks(const xi_kv_manager *km, const xi_request *r, int32_t *out);

/* Add one lookup of r that found n_hit_blocks to the statistics. The scheduler calls it when
 * it admits r, not at every lookup: a request that waits a step (no budget, no blocks) is
 * looked up again, and counting each lookup would count its tokens and hits twice. */
void xi_kv_manager_count_lookup(xi_kv_manager *km, const xi_request *r, int n_hit_blocks);

/* Make room for num_new_tokens more tokens of r after its num_computed tokens plus
 * num_new_computed cached ones (the blocks new_computed[n_new_computed] from the lookup).
 * Touches the hit blocks, appends them and fresh blocks to r's table, and registers in the
 * cache every block that is full once this step's tokens are written.
 * Returns 0, or -1 (nothing changed) when the pool lacks blocks. */
int xi_kv_manager_allocate_slots(xi_kv_manager *km, xi_request *r, int num_new_tokens,
                                 int num_new_computed, const int32_t *new_computed,
                                 int n_new_computed);

/* Return r's blocks to the pool, tail first (its last blocks are evicted first). */
void xi_kv_manager_free_request(xi_kv_manager *km, xi_request *r);

static inline int xi_kv_manager_num_free(const xi_kv_manager *km) {
    return xi_block_pool_num_free(&km->pool);
}

#endif

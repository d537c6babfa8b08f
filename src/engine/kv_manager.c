#include "engine/kv_manager.h"

#include <string.h>

#include "base/base.h"

int xi_kv_manager_init(xi_kv_manager *km, int n_blocks, int block_size, int enable_caching,
                       int max_model_len, char *err, size_t errlen) {
    memset(km, 0, sizeof *km);
    if (block_size < 1) return xi_errf(err, errlen, "block_size: %d, must be >= 1", block_size);
    if (xi_block_pool_init(&km->pool, n_blocks, enable_caching, err, errlen)) return -1;
    km->block_size = block_size;
    km->enable_caching = enable_caching;
    km->max_model_len = max_model_len;
    return 0;
}

void xi_kv_manager_free(xi_kv_manager *km) {
    xi_block_pool_free(&km->pool);
    memset(km, 0, sizeof *km);
}

int xi_kv_manager_get_computed_blocks(const xi_kv_manager *km, const xi_request *r, int32_t *out) {
    if (!km->enable_caching || r->lim.skip_prefix_cache) return 0;
    int max_blocks = (r->n_tokens - 1) / km->block_size;
    if (max_blocks > r->n_hashes) max_blocks = r->n_hashes;
    int n = 0;
    while (n < max_blocks) {
        int32_t id = xi_block_pool_lookup(&km->pool, &r->hashes[n]);
        if (id < 0) break;
        out[n++] = id;
    }
    return n;
}

void xi_kv_manager_count_lookup(xi_kv_manager *km, const xi_request *r, int n_hit_blocks) {
    if (!km->enable_caching || r->lim.skip_prefix_cache) return;
    if (r->n_preemptions) {
        km->preempted_queries += r->n_tokens;
        km->preempted_hits += (int64_t)n_hit_blocks * km->block_size;
    } else {
        km->queries += r->n_tokens;
        km->hits += (int64_t)n_hit_blocks * km->block_size;
    }
}

int xi_kv_manager_allocate_slots(xi_kv_manager *km, xi_request *r, int num_new_tokens,
                                 int num_new_computed, const int32_t *new_computed,
                                 int n_new_computed) {
    xi_block_pool *bp = &km->pool;
    int bs = km->block_size;
    int num_computed = r->num_computed + num_new_computed;
    int need = XI_MIN(num_computed + num_new_tokens, km->max_model_len);
    need = XI_MIN(need, r->cap_tokens);
    int required = (need + bs - 1) / bs;
    int n_fresh = XI_MAX(required - r->n_blocks - n_new_computed, 0);
    /* A hit on a free cached block takes it out of the free queue too. */
    int n_take = n_fresh;
    for (int i = 0; i < n_new_computed; i++)
        if (bp->ref_cnt[new_computed[i]] == 0) n_take++;
    if (n_take > xi_block_pool_num_free(bp)) return -1;

    if (n_new_computed) {
        xi_block_pool_touch(bp, new_computed, n_new_computed);
        memcpy(r->blocks + r->n_blocks, new_computed, (size_t)n_new_computed * sizeof *new_computed);
        r->n_blocks += n_new_computed;
        /* hit blocks are registered already */
        r->n_cached_blocks = r->n_blocks;
    }
    if (n_fresh) {
        xi_block_pool_get_new(bp, n_fresh, r->blocks + r->n_blocks);
        r->n_blocks += n_fresh;
    }
    if (!km->enable_caching) return 0;
    /* Blocks are registered when scheduled, before the forward writes them: the forward of
     * this step fills them before any later step can read them, as in vLLM. */
    int n_full = XI_MIN(num_computed + num_new_tokens, r->n_tokens) / bs;
    n_full = XI_MIN(n_full, r->n_blocks);
    for (int i = r->n_cached_blocks; i < n_full; i++)
        xi_block_pool_cache(bp, r->blocks[i], &r->hashes[i]);
    if (n_full > r->n_cached_blocks) r->n_cached_blocks = n_full;
    return 0;
}

void xi_kv_manager_free_request(xi_kv_manager *km, xi_request *r) {
    for (int i = r->n_blocks - 1; i >= 0; i--) xi_block_pool_release(&km->pool, &r->blocks[i], 1);
    r->n_blocks = 0;
    r->n_cached_blocks = 0;
}

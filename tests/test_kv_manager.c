/* KV manager: prefix-cache hits with exact block ids and ref counts, the n-1 cap, caching as
 * blocks fill, tail-first eviction, allocation failure leaving state untouched (the cases of
 * vLLM's tests/v1/core/test_prefix_caching.py, block size 4 instead of 16). */
#include <stdlib.h>

#include "engine/kv_manager.h"
#include "test.h"

#define BS 4

static xi_request *mkreq(int64_t id, const int32_t *toks, int n, const char *salt) {
    xi_request *r = calloc(1, sizeof *r);
    xi_request_limits lim = {.max_tokens = 64, .eos_token_id = -1};
    if (xi_request_init(r, id, toks, n, &lim, 256, BS, salt, NULL, 0)) {
        free(r);
        return NULL;
    }
    return r;
}

static void rmreq(xi_request *r) {
    xi_request_free(r);
    free(r);
}

/* Look up, then allocate the rest of r's tokens as one step would. */
static int admit(xi_kv_manager *km, xi_request *r, int32_t *hits, int *n_hit) {
    *n_hit = xi_kv_manager_get_computed_blocks(km, r, hits);
    int hit_tokens = *n_hit * BS;
    if (xi_kv_manager_allocate_slots(km, r, r->n_tokens - hit_tokens, hit_tokens, hits, *n_hit))
        return -1;
    xi_kv_manager_count_lookup(km, r, *n_hit);
    r->num_computed = r->n_tokens;
    return 0;
}

static int same_ids(const int32_t *a, const int32_t *b, int n) {
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

TEST(test_kv_manager_prefix_hit_shares_full_blocks_only) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 11, BS, 1, 1024, NULL, 0) == 0);
    /* 3 common full blocks + 3 own tokens */
    int32_t t0[15] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3};
    int32_t t1[14] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 5, 5};
    xi_request *r0 = mkreq(0, t0, 15, NULL), *r1 = mkreq(1, t1, 14, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, r0, hits, &n_hit) == 0);
    CHECK_EQ(n_hit, 0);
    int32_t want0[4] = {1, 2, 3, 4};
    CHECK_EQ(r0->n_blocks, 4);
    CHECK(same_ids(r0->blocks, want0, 4));
    CHECK_EQ(r0->n_cached_blocks, 3); /* the partial 4th block is not cached */
    CHECK(admit(&km, r1, hits, &n_hit) == 0);
    CHECK_EQ(n_hit, 3);
    int32_t want1[4] = {1, 2, 3, 5};
    CHECK(same_ids(r1->blocks, want1, 4));
    for (int b = 1; b <= 3; b++) CHECK_EQ(km.pool.ref_cnt[b], 2);
    CHECK_EQ(km.pool.ref_cnt[4], 1);
    CHECK_EQ(km.pool.ref_cnt[5], 1);
    CHECK_EQ(km.queries, 15 + 14);
    CHECK_EQ(km.hits, 12);

    /* free both: the free queue gets r0's blocks tail first, then r1's unique block */
    xi_kv_manager_free_request(&km, r0);
    xi_kv_manager_free_request(&km, r1);
    int32_t order[16];
    int n = xi_block_pool_free_order(&km.pool, order, 16);
    CHECK_EQ(n, 10);
    int32_t want_order[10] = {6, 7, 8, 9, 10, 4, 5, 3, 2, 1};
    CHECK(same_ids(order, want_order, 10));
    rmreq(r0);
    rmreq(r1);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_hit_capped_to_leave_one_token_to_compute) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 11, BS, 1, 1024, NULL, 0) == 0);
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    xi_request *a = mkreq(0, t, 8, NULL), *b = mkreq(1, t, 8, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    CHECK_EQ(a->n_cached_blocks, 2);
    /* both blocks are cached, but the last token must be computed: only one block hits */
    CHECK(admit(&km, b, hits, &n_hit) == 0);
    CHECK_EQ(n_hit, 1);
    CHECK_EQ(b->blocks[0], a->blocks[0]);
    CHECK(b->blocks[1] != a->blocks[1]);
    /* b's own second block has the same hash: both stay registered */
    CHECK_EQ(b->n_cached_blocks, 2);
    CHECK_EQ(km.pool.n_cached, 3);
    xi_kv_manager_free_request(&km, a);
    xi_kv_manager_free_request(&km, b);
    rmreq(a);
    rmreq(b);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_evicts_lru_tail_first) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 7, BS, 1, 1024, NULL, 0) == 0); /* 6 usable */
    int32_t t[13];
    for (int i = 0; i < 13; i++) t[i] = 100 + i;
    xi_request *a = mkreq(0, t, 13, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    int32_t want[4] = {1, 2, 3, 4};
    CHECK(same_ids(a->blocks, want, 4));
    xi_kv_manager_free_request(&km, a);
    /* free queue now 5 6 4 3 2 1: a request needing 3 fresh blocks takes 5, 6 and then 4,
     * the tail block of a (not cached: it was partial) */
    int32_t u[10];
    for (int i = 0; i < 10; i++) u[i] = 500 + i;
    xi_request *b = mkreq(1, u, 10, NULL);
    CHECK(admit(&km, b, hits, &n_hit) == 0);
    int32_t wantb[3] = {5, 6, 4};
    CHECK(same_ids(b->blocks, wantb, 3));
    /* one more fresh block evicts a's third cached block (block 3), a's prefix of two hits */
    int32_t v[3] = {900, 901, 902};
    xi_request *c = mkreq(2, v, 3, NULL);
    CHECK(admit(&km, c, hits, &n_hit) == 0);
    CHECK_EQ(c->blocks[0], 3);
    CHECK_EQ(km.pool.n_evictions, 1);
    xi_request *a2 = mkreq(3, t, 13, NULL);
    CHECK_EQ(xi_kv_manager_get_computed_blocks(&km, a2, hits), 2);
    CHECK_EQ(hits[0], 1);
    CHECK_EQ(hits[1], 2);
    rmreq(a);
    rmreq(b);
    rmreq(c);
    rmreq(a2);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_caches_generated_tokens_as_blocks_fill) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 11, BS, 1, 1024, NULL, 0) == 0);
    int32_t t[6] = {1, 2, 3, 4, 5, 6};
    xi_request *a = mkreq(0, t, 6, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    CHECK_EQ(a->n_cached_blocks, 1);
    /* decode: append 7, 8, 9 one at a time, scheduling each as the engine would */
    for (int32_t tok = 7; tok <= 9; tok++) {
        CHECK(xi_request_append(a, tok) == 0);
        CHECK(xi_kv_manager_allocate_slots(&km, a, 1, 0, NULL, 0) == 0);
        a->num_computed++;
    }
    /* tokens 1..8 fill two blocks; the token 9 block is partial */
    CHECK_EQ(a->n_blocks, 3);
    CHECK_EQ(a->n_cached_blocks, 2);
    int32_t q[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    xi_request *b = mkreq(1, q, 10, NULL);
    CHECK_EQ(xi_kv_manager_get_computed_blocks(&km, b, hits), 2);
    CHECK_EQ(hits[1], a->blocks[1]);
    rmreq(a);
    rmreq(b);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_failed_allocation_changes_nothing) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 6, BS, 1, 1024, NULL, 0) == 0); /* 5 usable */
    int32_t t[12];
    for (int i = 0; i < 12; i++) t[i] = i;
    xi_request *a = mkreq(0, t, 12, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    xi_kv_manager_free_request(&km, a);
    /* b shares 2 cached free blocks and needs 4 more: 2 hits + 4 fresh > 5 free */
    int32_t u[24];
    for (int i = 0; i < 24; i++) u[i] = i < 8 ? i : 1000 + i;
    xi_request *b = mkreq(1, u, 24, NULL);
    n_hit = xi_kv_manager_get_computed_blocks(&km, b, hits);
    CHECK_EQ(n_hit, 2);
    CHECK(xi_kv_manager_allocate_slots(&km, b, 24 - 8, 8, hits, n_hit) == -1);
    CHECK_EQ(b->n_blocks, 0);
    CHECK_EQ(km.pool.ref_cnt[hits[0]], 0);
    CHECK_EQ(xi_kv_manager_num_free(&km), 5);
    /* the cached blocks survived the failed attempt */
    CHECK_EQ(km.pool.n_cached, 3);
    rmreq(a);
    rmreq(b);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_cache_salt_separates_prefixes) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 11, BS, 1, 1024, NULL, 0) == 0);
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    xi_request *a = mkreq(0, t, 9, "alice"), *b = mkreq(1, t, 9, "bob"),
               *c = mkreq(2, t, 9, "alice"), *d = mkreq(3, t, 9, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    CHECK_EQ(xi_kv_manager_get_computed_blocks(&km, b, hits), 0);
    CHECK_EQ(xi_kv_manager_get_computed_blocks(&km, d, hits), 0);
    CHECK_EQ(xi_kv_manager_get_computed_blocks(&km, c, hits), 2);
    rmreq(a);
    rmreq(b);
    rmreq(c);
    rmreq(d);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_without_prefix_caching_never_hits) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 11, BS, 0, 1024, NULL, 0) == 0);
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    xi_request *a = mkreq(0, t, 9, NULL), *b = mkreq(1, t, 9, NULL);
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    CHECK(admit(&km, b, hits, &n_hit) == 0);
    CHECK_EQ(n_hit, 0);
    CHECK_EQ(b->blocks[0], 4);
    CHECK_EQ(km.pool.n_cached, 0);
    CHECK_EQ(km.queries, 0);
    xi_kv_manager_free_request(&km, a);
    xi_kv_manager_free_request(&km, b);
    CHECK_EQ(xi_kv_manager_num_free(&km), 10);
    rmreq(a);
    rmreq(b);
    xi_kv_manager_free(&km);
}

TEST(test_kv_manager_skip_prefix_cache_request_computes_everything) {
    xi_kv_manager km;
    CHECK(xi_kv_manager_init(&km, 11, BS, 1, 1024, NULL, 0) == 0);
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    xi_request *a = mkreq(0, t, 9, NULL), *b = mkreq(1, t, 9, NULL);
    b->lim.skip_prefix_cache = 1;
    int32_t hits[64];
    int n_hit;
    CHECK(admit(&km, a, hits, &n_hit) == 0);
    CHECK(admit(&km, b, hits, &n_hit) == 0);
    CHECK_EQ(n_hit, 0);
    CHECK(b->blocks[0] != a->blocks[0]);
    rmreq(a);
    rmreq(b);
    xi_kv_manager_free(&km);
}

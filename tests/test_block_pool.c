/* Block pool and block hash: exact ids, ref counts, LRU order, eviction, as vLLM's
 * tests/v1/core/test_prefix_caching.py checks them for its BlockPool. */
#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "test.h"

static xi_block_hash hash_of(int32_t t) {
    int32_t toks[4] = {t, t, t, t};
    return xi_block_hash_compute(NULL, toks, 4, NULL, 0);
}

TEST(test_block_pool_never_hands_out_null_block) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 5, 1, NULL, 0) == 0);
    CHECK_EQ(xi_block_pool_num_free(&bp), 4);
    int32_t ids[5];
    CHECK(xi_block_pool_get_new(&bp, 5, ids) == -1);
    CHECK_EQ(xi_block_pool_num_free(&bp), 4);
    CHECK(xi_block_pool_get_new(&bp, 4, ids) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(ids[i], i + 1);
        CHECK_EQ(bp.ref_cnt[ids[i]], 1);
    }
    CHECK_NEAR(xi_block_pool_usage(&bp), 1.0, 0);
    CHECK(xi_block_pool_get_new(&bp, 1, ids) == -1);
    /* releasing the null block is a no-op */
    int32_t null_id = 0;
    xi_block_pool_release(&bp, &null_id, 1);
    CHECK_EQ(xi_block_pool_num_free(&bp), 0);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_rejects_too_few_blocks) {
    xi_block_pool bp;
    char err[128] = "";
    CHECK(xi_block_pool_init(&bp, 1, 1, err, sizeof err) == -1);
    CHECK(strncmp(err, "num_kv_blocks", 13) == 0);
}

TEST(test_block_pool_free_queue_is_least_recently_freed_first) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 6, 1, NULL, 0) == 0);
    int32_t ids[5], order[8];
    CHECK(xi_block_pool_get_new(&bp, 5, ids) == 0);
    int32_t rel[3] = {4, 2, 5};
    xi_block_pool_release(&bp, rel, 3);
    CHECK_EQ(xi_block_pool_free_order(&bp, order, 8), 3);
    CHECK_EQ(order[0], 4);
    CHECK_EQ(order[1], 2);
    CHECK_EQ(order[2], 5);
    int32_t got[2];
    CHECK(xi_block_pool_get_new(&bp, 2, got) == 0);
    CHECK_EQ(got[0], 4);
    CHECK_EQ(got[1], 2);
    CHECK_NEAR(xi_block_pool_usage(&bp), 4.0 / 5.0, 1e-12);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_shared_block_freed_only_at_ref_zero) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 4, 1, NULL, 0) == 0);
    int32_t ids[1];
    CHECK(xi_block_pool_get_new(&bp, 1, ids) == 0);
    xi_block_pool_touch(&bp, ids, 1);
    CHECK_EQ(bp.ref_cnt[1], 2);
    xi_block_pool_release(&bp, ids, 1);
    CHECK_EQ(bp.ref_cnt[1], 1);
    CHECK_EQ(xi_block_pool_num_free(&bp), 2);
    xi_block_pool_release(&bp, ids, 1);
    CHECK_EQ(bp.ref_cnt[1], 0);
    CHECK_EQ(xi_block_pool_num_free(&bp), 3);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_evicts_hash_when_cached_block_is_reused) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 3, 1, NULL, 0) == 0);
    int32_t ids[2];
    CHECK(xi_block_pool_get_new(&bp, 2, ids) == 0);
    xi_block_hash h1 = hash_of(1), h2 = hash_of(2);
    xi_block_pool_cache(&bp, 1, &h1);
    xi_block_pool_cache(&bp, 2, &h2);
    /* free in reverse order: block 2 is freed first, so it is evicted first */
    int32_t rel[2] = {2, 1};
    xi_block_pool_release(&bp, rel, 2);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h1), 1);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h2), 2);
    CHECK(xi_block_pool_get_new(&bp, 1, ids) == 0);
    CHECK_EQ(ids[0], 2);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h2), -1);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h1), 1);
    CHECK_EQ(bp.n_evictions, 1);
    CHECK_EQ(bp.n_cached, 1);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_touch_takes_block_out_of_middle_of_queue) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 5, 1, NULL, 0) == 0);
    int32_t ids[4], order[8];
    CHECK(xi_block_pool_get_new(&bp, 4, ids) == 0);
    xi_block_hash h = hash_of(7);
    xi_block_pool_cache(&bp, 3, &h);
    xi_block_pool_release(&bp, ids, 4);
    int32_t hit = xi_block_pool_lookup(&bp, &h);
    CHECK_EQ(hit, 3);
    xi_block_pool_touch(&bp, &hit, 1);
    CHECK_EQ(bp.ref_cnt[3], 1);
    CHECK_EQ(xi_block_pool_free_order(&bp, order, 8), 3);
    CHECK_EQ(order[0], 1);
    CHECK_EQ(order[1], 2);
    CHECK_EQ(order[2], 4);
    /* a touched block keeps its hash: it is still a hit for others */
    CHECK_EQ(xi_block_pool_lookup(&bp, &h), 3);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_duplicate_hashes_stay_findable) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 4, 1, NULL, 0) == 0);
    int32_t ids[3];
    CHECK(xi_block_pool_get_new(&bp, 3, ids) == 0);
    xi_block_hash h = hash_of(3);
    xi_block_pool_cache(&bp, 2, &h);
    xi_block_pool_cache(&bp, 1, &h);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h), 2);
    int32_t two = 2;
    xi_block_pool_release(&bp, &two, 1);
    int32_t got;
    CHECK(xi_block_pool_get_new(&bp, 1, &got) == 0);
    CHECK_EQ(got, 2);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h), 1);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_without_caching_never_hits) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 4, 0, NULL, 0) == 0);
    int32_t ids[1];
    CHECK(xi_block_pool_get_new(&bp, 1, ids) == 0);
    xi_block_hash h = hash_of(1);
    xi_block_pool_cache(&bp, ids[0], &h);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h), -1);
    CHECK_EQ(bp.n_cached, 0);
    xi_block_pool_free(&bp);
}

TEST(test_block_pool_reset_prefix_cache_needs_idle_pool) {
    xi_block_pool bp;
    CHECK(xi_block_pool_init(&bp, 4, 1, NULL, 0) == 0);
    int32_t ids[2];
    CHECK(xi_block_pool_get_new(&bp, 2, ids) == 0);
    xi_block_hash h = hash_of(5);
    xi_block_pool_cache(&bp, ids[0], &h);
    CHECK(xi_block_pool_reset_prefix_cache(&bp) == -1);
    xi_block_pool_release(&bp, ids, 2);
    CHECK(xi_block_pool_reset_prefix_cache(&bp) == 0);
    CHECK_EQ(xi_block_pool_lookup(&bp, &h), -1);
    CHECK_EQ(bp.n_cached, 0);
    xi_block_pool_free(&bp);
}

TEST(test_block_hash_depends_on_parent_tokens_and_salt) {
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    xi_block_hash ha = xi_block_hash_compute(NULL, a, 4, NULL, 0);
    xi_block_hash ha2 = xi_block_hash_compute(NULL, a, 4, NULL, 0);
    xi_block_hash hb = xi_block_hash_compute(NULL, b, 4, NULL, 0);
    CHECK(xi_block_hash_eq(&ha, &ha2));
    CHECK(!xi_block_hash_eq(&ha, &hb));
    xi_block_hash child_a = xi_block_hash_compute(&ha, a, 4, NULL, 0);
    xi_block_hash child_b = xi_block_hash_compute(&hb, a, 4, NULL, 0);
    CHECK(!xi_block_hash_eq(&child_a, &child_b));
    xi_block_hash salted = xi_block_hash_compute(NULL, a, 4, "s1", 2);
    xi_block_hash salted2 = xi_block_hash_compute(NULL, a, 4, "s2", 2);
    CHECK(!xi_block_hash_eq(&salted, &ha));
    CHECK(!xi_block_hash_eq(&salted, &salted2));
    /* a token count is part of the hash: a prefix of a block is not the block */
    xi_block_hash short_a = xi_block_hash_compute(NULL, a, 3, NULL, 0);
    CHECK(!xi_block_hash_eq(&short_a, &ha));
}

/* Scheduler: token budget splitting, max_num_seqs, running-first FCFS order, preemption of
 * the newest request and its resumption, stop conditions, aborts; and a randomized run that
 * checks the pool's ref counts against the block tables after every step (vLLM's
 * tests/v1/core/test_scheduler.py cases, block size 4). */
#include <stdlib.h>

#include "engine/scheduler.h"
#include "test.h"

#define BS 4

typedef struct env {
    xi_kv_manager km;
    xi_scheduler s;
} env;

static int env_init(env *e, int n_blocks, int max_seqs, int budget, int max_len, int chunked,
                    int caching) {
    if (xi_kv_manager_init(&e->km, n_blocks, BS, caching, max_len, NULL, 0)) return -1;
    xi_sched_params p = {max_seqs, budget, max_len, chunked};
    return xi_sched_init(&e->s, &p, &e->km, NULL, 0);
}

static void env_free(env *e) {
    xi_sched_free(&e->s);
    xi_kv_manager_free(&e->km);
}

static xi_request *mkreq_lim(int64_t id, int n_prompt, int32_t first, const xi_request_limits *lim,
                             int max_len) {
    xi_request *r = calloc(1, sizeof *r);
    int32_t *t = malloc((size_t)n_prompt * sizeof *t);
    for (int i = 0; i < n_prompt; i++) t[i] = first + i;
    int rc = xi_request_init(r, id, t, n_prompt, lim, max_len, BS, NULL, NULL, 0);
    free(t);
    if (rc) {
        free(r);
        return NULL;
    }
    return r;
}

static xi_request *mkreq(int64_t id, int n_prompt, int32_t first, int max_tokens) {
    xi_request_limits lim = {.max_tokens = max_tokens, .eos_token_id = -1};
    return mkreq_lim(id, n_prompt, first, &lim, 1024);
}

static void rmreq(xi_request *r) {
    xi_request_free(r);
    free(r);
}

/* Index of r in this step's plan, or -1. */
static int planned(const xi_scheduler *s, const xi_request *r) {
    for (int i = 0; i < s->out.n; i++)
        if (s->out.reqs[i] == r) return i;
    return -1;
}

/* Sample token 7000 + step for everyone; run update. */
static void step_update(xi_scheduler *s, int32_t tok) {
    int32_t sampled[64];
    for (int i = 0; i < s->out.n; i++) sampled[i] = tok;
    xi_sched_update(s, sampled);
}

TEST(test_scheduler_chunked_prefill_splits_prompt_by_budget) {
    env e;
    CHECK(env_init(&e, 64, 8, 16, 1024, 1, 1) == 0);
    xi_request *r = mkreq(0, 40, 1, 3);
    xi_sched_add(&e.s, r);
    int want_start[3] = {0, 16, 32}, want_n[3] = {16, 16, 8};
    for (int step = 0; step < 3; step++) {
        CHECK_EQ(xi_sched_schedule(&e.s), 1);
        CHECK_EQ(e.s.out.start[0], want_start[step]);
        CHECK_EQ(e.s.out.n_tokens[0], want_n[step]);
        CHECK_EQ(e.s.out.sample[0], step == 2);
        step_update(&e.s, 99);
        CHECK_EQ(r->n_tokens, step == 2 ? 41 : 40);
    }
    /* decode */
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK_EQ(e.s.out.start[0], 40);
    CHECK_EQ(e.s.out.n_tokens[0], 1);
    CHECK_EQ(r->n_blocks, 11);
    rmreq(r);
    env_free(&e);
}

TEST(test_scheduler_decodes_first_then_admits_waiting_fcfs_in_leftover_budget) {
    env e;
    CHECK(env_init(&e, 64, 8, 10, 1024, 1, 1) == 0);
    xi_request *a = mkreq(0, 6, 100, 5), *b = mkreq(1, 6, 200, 5), *c = mkreq(2, 6, 300, 5);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    xi_sched_add(&e.s, c);
    /* step 1: a whole (6), b chunk of 4 */
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK(e.s.out.reqs[0] == a && e.s.out.n_tokens[0] == 6 && e.s.out.sample[0]);
    CHECK(e.s.out.reqs[1] == b && e.s.out.n_tokens[1] == 4 && !e.s.out.sample[1]);
    step_update(&e.s, 1);
    /* step 2: a decodes 1, b finishes its prompt (2), c gets the remaining 7 -> 6 tokens */
    CHECK_EQ(xi_sched_schedule(&e.s), 3);
    CHECK(e.s.out.reqs[0] == a && e.s.out.n_tokens[0] == 1);
    CHECK(e.s.out.reqs[1] == b && e.s.out.start[1] == 4 && e.s.out.n_tokens[1] == 2);
    CHECK(e.s.out.reqs[2] == c && e.s.out.n_tokens[2] == 6);
    CHECK_EQ(e.s.out.total_tokens, 9);
    rmreq(a);
    rmreq(b);
    rmreq(c);
    env_free(&e);
}

TEST(test_scheduler_caps_running_at_max_num_seqs) {
    env e;
    CHECK(env_init(&e, 64, 2, 100, 1024, 1, 1) == 0);
    xi_request *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = mkreq(i, 5, 10 * i, 2);
        xi_sched_add(&e.s, r[i]);
    }
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK_EQ(e.s.n_running, 2);
    CHECK_EQ(e.s.n_waiting, 1);
    CHECK(planned(&e.s, r[2]) < 0);
    step_update(&e.s, 1);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    step_update(&e.s, 1); /* max_tokens 2: r0 and r1 finish */
    CHECK_EQ(r[0]->status, XI_REQ_FINISHED);
    CHECK_EQ(r[0]->finish, XI_REQ_FINISHED_LENGTH);
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK(e.s.out.reqs[0] == r[2]);
    for (int i = 0; i < 3; i++) rmreq(r[i]);
    env_free(&e);
}

TEST(test_scheduler_without_chunking_admits_only_whole_prompts) {
    env e;
    CHECK(env_init(&e, 64, 8, 16, 1024, 0, 1) == 0);
    xi_request *a = mkreq(0, 10, 100, 5), *b = mkreq(1, 10, 200, 5), *c = mkreq(2, 3, 300, 5);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    xi_sched_add(&e.s, c);
    /* b does not fit the 6 tokens left; FCFS: c waits behind it */
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK(e.s.out.reqs[0] == a && e.s.out.n_tokens[0] == 10);
    step_update(&e.s, 1);
    CHECK_EQ(xi_sched_schedule(&e.s), 3);
    CHECK(e.s.out.reqs[1] == b && e.s.out.n_tokens[1] == 10 && e.s.out.sample[1]);
    CHECK(e.s.out.reqs[2] == c && e.s.out.n_tokens[2] == 3);
    rmreq(a);
    rmreq(b);
    rmreq(c);
    env_free(&e);
}

TEST(test_scheduler_prefix_hit_starts_after_cached_blocks) {
    env e;
    CHECK(env_init(&e, 64, 8, 100, 1024, 1, 1) == 0);
    xi_request *a = mkreq(0, 10, 1, 5), *b = mkreq(1, 10, 1, 5);
    xi_sched_add(&e.s, a);
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    step_update(&e.s, 1);
    xi_sched_add(&e.s, b);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK(e.s.out.reqs[1] == b);
    CHECK_EQ(e.s.out.start[1], 8);
    CHECK_EQ(e.s.out.n_tokens[1], 2);
    CHECK_EQ(b->num_cached_prompt, 8);
    CHECK_EQ(b->blocks[0], a->blocks[0]);
    CHECK_EQ(b->blocks[1], a->blocks[1]);
    CHECK_EQ(e.km.pool.ref_cnt[a->blocks[0]], 2);
    rmreq(a);
    rmreq(b);
    env_free(&e);
}

/* Requests that arrive together with a common prefix compute it once: the first one's blocks
 * are registered when it is scheduled, so the next one, admitted in the same step, starts
 * after them and computes only its own tokens (the forward writes every layer's keys before
 * any attention reads them). */
TEST(test_scheduler_same_step_arrivals_compute_a_shared_prefix_once) {
    env e;
    CHECK(env_init(&e, 64, 8, 100, 1024, 1, 1) == 0);
    xi_request *a = mkreq(0, 14, 1, 5), *b = mkreq(1, 13, 1, 5); /* b: a's first 13 tokens */
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK(e.s.out.reqs[0] == a && e.s.out.start[0] == 0 && e.s.out.n_tokens[0] == 14);
    CHECK(e.s.out.reqs[1] == b);
    CHECK_EQ(e.s.out.start[1], 12);
    CHECK_EQ(e.s.out.n_tokens[1], 1);
    CHECK_EQ(e.s.out.total_tokens, 15);
    for (int i = 0; i < 3; i++) CHECK_EQ(b->blocks[i], a->blocks[i]);
    CHECK_EQ(e.km.hits, 12);
    rmreq(a);
    rmreq(b);
    env_free(&e);
}

/* The prefix-cache statistics count each admitted request once: a request looked up but left
 * waiting (here: its whole prompt does not fit the budget left) is counted when it runs. */
TEST(test_scheduler_counts_a_request_that_waited_once_in_prefix_stats) {
    env e;
    CHECK(env_init(&e, 64, 8, 16, 1024, 0, 1) == 0);
    xi_request *a = mkreq(0, 10, 1, 5), *b = mkreq(1, 10, 500, 5), *c = mkreq(2, 10, 1, 5);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    CHECK_EQ(xi_sched_schedule(&e.s), 1); /* b's 10 tokens do not fit the 6 left */
    CHECK_EQ(e.km.queries, 10);
    step_update(&e.s, 1);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK(planned(&e.s, b) == 1);
    CHECK_EQ(e.km.queries, 20);
    CHECK_EQ(e.km.hits, 0);
    step_update(&e.s, 2);
    xi_sched_add(&e.s, c); /* a's prompt again: two of its blocks hit */
    CHECK_EQ(xi_sched_schedule(&e.s), 3);
    CHECK_EQ(e.km.queries, 30);
    CHECK_EQ(e.km.hits, 8);
    rmreq(a);
    rmreq(b);
    rmreq(c);
    env_free(&e);
}

TEST(test_scheduler_preempts_newest_and_resumes_with_its_outputs) {
    env e;
    /* 6 usable blocks of 4: two prompts of 11 tokens take 3 blocks each; the first decode
     * that crosses a block boundary must preempt */
    CHECK(env_init(&e, 7, 8, 100, 1024, 1, 0) == 0);
    xi_request *a = mkreq(0, 11, 100, 8), *b = mkreq(1, 11, 200, 8);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK_EQ(xi_kv_manager_num_free(&e.km), 0);
    step_update(&e.s, 1); /* both have 12 tokens, positions 0..10 computed */
    /* a decodes token 11 in its 3rd block; so does b */
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    step_update(&e.s, 2); /* 13 tokens each: the next decode needs a 4th block */
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK(e.s.out.reqs[0] == a);
    CHECK_EQ(e.s.out.n_preempted, 1);
    CHECK_EQ(e.s.num_preemptions, 1);
    CHECK_EQ(b->status, XI_REQ_PREEMPTED);
    CHECK_EQ(b->num_computed, 0);
    CHECK_EQ(b->n_blocks, 0);
    CHECK_EQ(b->n_tokens, 13); /* outputs kept */
    CHECK(e.s.wait_head == b);
    CHECK_EQ(a->n_blocks, 4);
    step_update(&e.s, 3);
    /* a keeps going; b waits until blocks free up */
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(xi_sched_schedule(&e.s), 1);
        CHECK(e.s.out.reqs[0] == a);
        step_update(&e.s, 4);
    }
    CHECK_EQ(a->status, XI_REQ_FINISHED);
    CHECK_EQ(xi_request_num_outputs(a), 8);
    /* b is recomputed: prompt + its 2 outputs in one chunk, then samples its 3rd token */
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK(e.s.out.reqs[0] == b);
    CHECK_EQ(e.s.out.start[0], 0);
    CHECK_EQ(e.s.out.n_tokens[0], 13);
    CHECK(e.s.out.sample[0]);
    step_update(&e.s, 5);
    CHECK_EQ(b->n_tokens, 14);
    CHECK_EQ(b->tokens[11], 1);
    CHECK_EQ(b->tokens[12], 2);
    CHECK_EQ(b->tokens[13], 5);
    CHECK_EQ(b->n_preemptions, 1);
    rmreq(a);
    rmreq(b);
    env_free(&e);
}

TEST(test_scheduler_preempts_the_request_itself_when_it_is_newest) {
    env e;
    CHECK(env_init(&e, 4, 8, 100, 1024, 1, 0) == 0); /* 3 usable blocks */
    xi_request *a = mkreq(0, 2, 100, 8), *b = mkreq(1, 8, 200, 8);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    step_update(&e.s, 1);
    /* a's decode fits its block; b (the newest) needs a 3rd block: b preempts itself, and no
     * waiting request is admitted in a step that preempted */
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK(e.s.out.reqs[0] == a);
    CHECK_EQ(b->status, XI_REQ_PREEMPTED);
    CHECK_EQ(e.s.n_waiting, 1);
    CHECK_EQ(xi_kv_manager_num_free(&e.km), 2);
    step_update(&e.s, 2);
    /* next step b comes back: its 9 tokens are recomputed in 3 blocks... only 2 are free */
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK(e.s.out.reqs[0] == a);
    CHECK_EQ(e.s.n_waiting, 1);
    rmreq(a);
    rmreq(b);
    env_free(&e);
}

TEST(test_scheduler_stop_conditions_follow_min_tokens_eos_and_stop_ids) {
    env e;
    CHECK(env_init(&e, 64, 8, 100, 1024, 1, 1) == 0);
    int32_t stops[1] = {77};
    xi_request_limits lim = {.max_tokens = 10, .min_tokens = 2, .eos_token_id = 2,
                             .stop_ids = stops, .n_stop_ids = 1};
    xi_request *a = mkreq_lim(0, 3, 10, &lim, 1024);
    xi_request_limits lim_ie = lim;
    lim_ie.ignore_eos = 1;
    xi_request *b = mkreq_lim(1, 3, 10, &lim_ie, 1024);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    int32_t seq[4] = {2, 5, 2, 77}; /* EOS before min_tokens ignored; then EOS stops a */
    for (int i = 0; i < 4 && xi_sched_has_unfinished(&e.s); i++) {
        xi_sched_schedule(&e.s);
        step_update(&e.s, seq[i]);
    }
    CHECK_EQ(a->status, XI_REQ_FINISHED);
    CHECK_EQ(a->finish, XI_REQ_FINISHED_STOP);
    CHECK_EQ(a->stop_token, -1);
    CHECK_EQ(xi_request_num_outputs(a), 3);
    CHECK_EQ(b->finish, XI_REQ_FINISHED_STOP);
    CHECK_EQ(b->stop_token, 77);
    CHECK_EQ(xi_request_num_outputs(b), 4);
    CHECK_EQ(xi_kv_manager_num_free(&e.km), 63);
    rmreq(a);
    rmreq(b);
    env_free(&e);
}

TEST(test_scheduler_stops_at_max_model_len) {
    env e;
    CHECK(env_init(&e, 64, 8, 100, 12, 1, 1) == 0);
    xi_request_limits lim = {.max_tokens = 100, .eos_token_id = -1};
    xi_request *a = mkreq_lim(0, 9, 10, &lim, 12);
    xi_sched_add(&e.s, a);
    int steps = 0;
    while (xi_sched_has_unfinished(&e.s) && steps < 20) {
        xi_sched_schedule(&e.s);
        step_update(&e.s, 3);
        steps++;
    }
    CHECK_EQ(a->finish, XI_REQ_FINISHED_LENGTH);
    CHECK_EQ(a->n_tokens, 12);
    CHECK_EQ(steps, 3);
    rmreq(a);
    env_free(&e);
}

TEST(test_scheduler_finish_frees_running_and_waiting_requests) {
    env e;
    CHECK(env_init(&e, 64, 1, 100, 1024, 1, 1) == 0);
    xi_request *a = mkreq(0, 9, 10, 10), *b = mkreq(1, 9, 50, 10);
    xi_sched_add(&e.s, a);
    xi_sched_add(&e.s, b);
    xi_sched_schedule(&e.s);
    step_update(&e.s, 1);
    CHECK_EQ(xi_kv_manager_num_free(&e.km), 60);
    xi_sched_finish(&e.s, b, XI_REQ_FINISHED_ABORT);
    xi_sched_finish(&e.s, a, XI_REQ_FINISHED_ABORT);
    CHECK_EQ(e.s.n_running, 0);
    CHECK_EQ(e.s.n_waiting, 0);
    CHECK_EQ(a->finish, XI_REQ_FINISHED_ABORT);
    CHECK_EQ(xi_kv_manager_num_free(&e.km), 63);
    /* a's two full prompt blocks stay cached and evictable */
    CHECK_EQ(e.km.pool.n_cached, 2);
    CHECK(!xi_sched_has_unfinished(&e.s));
    rmreq(a);
    rmreq(b);
    env_free(&e);
}

/* ---- randomized invariants ------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Every block's ref count equals the number of live block tables holding it; free blocks are
 * exactly those at ref 0. */
static int check_refs(const env *e, xi_request **reqs, int n, char *why, size_t len) {
    const xi_block_pool *bp = &e->km.pool;
    int *cnt = calloc((size_t)bp->n_blocks, sizeof *cnt);
    for (int i = 0; i < n; i++)
        for (int b = 0; b < reqs[i]->n_blocks; b++) cnt[reqs[i]->blocks[b]]++;
    int bad = 0, zero = 0;
    for (int b = 1; b < bp->n_blocks && !bad; b++) {
        if (cnt[b] != bp->ref_cnt[b]) {
            snprintf(why, len, "block %d: ref %d, held by %d", b, bp->ref_cnt[b], cnt[b]);
            bad = 1;
        }
        zero += cnt[b] == 0;
    }
    if (!bad && zero != bp->n_free) {
        snprintf(why, len, "%d blocks at ref 0, %d in the free queue", zero, bp->n_free);
        bad = 1;
    }
    free(cnt);
    return bad ? -1 : 0;
}

TEST(test_scheduler_random_load_keeps_ref_counts_and_finishes_everything) {
    for (int chunked = 0; chunked <= 1; chunked++) {
        env e;
        CHECK(env_init(&e, 14, 6, 24, 128, chunked, 1) == 0);
        enum { N = 40 };
        xi_request *r[N];
        uint64_t seed = 12345 + chunked;
        for (int i = 0; i < N; i++) {
            int n_prompt = 1 + (int)(rng_next(&seed) % 20);
            /* a few shared prefixes so cache hits happen */
            r[i] = mkreq(i, n_prompt, (int32_t)(rng_next(&seed) % 3) * 1000, 1 + (int)(rng_next(&seed) % 30));
            CHECK(r[i]);
        }
        int added = 0, steps = 0;
        int32_t sampled[8];
        char why[128];
        while ((added < N || xi_sched_has_unfinished(&e.s)) && steps < 2000) {
            while (added < N && rng_next(&seed) % 2) xi_sched_add(&e.s, r[added++]);
            int n = xi_sched_schedule(&e.s);
            CHECK(e.s.out.total_tokens <= 24);
            CHECK(e.s.n_running <= 6);
            for (int i = 0; i < n; i++) {
                /* every scheduled token has a slot */
                xi_request *q = e.s.out.reqs[i];
                CHECK(q->n_blocks * BS >= q->num_computed);
                sampled[i] = (int32_t)(rng_next(&seed) % 50000);
            }
            CHECKF(check_refs(&e, r, added, why, sizeof why) == 0, "step %d: %s", steps, why);
            xi_sched_update(&e.s, sampled);
            /* occasionally abort a waiting or running request */
            if (added > 0 && rng_next(&seed) % 23 == 0) {
                xi_request *q = r[rng_next(&seed) % (uint64_t)added];
                xi_sched_finish(&e.s, q, XI_REQ_FINISHED_ABORT);
            }
            steps++;
        }
        CHECK(steps < 2000);
        for (int i = 0; i < N; i++) {
            CHECK_EQ(r[i]->status, XI_REQ_FINISHED);
            if (r[i]->finish == XI_REQ_FINISHED_LENGTH)
                CHECK_EQ(xi_request_num_outputs(r[i]), r[i]->lim.max_tokens);
        }
        CHECK_EQ(xi_kv_manager_num_free(&e.km), 13);
        CHECK(e.s.num_preemptions > 0);
        for (int i = 0; i < N; i++) rmreq(r[i]);
        env_free(&e);
    }
}

TEST(test_scheduler_without_chunking_splits_only_what_can_never_fit) {
    env e;
    CHECK(env_init(&e, 64, 8, 16, 1024, 0, 1) == 0);
    /* a preempted request whose prompt + outputs outgrew the whole budget (submit rejects
     * such prompts, so only recomputation can produce one) is chunked rather than stuck */
    xi_request *big = mkreq(0, 20, 100, 5), *small = mkreq(1, 3, 300, 5);
    xi_sched_add(&e.s, big);
    xi_sched_add(&e.s, small);
    CHECK_EQ(xi_sched_schedule(&e.s), 1);
    CHECK_EQ(e.s.out.n_tokens[0], 16);
    CHECK(!e.s.out.sample[0]);
    step_update(&e.s, 1);
    CHECK_EQ(xi_sched_schedule(&e.s), 2);
    CHECK(e.s.out.reqs[0] == big && e.s.out.n_tokens[0] == 4 && e.s.out.sample[0]);
    CHECK(e.s.out.reqs[1] == small && e.s.out.n_tokens[1] == 3);
    rmreq(big);
    rmreq(small);
    env_free(&e);
}

/* Fairness: a client holding every slot (one HTTP request of many sequences) with more
 * waiting cannot keep a newcomer out: the newcomer is planned within two steps, one of the big
 * client's sequences is preempted for it, and the big client keeps the other slots. */
TEST(test_scheduler_large_client_cannot_hold_a_small_one) {
    env e;
    CHECK(env_init(&e, 256, 4, 64, 1024, 1, 0) == 0);
    xi_request *big[12], *small;
    for (int i = 0; i < 12; i++) {
        CHECK(big[i] = mkreq(i, 4, 10 + i, 1000));
        big[i]->client = 100;
        xi_sched_add(&e.s, big[i]);
    }
    for (int step = 0; step < 3; step++) {
        CHECK_EQ(xi_sched_schedule(&e.s), 4); /* alone, it may use every slot */
        step_update(&e.s, 7);
    }
    CHECK(small = mkreq(50, 4, 200, 3));
    small->client = 200;
    xi_sched_add(&e.s, small);
    int steps = 0;
    while (planned(&e.s, small) < 0 && steps < 5) {
        xi_sched_schedule(&e.s);
        step_update(&e.s, 7);
        steps++;
    }
    CHECKF(steps <= 2, "the small request waited %d steps", steps);
    CHECK_EQ(e.s.num_preemptions, 1);
    CHECK_EQ(e.s.n_running, 4);
    int of_big = 0;
    for (int i = 0; i < e.s.n_running; i++) of_big += e.s.running[i]->client == 100;
    CHECK_EQ(of_big, 3);
    for (int i = 0; i < 12; i++) rmreq(big[i]);
    rmreq(small);
    env_free(&e);
}

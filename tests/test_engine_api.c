/* The public engine API on stories260K: parameter validation, stop strings and stop ids,
 * min_tokens, n parallel samples, logprobs and prompt logprobs, text prompts, the engine
 * thread with concurrent submitters, the queue limit, KV sizing, close. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "base/base.h"
#include "sample/json_fsm.h"
#include "test.h"
#include "test_engine_util.h"
#include "xinfer.h"

#define STORIES "models/stories260K"

static xi_engine *stories(void) { return open_engine(STORIES, 128, 2048, 16, 512, 1); }

static void greedy_from(xi_request_params *rp, const int32_t *ids, int n, int max_tokens) {
    xi_request_params_default(rp);
    rp->prompt_ids = ids;
    rp->n_prompt_ids = n;
    rp->max_tokens = max_tokens;
    rp->temperature = 0;
}

/* Submit rp, run to completion, return the collected outputs (heap). */
static req_out *run_one(xi_engine *e, const xi_request_params *rp) {
    req_out *o = calloc(1, sizeof *o);
    char err[256];
    if (xi_engine_submit(e, rp, on_output, o, err, sizeof err) < 0) {
        fprintf(stderr, "submit: %s\n", err);
        free(o);
        return NULL;
    }
    if (run_until_idle(e) < 0) {
        free(o);
        return NULL;
    }
    return o;
}

static const int32_t BOS[1] = {1};

TEST(test_engine_submit_errors_start_with_the_parameter_name) {
    xi_engine *e = open_engine(STORIES, 64, 2048, 16, 100, 1);
    CHECK(e);
    const char *stops[1] = {""};
    xi_logit_bias bad_bias = {9999, 1.0f};
    int32_t bad_ids[2] = {1, 512};
    xi_request_params rp;
    char err[256];
#define EXPECT_ERR(setup, prefix)                                                    \
    do {                                                                             \
        greedy_from(&rp, BOS, 1, 10);                                                \
        setup;                                                                       \
        err[0] = 0;                                                                  \
        CHECK_EQ(xi_engine_submit(e, &rp, on_output, NULL, err, sizeof err), -1);    \
        CHECKF(!strncmp(err, prefix, strlen(prefix)), "want \"%s...\", got \"%s\"", prefix, err); \
    } while (0)
    EXPECT_ERR(rp.n = 0, "n:");
    EXPECT_ERR(rp.top_p = 1.5f, "top_p:");
    EXPECT_ERR(rp.min_p = 2.0f, "min_p:");
    EXPECT_ERR(rp.presence_penalty = 3.0f, "presence_penalty:");
    EXPECT_ERR(rp.frequency_penalty = -3.0f, "frequency_penalty:");
    EXPECT_ERR((rp.logit_bias = &bad_bias, rp.n_logit_bias = 1), "logit_bias:");
    EXPECT_ERR((rp.stop = stops, rp.n_stop = 1), "stop:");
    EXPECT_ERR((rp.stop_token_ids = &bad_bias.token, rp.n_stop_token_ids = 1), "stop_token_ids:");
    EXPECT_ERR(rp.logprobs = 21, "logprobs:");
    EXPECT_ERR(rp.prompt_logprobs = -2, "prompt_logprobs:");
    EXPECT_ERR(rp.max_tokens = 0, "max_tokens:");
    EXPECT_ERR((rp.min_tokens = 11), "min_tokens:");
    EXPECT_ERR((rp.prompt_ids = bad_ids, rp.n_prompt_ids = 2), "prompt_ids:");
    EXPECT_ERR((rp.prompt_ids = NULL, rp.prompt = NULL), "prompt:");
    EXPECT_ERR((rp.prompt_ids = NULL, rp.prompt = "\xff\xfe"), "prompt");
    /* prompt + max_tokens beyond max_model_len (100) says by how much */
    EXPECT_ERR(rp.max_tokens = 105, "max_tokens:");
    CHECKF(strstr(err, "by 6"), "%s", err);
    int32_t long_prompt[100];
    for (int i = 0; i < 100; i++) long_prompt[i] = 5;
    EXPECT_ERR((rp.prompt_ids = long_prompt, rp.n_prompt_ids = 100), "prompt:");
    /* max_tokens < 0 means "until max_model_len" and is fine */
    greedy_from(&rp, BOS, 1, -1);
    rp.ignore_eos = 1;
    req_out *o = run_one(e, &rp);
    CHECK(o);
    CHECK_EQ(o->s[0].n, 99);
    CHECK_EQ(o->s[0].fr, XI_FINISH_LENGTH);
    free(o);
    xi_engine_close(e);
#undef EXPECT_ERR
}

TEST(test_engine_without_chunked_prefill_rejects_prompt_over_budget) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(STORIES);
    p.n_threads = 1;
    p.kv_cache_memory_bytes = 8 << 20;
    p.max_num_batched_tokens = 32;
    p.enable_chunked_prefill = 0;
    char err[256];
    xi_engine *e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 7;
    xi_request_params rp;
    greedy_from(&rp, ids, 40, 4);
    CHECK_EQ(xi_engine_submit(e, &rp, on_output, NULL, err, sizeof err), -1);
    CHECKF(!strncmp(err, "prompt:", 7) && strstr(err, "max_num_batched_tokens"), "%s", err);
    greedy_from(&rp, ids, 32, 4);
    req_out *o = run_one(e, &rp);
    CHECK(o);
    CHECK_EQ(o->s[0].n, 4);
    free(o);
    xi_engine_close(e);
}

TEST(test_engine_text_prompt_matches_llama2c_reference) {
    xi_engine *e = stories();
    CHECK(e);
    /* reference.json case "Once upon a time": BOS 403 407 261 378, then greedy ids */
    static const int32_t want[8] = {432, 383, 286, 261, 376, 298, 315, 421};
    xi_request_params rp;
    xi_request_params_default(&rp);
    rp.prompt = "Once upon a time";
    rp.max_tokens = 8;
    rp.temperature = 0;
    req_out *o = run_one(e, &rp);
    CHECK(o);
    CHECK_EQ(o->s[0].n, 8);
    for (int i = 0; i < 8; i++) CHECK_EQ(o->s[0].ids[i], want[i]);
    free(o);
    xi_engine_close(e);
}

TEST(test_engine_stop_string_cuts_text_and_reports_it) {
    xi_engine *e = stories();
    CHECK(e);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 40);
    req_out *full = run_one(e, &rp);
    CHECK(full);
    const char *at = strstr(full->s[0].text, "Lily");
    CHECKF(at, "greedy text: %s", full->s[0].text);
    size_t cut = (size_t)(at - full->s[0].text);
    const char *stops[2] = {"dragon", "Lily"};
    for (int include = 0; include <= 1; include++) {
        greedy_from(&rp, BOS, 1, 40);
        rp.stop = stops;
        rp.n_stop = 2;
        rp.include_stop_str_in_output = include;
        req_out *o = run_one(e, &rp);
        CHECK(o);
        CHECK_EQ(o->s[0].fr, XI_FINISH_STOP);
        CHECK_STR(o->s[0].stop_reason, "Lily");
        CHECK_EQ(o->s[0].stop_token, -1);
        CHECK_EQ(o->s[0].text_len, cut + (include ? 4 : 0));
        CHECK(!memcmp(o->s[0].text, full->s[0].text, o->s[0].text_len));
        /* ids up to and including the one that completed the stop string */
        CHECK(o->s[0].n < full->s[0].n);
        CHECK(!memcmp(o->s[0].ids, full->s[0].ids, (size_t)o->s[0].n * sizeof(int32_t)));
        /* the token that completes the stop string is also the max_tokens-th: "stop" wins */
        int k = o->s[0].n;
        greedy_from(&rp, BOS, 1, k);
        rp.stop = stops;
        rp.n_stop = 2;
        req_out *at_len = run_one(e, &rp);
        CHECK(at_len);
        CHECK_EQ(at_len->s[0].n, k);
        CHECK_EQ(at_len->s[0].fr, XI_FINISH_STOP);
        CHECK_STR(at_len->s[0].stop_reason, "Lily");
        free(at_len);
        free(o);
    }
    /* stop strings count only after min_tokens: "Once" (the first token) is skipped */
    const char *once[1] = {"Once"};
    greedy_from(&rp, BOS, 1, 40);
    rp.stop = once;
    rp.n_stop = 1;
    req_out *first = run_one(e, &rp);
    CHECK(first);
    CHECK_EQ(first->s[0].n, 1);
    CHECK_EQ(first->s[0].text_len, 0);
    rp.min_tokens = 1;
    req_out *later = run_one(e, &rp);
    CHECK(later);
    CHECK(later->s[0].n > 1);
    CHECK(!strncmp(later->s[0].text, "Once", 4));
    free(first);
    free(later);
    free(full);
    xi_engine_close(e);
}

/* Text streamed before a stop string is ruled out must never end in a part of it. */
typedef struct stream_check {
    req_out out;
    xi_engine *e;
    const char *stop;
    int leaked;             /* a non-final event's text ended in a prefix of the stop */
    int withheld;           /* events where less text was sent than the ids decode to */
} stream_check;

static void on_stream(void *user, const xi_output *o) {
    stream_check *c = user;
    on_output(&c->out, o);
    const seq_out *so = &c->out.s[0];
    if (o->finish_reason != XI_FINISH_NONE) return;
    for (size_t k = 1; k < strlen(c->stop) && k <= so->text_len; k++)
        if (!memcmp(so->text + so->text_len - k, c->stop, k)) c->leaked = 1;
    char *all = xi_engine_detokenize(c->e, so->ids, so->n, 1, NULL, 0);
    if (all && strlen(all) > so->text_len) c->withheld++;
    free(all);
}

TEST(test_engine_stop_string_prefix_is_withheld_while_streaming) {
    xi_engine *e = stories();
    CHECK(e);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 40);
    req_out *full = run_one(e, &rp);
    CHECK(full);
    CHECK(strstr(full->s[0].text, "named L"));
    /* never completes, so all text is released in the end, but "named L" waits */
    const char *stops[1] = {"named Lxyz"};
    greedy_from(&rp, BOS, 1, 40);
    rp.stop = stops;
    rp.n_stop = 1;
    stream_check *c = calloc(1, sizeof *c);
    c->e = e;
    c->stop = stops[0];
    CHECK(xi_engine_submit(e, &rp, on_stream, c, NULL, 0) >= 0);
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(c->leaked, 0);
    CHECK(c->withheld > 0);
    CHECK_EQ(c->out.s[0].fr, XI_FINISH_LENGTH);
    CHECK_STR(c->out.s[0].text, full->s[0].text);
    free(c);
    free(full);
    xi_engine_close(e);
}

TEST(test_engine_stop_token_id_ends_generation_without_its_text) {
    xi_engine *e = stories();
    CHECK(e);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 30);
    req_out *full = run_one(e, &rp);
    CHECK(full);
    int32_t stop = full->s[0].ids[5];
    int first = 0;
    while (full->s[0].ids[first] != stop) first++;
    greedy_from(&rp, BOS, 1, 30);
    rp.stop_token_ids = &stop;
    rp.n_stop_token_ids = 1;
    req_out *o = run_one(e, &rp);
    CHECK(o);
    CHECK_EQ(o->s[0].fr, XI_FINISH_STOP);
    CHECK_EQ(o->s[0].stop_token, stop);
    CHECK_EQ(o->s[0].n, first + 1);
    char *want = xi_engine_detokenize(e, full->s[0].ids, first, 1, NULL, 0);
    CHECK_STR(o->s[0].text, want);
    free(want);
    /* min_tokens masks the stop id until enough tokens exist */
    greedy_from(&rp, BOS, 1, 30);
    int32_t first_tok = full->s[0].ids[0];
    rp.stop_token_ids = &first_tok;
    rp.n_stop_token_ids = 1;
    rp.min_tokens = 3;
    req_out *m = run_one(e, &rp);
    CHECK(m);
    CHECK(m->s[0].ids[0] != first_tok);
    CHECK(m->s[0].n >= 3);
    free(m);
    free(o);
    free(full);
    xi_engine_close(e);
}

TEST(test_engine_n_samples_share_prompt_and_seed_by_index) {
    xi_engine *e = stories();
    CHECK(e);
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = i ? 260 + i : 1;
    xi_request_params rp;
    greedy_from(&rp, prompt, 40, 12);
    rp.temperature = 1.0f;
    rp.seed = 7;
    rp.n = 3;
    rp.ignore_eos = 1;
    req_out *o = run_one(e, &rp);
    CHECK(o);
    int cached = 0;
    for (int k = 0; k < 3; k++) {
        CHECK_EQ(o->s[k].n, 12);
        CHECK_EQ(o->s[k].n_final, 1);
        cached += o->s[k].cached;
    }
    /* the later samples found the prompt's full blocks (32 tokens) in the cache */
    CHECK_EQ(cached, 64);
    CHECK(memcmp(o->s[0].ids, o->s[1].ids, 12 * sizeof(int32_t)) ||
          memcmp(o->s[1].ids, o->s[2].ids, 12 * sizeof(int32_t)));
    for (int k = 0; k < 3; k++) {
        greedy_from(&rp, prompt, 40, 12);
        rp.temperature = 1.0f;
        rp.seed = 7 + k;
        rp.ignore_eos = 1;
        req_out *one = run_one(e, &rp);
        CHECK(one);
        CHECKF(!memcmp(one->s[0].ids, o->s[k].ids, 12 * sizeof(int32_t)), "sample %d", k);
        free(one);
    }
    free(o);
    xi_engine_close(e);
}

TEST(test_engine_prompt_logprobs_equal_generated_logprobs) {
    xi_engine *e = open_engine(STORIES, 128, 4, 16, 512, 1); /* budget 4: chunked prompt */
    CHECK(e);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 12);
    rp.logprobs = 3;
    req_out *g = run_one(e, &rp);
    CHECK(g);
    CHECK_EQ(g->s[0].n, 12);
    CHECK_EQ(g->s[0].top_ok, 0);
    for (int i = 0; i < 12; i++) {
        CHECK_EQ(g->s[0].rank[i], 1); /* greedy picks the best token */
        CHECK_EQ(g->s[0].n_top[i], 3);
        CHECK(g->s[0].lp[i] <= 0);
    }
    /* echo: prompt = BOS + those 12 ids; prompt logprobs score the same rows again */
    int32_t prompt[13] = {1};
    memcpy(prompt + 1, g->s[0].ids, 12 * sizeof(int32_t));
    greedy_from(&rp, prompt, 13, 1);
    rp.prompt_logprobs = 2;
    req_out *p = run_one(e, &rp);
    CHECK(p);
    CHECK_EQ(p->s[0].n_plp, 13);
    CHECK(isnan(p->s[0].plp[0]));
    for (int i = 1; i < 13; i++)
        CHECKF(p->s[0].plp[i] == g->s[0].lp[i - 1], "prompt token %d: %.9g vs %.9g", i,
               p->s[0].plp[i], g->s[0].lp[i - 1]);
    /* a request with prompt logprobs never reads the prefix cache */
    CHECK_EQ(p->s[0].cached, 0);
    free(g);
    free(p);
    xi_engine_close(e);
}

/* ---- engine thread --------------------------------------------------------------------- */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finished;
} waiter;

typedef struct slot {
    waiter *w;
    req_out out;
} slot;

static void on_threaded(void *user, const xi_output *o) {
    slot *sl = user;
    pthread_mutex_lock(&sl->w->mu);
    on_output(&sl->out, o);
    if (o->finish_reason != XI_FINISH_NONE) sl->w->finished++;
    pthread_cond_signal(&sl->w->cv);
    pthread_mutex_unlock(&sl->w->mu);
}

typedef struct submitter {
    xi_engine *e;
    waiter w;
    slot slots[8];
    int64_t ids[8];
    int base;
} submitter;

static void *submit_eight(void *arg) {
    submitter *s = arg;
    for (int i = 0; i < 8; i++) {
        xi_request_params rp;
        greedy_from(&rp, BOS, 1, 10 + s->base + i);
        rp.ignore_eos = 1;
        s->slots[i].w = &s->w;
        s->ids[i] = xi_engine_submit(s->e, &rp, on_threaded, &s->slots[i], NULL, 0);
    }
    pthread_mutex_lock(&s->w.mu);
    while (s->w.finished < 8) pthread_cond_wait(&s->w.cv, &s->w.mu);
    pthread_mutex_unlock(&s->w.mu);
    return NULL;
}

TEST(test_engine_thread_serves_concurrent_submitters) {
    xi_engine *e = stories();
    CHECK(e);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 50);
    rp.ignore_eos = 1;
    req_out *ref = run_one(e, &rp); /* manual mode first */
    CHECK(ref);
    char err[128];
    CHECK(xi_engine_start(e, err, sizeof err) == 0);
    CHECK_EQ(xi_engine_step(e), -1); /* the engine thread owns stepping now */
    submitter *s = calloc(4, sizeof *s);
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        s[t].e = e;
        s[t].base = t * 8;
        pthread_mutex_init(&s[t].w.mu, NULL);
        pthread_cond_init(&s[t].w.cv, NULL);
        CHECK(pthread_create(&th[t], NULL, submit_eight, &s[t]) == 0);
    }
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    /* the stats snapshot follows the step that delivered the last outputs */
    xi_engine_stats st;
    for (int k = 0; k < 1000; k++) {
        xi_engine_get_stats(e, &st);
        if (st.num_running + st.num_waiting == 0) break;
        usleep(1000);
    }
    CHECK_EQ(st.num_running + st.num_waiting, 0);
    CHECK(st.generation_tokens_total >= 50 + 32 * 10);
    xi_engine_close(e);
    /* unique ids; each greedy run is a prefix of the 50-token reference run */
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < 8; i++) {
            for (int u = 0; u < t; u++)
                for (int j = 0; j < 8; j++) CHECK(s[u].ids[j] != s[t].ids[i]);
            const seq_out *so = &s[t].slots[i].out.s[0];
            CHECK_EQ(so->n_final, 1);
            CHECK_EQ(so->n, 10 + t * 8 + i);
            CHECK(!memcmp(so->ids, ref->s[0].ids, (size_t)so->n * sizeof(int32_t)));
        }
    }
    free(ref);
    free(s);
}

/* Aborts posted from several threads while the engine thread drains earlier ones: the posting
 * buffer grows under the posters (from 64 ids) while the engine reads the buffer it swapped
 * out, which must never move under it (ASan: a realloc of it was a use after free). Every
 * request still ends once, aborted. */
typedef struct aborter {
    xi_engine *e;
    int64_t first, n;
} aborter;

static void *post_aborts(void *arg) {
    const aborter *a = arg;
    for (int k = 0; k < 3000; k++) xi_engine_abort(a->e, a->first + k % a->n);
    return NULL;
}

TEST(test_engine_aborts_from_many_threads_while_draining) {
    for (int round = 0; round < 12; round++) {
        xi_engine *e = stories();
        CHECK(e);
        char err[128];
        waiter w = {.finished = 0};
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        slot *sl = calloc(8, sizeof *sl);
        int64_t first = -1;
        for (int i = 0; i < 8; i++) {
            xi_request_params rp;
            greedy_from(&rp, BOS, 1, 200);
            rp.ignore_eos = 1;
            sl[i].w = &w;
            const int64_t id = xi_engine_submit(e, &rp, on_threaded, &sl[i], NULL, 0);
            CHECK(id >= 0);
            if (!i) first = id;
        }
        CHECK(xi_engine_start(e, err, sizeof err) == 0);
        aborter a = {e, first, 8};
        pthread_t th[4];
        for (int t = 0; t < 4; t++) CHECK(pthread_create(&th[t], NULL, post_aborts, &a) == 0);
        for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
        pthread_mutex_lock(&w.mu);
        while (w.finished < 8) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        xi_engine_close(e);
        for (int i = 0; i < 8; i++) {
            CHECK_EQ(sl[i].out.s[0].n_final, 1);
            CHECKF(sl[i].out.s[0].fr == XI_FINISH_ABORT, "round %d, request %d: finish %d", round, i,
                   (int)sl[i].out.s[0].fr);
        }
        free(sl);
    }
}

TEST(test_engine_queue_limit_returns_minus_two) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(STORIES);
    p.n_threads = 1;
    p.kv_cache_memory_bytes = 8 << 20;
    p.max_queue_len = 2;
    char err[256];
    xi_engine *e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 4);
    req_out *o = calloc(4, sizeof *o);
    CHECK(xi_engine_submit(e, &rp, on_output, &o[0], err, sizeof err) >= 0);
    CHECK(xi_engine_submit(e, &rp, on_output, &o[1], err, sizeof err) >= 0);
    CHECK_EQ(xi_engine_submit(e, &rp, on_output, &o[2], err, sizeof err), -2);
    CHECK(!strncmp(err, "queue:", 6));
    CHECK(run_until_idle(e) > 0);
    CHECK(xi_engine_submit(e, &rp, on_output, &o[3], err, sizeof err) >= 0);
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(o[0].s[0].n + o[1].s[0].n + o[2].s[0].n + o[3].s[0].n, 12);
    CHECK_EQ(o[2].s[0].n_events, 0);
    free(o);
    xi_engine_close(e);
}

TEST(test_engine_close_aborts_unfinished_requests) {
    xi_engine *e = stories();
    CHECK(e);
    req_out *o = calloc(3, sizeof *o);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 100);
    rp.ignore_eos = 1;
    for (int i = 0; i < 3; i++) CHECK(xi_engine_submit(e, &rp, on_output, &o[i], NULL, 0) >= 0);
    CHECK(xi_engine_step(e) > 0);
    xi_engine_close(e);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(o[i].s[0].n_final, 1);
        CHECK_EQ(o[i].s[0].fr, XI_FINISH_ABORT);
    }
    free(o);
}

TEST(test_engine_kv_pool_sized_from_bytes_env_and_checked_against_max_model_len) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(STORIES);
    p.n_threads = 1;
    char err[256];
    /* stories260K: 5 layers x K,V x 4 heads x 16 tokens x 8 dims x 4 bytes = 20480 per block */
    setenv("VLLM_CPU_KVCACHE_SPACE", "0.01", 1);
    xi_engine *e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    xi_engine_info in;
    xi_engine_get_info(e, &in);
    CHECK_EQ(in.num_kv_blocks + 1, (int64_t)(0.01 * (1 << 30)) / 20480);
    CHECK_EQ(in.max_model_len, 512);
    CHECK_EQ(in.block_size, 16);
    CHECK_STR(in.kv_cache_dtype, "float32");
    xi_engine_close(e);
    unsetenv("VLLM_CPU_KVCACHE_SPACE");
    p.kv_cache_memory_bytes = 20480 * 20; /* 19 usable blocks: 304 tokens < 512 */
    CHECK(!xi_engine_open(&p, err, sizeof err));
    CHECKF(!strncmp(err, "kv_cache_memory_bytes:", 22), "%s", err);
    p.max_model_len = 300;
    e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    xi_engine_get_info(e, &in);
    CHECK_EQ(in.num_kv_blocks, 19);
    xi_engine_close(e);
    p.max_model_len = 0;
    p.block_size = 0;
    CHECK(!xi_engine_open(&p, err, sizeof err));
    CHECK(!strncmp(err, "block_size:", 11));
    /* a fraction of available memory, less the weights */
    p.block_size = 16;
    p.kv_cache_memory_bytes = 0;
    p.gpu_memory_utilization = 1.5;
    CHECK(!xi_engine_open(&p, err, sizeof err));
    CHECKF(!strncmp(err, "gpu_memory_utilization:", 23), "%s", err);
    p.gpu_memory_utilization = 0.001;
    e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    xi_engine_get_info(e, &in);
    CHECK(in.kv_cache_bytes > 0);
    CHECK(in.kv_cache_bytes + in.weight_bytes <= (int64_t)(0.001 * 1024.0 * 1024 * 1024 * 1024));
    xi_engine_close(e);
}

/* --override-generation-config: a request that names no temperature takes the override (here
 * 0, greedy) instead of the default 1.0; one that names it keeps its own. */
TEST(test_engine_generation_overrides_become_request_defaults) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(STORIES);
    p.n_threads = 1;
    p.kv_cache_memory_bytes = 20480 * 64;
    char err[256];
    xi_engine *plain = xi_engine_open(&p, err, sizeof err);
    p.override_temperature = 0;
    xi_engine *greedy = xi_engine_open(&p, err, sizeof err);
    CHECKF(plain && greedy, "%s", err);
    xi_request_params rp;
    greedy_from(&rp, BOS, 1, 24);
    req_out *want = run_one(plain, &rp); /* temperature 0 asked for */
    rp.temperature = -1;                 /* not asked for */
    rp.seed = 7;
    req_out *over = run_one(greedy, &rp), *sampled = run_one(plain, &rp);
    rp.temperature = 1;
    req_out *own = run_one(greedy, &rp);
    CHECK(want && over && sampled && own);
    CHECK_EQ(over->s[0].n, 24);
    CHECK(!memcmp(over->s[0].ids, want->s[0].ids, sizeof(int32_t) * 24));
    CHECK(memcmp(sampled->s[0].ids, want->s[0].ids, sizeof(int32_t) * 24) != 0);
    CHECK(!memcmp(own->s[0].ids, sampled->s[0].ids, sizeof(int32_t) * 24));
    free(want);
    free(over);
    free(sampled);
    free(own);
    xi_engine_close(plain);
    xi_engine_close(greedy);
}

TEST(test_engine_names_and_tokenizer_wrappers) {
    CHECK_STR(xi_finish_reason_name(XI_FINISH_STOP), "stop");
    CHECK_STR(xi_finish_reason_name(XI_FINISH_LENGTH), "length");
    CHECK_STR(xi_finish_reason_name(XI_FINISH_ABORT), "abort");
    CHECK(xi_kernels_default_name() && *xi_kernels_default_name());
    xi_engine *e = stories();
    CHECK(e);
    int32_t *ids = NULL;
    int n = xi_engine_tokenize(e, "Once upon a time", 1, &ids, NULL, 0);
    CHECK_EQ(n, 5);
    int32_t want[5] = {1, 403, 407, 261, 378};
    CHECK(!memcmp(ids, want, sizeof want));
    char *t = xi_engine_detokenize(e, ids, n, 1, NULL, 0);
    CHECK_STR(t, "Once upon a time");
    free(t);
    free(ids);
    xi_engine_stats st;
    xi_engine_get_stats(e, &st);
    CHECK_EQ(st.steps, 0);
    xi_engine_close(e);
}

TEST(test_engine_chat_template_renders_the_models_template) {
    xi_engine *e = open_engine("models/qwen2-tiny-random", 64, 2048, 8, 256, 1);
    CHECK(e);
    char err[256];
    char *p = xi_engine_apply_chat_template(e, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, NULL, 1,
                                            0, err, sizeof err);
    CHECKF(p, "%s", err);
    CHECKF(strstr(p, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "%s", p);
    free(p);
    xi_engine_close(e);
    e = stories();
    CHECK(e);
    CHECK(!xi_engine_apply_chat_template(e, "[]", NULL, NULL, 1, 0, err, sizeof err));
    CHECKF(!strncmp(err, "chat template:", 14), "%s", err);
    xi_engine_close(e);
}

/* response_format json_object: whatever the model would say, the text is a prefix of one JSON
 * object, and a sequence that stops has closed it (stories260K: SentencePiece with byte
 * fallback, so tokens are pieces and single bytes). */
TEST(test_engine_json_object_output_is_one_json_object) {
    xi_engine *e = stories();
    CHECK(e);
    xi_request_params rp;
    xi_request_params_default(&rp);
    rp.prompt = "Once upon a time";
    rp.max_tokens = 200;
    rp.json_object = 1;
    /* runs 1 and 2 lean towards '"' and '}' (ids 436, 313, 128 in this vocab), so the object
     * closes within max_tokens and the end of guided output is exercised too */
    const xi_logit_bias lean[3] = {{436, 8}, {313, 8}, {128, 30}};
    for (int run = 0; run < 3; run++) {
        rp.temperature = run == 2 ? 1.0f : 0.0f;
        rp.seed = run;
        rp.logit_bias = run ? lean : NULL;
        rp.n_logit_bias = run ? 3 : 0;
        req_out *o = run_one(e, &rp);
        CHECK(o);
        const seq_out *s = &o->s[0];
        xi_json_fsm f;
        xi_json_fsm_init(&f);
        CHECKF(xi_json_fsm_feed(&f, s->text, s->text_len) == 0, "run %d: not a JSON prefix: %s", run, s->text);
        if (s->fr == XI_FINISH_STOP) {
            CHECKF(xi_json_fsm_done(&f), "run %d stopped inside the object: %s", run, s->text);
            json_t *j = json_loads(s->text, 0, NULL);
            CHECKF(json_is_object(j), "run %d: %s", run, s->text);
            json_decref(j);
        } else {
            CHECK_EQ(s->fr, XI_FINISH_LENGTH);
            CHECKF(run == 0, "run %d did not close the object: %s", run, s->text);
        }
        free(o);
    }
    /* with ignore_eos nothing ends the object, so whitespace pads it out to max_tokens */
    rp.ignore_eos = 1;
    rp.temperature = 0;
    rp.logit_bias = lean;
    rp.n_logit_bias = 3;
    rp.max_tokens = 40;
    req_out *o = run_one(e, &rp);
    CHECK(o);
    CHECK_EQ(o->s[0].fr, XI_FINISH_LENGTH);
    CHECK_EQ(o->s[0].n, 40);
    json_t *j = json_loads(o->s[0].text, 0, NULL);
    CHECKF(json_is_object(j), "%s", o->s[0].text);
    json_decref(j);
    free(o);
    xi_engine_close(e);
}

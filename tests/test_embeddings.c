/* Pooling requests through the public engine API: the last token's final hidden state of a
 * tied-embedding model, multiplied by the embedding matrix, must give the reference's
 * last-position logits; normalisation; batching, chunking and prefix-cache hits leave the
 * vector's bits unchanged; request checks. */
#include <stdlib.h>

#include <jansson.h>

#include "model/safetensors.h"
#include "tensor/dtype.h"
#include "test.h"
#include "test_engine_util.h"
#include "xinfer.h"

#define QWEN2 "models/qwen2-tiny-random"
#define MAX_DIM 256

typedef struct emb_out {
    float v[MAX_DIM];
    int n, n_final, n_new, prompt_tokens, cached;
    xi_finish_reason fr;
} emb_out;

static void on_emb(void *user, const xi_output *o) {
    emb_out *r = user;
    r->n_new += o->n_new;
    if (o->finish_reason == XI_FINISH_NONE) return;
    r->n_final++;
    r->fr = o->finish_reason;
    r->prompt_tokens = o->prompt_tokens;
    r->cached = o->cached_prompt_tokens;
    if (o->embedding && o->n_embedding <= MAX_DIM) {
        memcpy(r->v, o->embedding, (size_t)o->n_embedding * sizeof(float));
        r->n = o->n_embedding;
    }
}

static void pool_params(xi_request_params *rp, const int32_t *ids, int n, int normalize) {
    xi_request_params_default(rp);
    rp->prompt_ids = ids;
    rp->n_prompt_ids = n;
    rp->pooling = 1;
    rp->normalize = normalize;
}

static int submit_salted(xi_engine *e, const int32_t *ids, int n, int normalize, const char *salt,
                         emb_out *out) {
    xi_request_params rp;
    pool_params(&rp, ids, n, normalize);
    rp.cache_salt = salt;
    char err[256];
    memset(out, 0, sizeof *out);
    if (xi_engine_submit(e, &rp, on_emb, out, err, sizeof err) < 0) {
        fprintf(stderr, "submit: %s\n", err);
        return -1;
    }
    return 0;
}

static int submit_pool(xi_engine *e, const int32_t *ids, int n, int normalize, emb_out *out) {
    return submit_salted(e, ids, n, normalize, NULL, out);
}

/* The reference prompts' ids ([n][128]) and count. */
static int ref_prompts(json_t *ref, int32_t ids[][128], int *lens, int max) {
    size_t i;
    json_t *sq;
    int k = 0;
    json_array_foreach(json_object_get(ref, "sequences"), i, sq) {
        json_t *idj = json_object_get(sq, "ids");
        if (k == max || json_array_size(idj) > 128) return -1;
        lens[k] = (int)json_array_size(idj);
        for (int j = 0; j < lens[k]; j++) ids[k][j] = (int32_t)json_integer_value(json_array_get(idj, (size_t)j));
        k++;
    }
    return k;
}

/* The tied embedding matrix as f32 [vocab][hidden]. */
static float *embed_matrix(const char *dir, int vocab, int hidden) {
    char err[256];
    xi_st_set *st = xi_st_open_dir(dir, err, sizeof err);
    if (!st) return NULL;
    const xi_st_tensor *t = xi_st_find(st, "model.embed_tokens.weight");
    float *E = NULL;
    if (t && t->n_dims == 2 && t->shape[0] == vocab && t->shape[1] == hidden &&
        (t->dtype == XI_BF16 || t->dtype == XI_F32)) {
        const size_t n = (size_t)vocab * (size_t)hidden;
        E = malloc(n * sizeof *E);
        for (size_t i = 0; E && i < n; i++) {
            if (t->dtype == XI_F32) {
                memcpy(&E[i], (const char *)t->data + i * 4, 4);
            } else {
                uint16_t h;
                memcpy(&h, (const char *)t->data + i * 2, 2);
                E[i] = xi_bf16_to_f32(h);
            }
        }
    }
    xi_st_close(st);
    return E;
}

/* For every reference prompt: pooled (un-normalised) vector . E^T == logits_last (1e-4). */
static void pooled_times_embeddings_is_last_logits(const char *rel) {
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(rel);
    p.n_threads = 2;
    p.max_model_len = 256;
    p.kv_cache_memory_bytes = 64 << 20;
    p.dtype = "float32"; /* fp32 weights and KV, as the reference */
    char err[512];
    xi_engine *e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    xi_engine_info info;
    xi_engine_get_info(e, &info);
    CHECK(info.hidden_size <= MAX_DIM);
    float *E = embed_matrix(p.model_dir, info.vocab_size, info.hidden_size);
    CHECKF(E, "no tied embed_tokens matrix in %s", rel);
    char ref_path[512];
    snprintf(ref_path, sizeof ref_path, "%s/reference.json", p.model_dir);
    json_t *ref = json_load_file(ref_path, 0, NULL);
    CHECK(ref);
    static int32_t ids[8][128];
    int lens[8];
    int n_ref = ref_prompts(ref, ids, lens, 8);
    CHECK(n_ref >= 3);
    for (int k = 0; k < n_ref; k++) {
        emb_out o;
        CHECK(submit_pool(e, ids[k], lens[k], 0, &o) == 0);
        CHECK(run_until_idle(e) > 0);
        CHECK_EQ(o.n_final, 1);
        CHECK_EQ(o.fr, XI_FINISH_STOP);
        CHECK_EQ(o.n_new, 0);
        CHECK_EQ(o.n, info.hidden_size);
        CHECK_EQ(o.prompt_tokens, lens[k]);
        json_t *last = json_object_get(json_array_get(json_object_get(ref, "sequences"), (size_t)k),
                                       "logits_last");
        CHECK((int)json_array_size(last) == info.vocab_size);
        double maxerr = 0;
        for (int j = 0; j < info.vocab_size; j++) {
            double dot = 0;
            for (int d = 0; d < info.hidden_size; d++)
                dot += (double)o.v[d] * E[(size_t)j * (size_t)info.hidden_size + (size_t)d];
            maxerr = fmax(maxerr, fabs(dot - json_number_value(json_array_get(last, (size_t)j))));
        }
        CHECKF(maxerr < 1e-4, "prompt %d (%d tokens): max abs logit error %g", k, lens[k], maxerr);
    }
    json_decref(ref);
    free(E);
    xi_engine_close(e);
}

TEST(test_embedding_times_tied_embeddings_is_reference_last_logits_qwen2) {
    pooled_times_embeddings_is_last_logits(QWEN2);
}

TEST(test_embedding_times_tied_embeddings_is_reference_last_logits_qwen3) {
    pooled_times_embeddings_is_last_logits("models/qwen3-tiny-random");
}

static json_t *qwen2_ref(int32_t ids[][128], int *lens) {
    json_t *ref = json_load_file(xi_test_data(QWEN2 "/reference.json"), 0, NULL);
    if (ref && ref_prompts(ref, ids, lens, 8) != 3) {
        json_decref(ref);
        return NULL;
    }
    return ref;
}

/* normalize=1 gives v / |v| of the raw vector, to float rounding, and unit length;
 * dimensions=16 the first 16 raw values over their own norm. */
TEST(test_embedding_normalized_and_cut_dimensions_are_raw_over_their_norm) {
    static int32_t ids[8][128];
    int lens[8];
    json_t *ref = qwen2_ref(ids, lens);
    CHECK(ref);
    xi_engine *e = open_engine(QWEN2, 64, 2048, 8, 256, 0);
    CHECK(e);
    emb_out raw, unit;
    CHECK(submit_pool(e, ids[1], lens[1], 0, &raw) == 0);
    CHECK(submit_pool(e, ids[1], lens[1], 1, &unit) == 0);
    CHECK(run_until_idle(e) > 0);
    CHECK(raw.n == 64 && unit.n == 64);
    double ss = 0, uu = 0;
    for (int d = 0; d < raw.n; d++) {
        ss += (double)raw.v[d] * raw.v[d];
        uu += (double)unit.v[d] * unit.v[d];
    }
    CHECKF(sqrt(ss) > 1.5, "raw norm %g: the raw vector looks normalised already", sqrt(ss));
    CHECK_NEAR(uu, 1.0, 1e-6);
    for (int d = 0; d < raw.n; d++) CHECK_NEAR(unit.v[d], raw.v[d] / sqrt(ss), 1e-7);
    /* matryoshka: the first 16 values of the raw vector, normalised again */
    xi_request_params rp;
    pool_params(&rp, ids[1], lens[1], 1);
    rp.dimensions = 16;
    emb_out cut;
    char err[256];
    CHECK(xi_engine_submit(e, &rp, on_emb, &cut, err, sizeof err) >= 0);
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(cut.n, 16);
    double s16 = 0;
    for (int d = 0; d < 16; d++) s16 += (double)raw.v[d] * raw.v[d];
    for (int d = 0; d < 16; d++) CHECK_NEAR(cut.v[d], raw.v[d] / sqrt(s16), 1e-7);
    CHECK(fabs(cut.v[0] - unit.v[0]) > 1e-4); /* renormalised, not just cut */
    json_decref(ref);
    xi_engine_close(e);
}

/* Three prompts pooled in one batch (next to a generating request), one by one, in 16-token
 * chunks, and again from the prefix cache: the same bits every time. */
TEST(test_embedding_batch_chunks_and_cache_hits_give_the_same_bits) {
    static int32_t ids[8][128];
    int lens[8];
    json_t *ref = qwen2_ref(ids, lens);
    CHECK(ref);
    emb_out alone[3], batch[3], chunked[3], again[3];
    /* cache salts keep the phases apart: "alone" never hits the batch's blocks */
    xi_engine *e = open_engine(QWEN2, 64, 2048, 8, 256, 1);
    CHECK(e);
    for (int k = 0; k < 3; k++) {
        CHECK(submit_salted(e, ids[k], lens[k], 1, "alone", &alone[k]) == 0);
        CHECK(run_until_idle(e) > 0);
        CHECK_EQ(alone[k].cached, 0);
    }
    xi_request_params gen;
    xi_request_params_default(&gen);
    gen.prompt_ids = ids[2];
    gen.n_prompt_ids = lens[2];
    gen.max_tokens = 4;
    gen.temperature = 0;
    req_out *go = calloc(1, sizeof *go);
    char err[256];
    CHECK(xi_engine_submit(e, &gen, on_output, go, err, sizeof err) >= 0);
    for (int k = 0; k < 3; k++) CHECK(submit_salted(e, ids[k], lens[k], 1, "batch", &batch[k]) == 0);
    CHECK_EQ(xi_engine_step(e), 1); /* all four prefilled together; the generation goes on */
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(go->s[0].n, 4);
    /* the cache now holds every full block of the three prompts */
    for (int k = 0; k < 3; k++) CHECK(submit_salted(e, ids[k], lens[k], 1, "batch", &again[k]) == 0);
    CHECK(run_until_idle(e) > 0);
    xi_engine_stats st;
    xi_engine_get_stats(e, &st);
    CHECK_EQ(st.prompt_tokens_total, 3 * (lens[0] + lens[1] + lens[2]) + lens[2]);
    xi_engine_close(e);
    free(go);

    e = open_engine(QWEN2, 64, 16, 8, 256, 0);
    CHECK(e);
    for (int k = 0; k < 3; k++) CHECK(submit_pool(e, ids[k], lens[k], 1, &chunked[k]) == 0);
    CHECK(run_until_idle(e) > 0);
    xi_engine_close(e);

    for (int k = 0; k < 3; k++) {
        CHECK(alone[k].n == 64);
        CHECKF(!memcmp(alone[k].v, batch[k].v, sizeof alone[k].v), "prompt %d: batch differs", k);
        CHECKF(!memcmp(alone[k].v, chunked[k].v, sizeof alone[k].v), "prompt %d: chunks differ", k);
        CHECKF(!memcmp(alone[k].v, again[k].v, sizeof alone[k].v), "prompt %d: cache hit differs", k);
    }
    CHECK_EQ(again[2].cached, 80); /* 96 tokens: five full blocks */
    CHECK_EQ(again[1].cached, 16);
    CHECK_EQ(again[0].cached, 0);
    /* different prompts give different vectors */
    CHECK(memcmp(alone[0].v, alone[1].v, sizeof alone[0].v));
    json_decref(ref);
}

/* A prompt may fill max_model_len; one of whole blocks, found entirely in the cache, still
 * computes its last token. Bad requests name the parameter. */
TEST(test_embedding_full_block_prompt_recomputes_its_last_token_and_errors_name_the_parameter) {
    int32_t ids[33];
    for (int i = 0; i < 33; i++) ids[i] = 100 + 7 * i;
    xi_engine *e = open_engine(QWEN2, 64, 2048, 8, 32, 1);
    CHECK(e);
    emb_out a, b;
    CHECK(submit_pool(e, ids, 32, 0, &a) == 0); /* a prompt may fill max_model_len */
    CHECK(run_until_idle(e) > 0);
    CHECK(submit_pool(e, ids, 32, 0, &b) == 0);
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(a.fr, XI_FINISH_STOP);
    CHECK_EQ(b.cached, 16);
    CHECK(a.n == 64 && !memcmp(a.v, b.v, sizeof a.v));
    xi_request_params rp;
    char err[256];
#define EXPECT_POOL_ERR(setup, prefix)                                               \
    do {                                                                             \
        pool_params(&rp, ids, 4, 1);                                                 \
        setup;                                                                       \
        err[0] = 0;                                                                  \
        CHECK_EQ(xi_engine_submit(e, &rp, on_emb, NULL, err, sizeof err), -1);       \
        CHECKF(!strncmp(err, prefix, strlen(prefix)), "want \"%s...\", got \"%s\"", prefix, err); \
    } while (0)
    EXPECT_POOL_ERR(rp.n = 2, "n:");
    EXPECT_POOL_ERR(rp.logprobs = 1, "pooling:");
    EXPECT_POOL_ERR(rp.prompt_logprobs = 0, "pooling:");
    EXPECT_POOL_ERR(rp.dimensions = 65, "dimensions:");
    EXPECT_POOL_ERR(rp.dimensions = -1, "dimensions:");
    EXPECT_POOL_ERR(rp.n_prompt_ids = 33, "prompt:");
    CHECKF(strstr(err, "33") && strstr(err, "32"), "%s", err);
#undef EXPECT_POOL_ERR
    xi_engine_close(e);
}

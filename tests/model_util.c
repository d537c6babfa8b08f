#include "model_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "test.h"

xi_model *tm_load(const char *rel, const char *dtype, const char *kernels, int threads) {
    return tm_load_ex(rel, dtype, NULL, kernels, threads);
}

xi_model *tm_load_ex(const char *rel, const char *dtype, const char *quant, const char *kernels,
                     int threads) {
    return tm_load_lm(rel, dtype, quant, NULL, kernels, threads);
}

xi_model *tm_load_lm(const char *rel, const char *dtype, const char *quant, const char *lm_head,
                     const char *kernels, int threads) {
    char err[512] = "";
    char *dir = rel[0] == '/' ? xi_strdup(rel) : xi_test_data(rel);
    xi_model_params p = {.dir = dir, .dtype = dtype, .quantization = quant, .kernels = kernels,
                         .lm_head_quantization = lm_head, .n_threads = threads};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    if (!m) fprintf(stderr, "    load %s: %s\n", dir, err);
    free(dir);
    return m;
}

void tm_seq_init(tm_seq *s, int first_block, int n_blocks) {
    s->n_blocks = n_blocks;
    s->n_past = 0;
    for (int i = 0; i < n_blocks; i++) s->table[i] = first_block + i;
}

int tm_forward(xi_model *m, xi_kv_store *kv, tm_seq **seqs, const int32_t *const *ids,
               const int *n, int n_seq, int all_rows, float *logits) {
    size_t total = 0;
    for (int s = 0; s < n_seq; s++) total += (size_t)(n[s] > 0 ? n[s] : 0);
    if (total == 0 || total > (1u << 20)) return -1;
    int32_t *tok = malloc(sizeof(int32_t) * total), *pos = malloc(sizeof(int32_t) * total);
    int64_t *slots = malloc(sizeof(int64_t) * total);
    int32_t *rows = malloc(sizeof(int32_t) * total);
    xi_batch_seq *bs = calloc(n_seq, sizeof *bs);
    const int B = xi_kv_store_block_size(kv);
    int r = 0, nl = 0;
    for (int s = 0; s < n_seq; s++) {
        bs[s] = (xi_batch_seq){r, n[s], seqs[s]->table, seqs[s]->n_blocks};
        for (int i = 0; i < n[s]; i++, r++) {
            int p = seqs[s]->n_past + i;
            tok[r] = ids[s][i];
            pos[r] = p;
            slots[r] = (int64_t)seqs[s]->table[p / B] * B + p % B;
            if (logits && (all_rows || i == n[s] - 1)) rows[nl++] = r;
        }
        seqs[s]->n_past += n[s];
    }
    xi_batch b = {(int32_t)total, tok, pos, slots, n_seq, bs, nl, rows, 0, NULL, NULL};
    char err[256];
    int rc = xi_model_forward(m, kv, &b, logits, err, sizeof err);
    if (rc) fprintf(stderr, "    forward: %s\n", err);
    free(tok);
    free(pos);
    free(slots);
    free(rows);
    free(bs);
    return rc;
}

int32_t tm_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

json_t *tm_load_json(const char *rel) {
    char *p = xi_test_data(rel);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j) fprintf(stderr, "    %s: %s\n", p, je.text);
    free(p);
    return j;
}

void tm_reference(const char *kernels, const char *rel, double *err_first8, double *err_last) {
    char refpath[256];
    snprintf(refpath, sizeof refpath, "%s/reference.json", rel);
    tm_reference_of(kernels, rel, refpath, 1e-4, err_first8, err_last);
}

void tm_reference_of(const char *kernels, const char *model, const char *ref_rel, double tol,
                     double *err_first8, double *err_last) {
    xi_model *m = tm_load(model, "float32", kernels, 2);
    CHECK(m);
    const xi_config *c = xi_model_config(m);
    json_t *ref = tm_load_json(ref_rel);
    CHECK(ref);
    size_t si;
    json_t *sq;
    char err[256];
    json_array_foreach(json_object_get(ref, "sequences"), si, sq) {
        json_t *idj = json_object_get(sq, "ids");
        int n = (int)json_array_size(idj);
        int32_t ids[128];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(idj, i));
        xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
        CHECK(kv);
        tm_seq s;
        tm_seq_init(&s, 1, 15);
        tm_seq *sp = &s;
        const int32_t *ip = ids;
        float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * n);
        CHECK(tm_forward(m, kv, &sp, &ip, &n, 1, 1, logits) == 0);
        /* first 8 logits at every position, and the whole last row */
        json_t *f8 = json_object_get(sq, "logits_first8_per_position");
        double maxerr = 0, e8 = 0, elast = 0;
        for (int p = 0; p < n; p++)
            for (int j = 0; j < 8; j++) {
                double d = fabs(logits[(size_t)p * c->vocab_size + j] -
                                json_number_value(json_array_get(json_array_get(f8, p), j)));
                if (d > e8) e8 = d;
            }
        json_t *last = json_object_get(sq, "logits_last");
        for (int j = 0; j < c->vocab_size; j++) {
            double d = fabs(logits[(size_t)(n - 1) * c->vocab_size + j] -
                            json_number_value(json_array_get(last, j)));
            if (d > elast) elast = d;
        }
        maxerr = e8 > elast ? e8 : elast;
        if (err_first8 && e8 > *err_first8) *err_first8 = e8;
        if (err_last && elast > *err_last) *err_last = elast;
        CHECKF(maxerr < tol, "%s: max abs logit error %g", json_string_value(json_object_get(sq, "name")), maxerr);
        /* greedy continuation */
        json_t *g = json_object_get(sq, "greedy_32");
        int32_t next = tm_argmax(logits + (size_t)(n - 1) * c->vocab_size, c->vocab_size);
        for (size_t i = 0; i < json_array_size(g); i++) {
            CHECKF(next == json_integer_value(json_array_get(g, i)), "greedy step %zu: %d vs %lld", i,
                   next, json_integer_value(json_array_get(g, i)));
            const int32_t *np = &next;
            int one = 1;
            CHECK(tm_forward(m, kv, &sp, &np, &one, 1, 0, logits) == 0);
            next = tm_argmax(logits, c->vocab_size);
        }
        free(logits);
        xi_kv_store_free(kv);
    }
    json_decref(ref);
    xi_model_free(m);
}

void tm_int8_tracks_float(const char *rel, const int32_t *ids, int n, double bytes_ratio) {
    char err[256] = "";
    char *dir = xi_test_data(rel);
    xi_model_params pf = {.dir = dir, .n_threads = 2}, pq = pf;
    pq.quantization = "int8";
    xi_model *mf = xi_model_load(&pf, err, sizeof err), *mq = xi_model_load(&pq, err, sizeof err);
    CHECKF(mf && mq, "%s", err);
    CHECK(!strcmp(xi_model_quantization(mq), "int8"));
    CHECK(xi_model_weight_bytes(mq) < xi_model_weight_bytes(mf) * bytes_ratio);
    const xi_config *c = xi_model_config(mf);
    xi_kv_store *kf = xi_kv_store_new(c, 8, 16, XI_F32, err, sizeof err),
                *kq = xi_kv_store_new(c, 8, 16, XI_F32, err, sizeof err);
    tm_seq a, b;
    tm_seq_init(&a, 1, 7);
    tm_seq_init(&b, 1, 7);
    tm_seq *pa = &a, *pb = &b;
    const int32_t *ip = ids;
    float *lf = malloc(sizeof(float) * c->vocab_size), *lq = malloc(sizeof(float) * c->vocab_size);
    CHECK(tm_forward(mf, kf, &pa, &ip, &n, 1, 0, lf) == 0);
    CHECK(tm_forward(mq, kq, &pb, &ip, &n, 1, 0, lq) == 0);
    double maxd = 0, range = 0;
    for (int j = 0; j < c->vocab_size; j++) {
        if (fabs(lf[j] - lq[j]) > maxd) maxd = fabs(lf[j] - lq[j]);
        if (fabs(lf[j]) > range) range = fabs(lf[j]);
    }
    CHECKF(maxd < 0.05 * range, "int8 logits differ by %g (logit range %g)", maxd, range);
    CHECK(maxd > 0); /* it really is a different weight format */
    CHECK(tm_argmax(lf, c->vocab_size) == tm_argmax(lq, c->vocab_size));
    free(lf);
    free(lq);
    xi_kv_store_free(kf);
    xi_kv_store_free(kq);
    xi_model_free(mf);
    xi_model_free(mq);
    free(dir);
}

/* The same sequence computed alone and as one of 17 sequences in a batch gives the same bits;
 * so does feeding its prompt in chunks of 1, 5 and 16 tokens. */
void tm_invariance(const char *kernels, const char *rel, xi_dtype kvt, const char *quant) {
    tm_invariance_lm(kernels, rel, kvt, quant, NULL);
}

void tm_invariance_lm(const char *kernels, const char *rel, xi_dtype kvt, const char *quant,
                      const char *lm_head) {
    xi_model *m = tm_load_lm(rel, NULL, quant, lm_head, kernels, 2);
    CHECK(m);
    const xi_config *c = xi_model_config(m);
    const int V = c->vocab_size, NP = 40;
    char err[256];
    int32_t prompts[17][NP];
    uint64_t st = 12345;
    for (int s = 0; s < 17; s++)
        for (int i = 0; i < NP; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            prompts[s][i] = (int32_t)((st >> 33) % (uint64_t)(V < 500 ? V : 500));
        }
    float *alone = malloc(sizeof(float) * V), *batch = malloc(sizeof(float) * V * 17);
    /* alone, one chunk */
    xi_kv_store *kv = xi_kv_store_new(c, 17 * 4 + 1, 16, kvt, err, sizeof err);
    CHECK(kv);
    tm_seq s0;
    tm_seq_init(&s0, 1, 4);
    tm_seq *p0 = &s0;
    const int32_t *ip = prompts[0];
    int n = NP;
    CHECK(tm_forward(m, kv, &p0, &ip, &n, 1, 0, alone) == 0);
    /* 17 sequences in one batch (sequence 0 in the middle) */
    tm_seq ss[17];
    tm_seq *sp[17];
    const int32_t *ips[17];
    int ns[17];
    for (int s = 0; s < 17; s++) {
        int which = (s + 8) % 17;
        tm_seq_init(&ss[s], 1 + 4 * s, 4);
        sp[s] = &ss[s];
        ips[s] = prompts[which];
        ns[s] = NP - (which ? which % 7 : 0);
    }
    CHECK(tm_forward(m, kv, sp, ips, ns, 17, 0, batch) == 0);
    int at = 9; /* (9 + 8) % 17 == 0 */
    CHECK(memcmp(alone, batch + (size_t)at * V, sizeof(float) * V) == 0);
    /* chunks of 1, 5, 16 */
    int chunks[] = {1, 5, 16};
    for (int k = 0; k < 3; k++) {
        tm_seq sc;
        tm_seq_init(&sc, 1 + 4 * 16, 4);
        tm_seq *pc = &sc;
        for (int off = 0; off < NP; off += chunks[k]) {
            int len = NP - off < chunks[k] ? NP - off : chunks[k];
            const int32_t *cp = prompts[0] + off;
            /* logits of the last chunk only: the lm_head dominates under qemu */
            CHECK(tm_forward(m, kv, &pc, &cp, &len, 1, 0, off + len == NP ? batch : NULL) == 0);
        }
        CHECKF(memcmp(alone, batch, sizeof(float) * V) == 0, "chunk size %d differs", chunks[k]);
    }
    free(alone);
    free(batch);
    xi_kv_store_free(kv);
    xi_model_free(m);
}

float *tm_logits_all(xi_model *m, const int32_t *ids, int n) {
    const xi_config *c = xi_model_config(m);
    char err[256];
    xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
    float *out = malloc(sizeof *out * (size_t)n * (size_t)c->vocab_size);
    tm_seq seq;
    tm_seq_init(&seq, 0, 16);
    tm_seq *sp = &seq;
    int rc = kv && out && n <= 256 ? tm_forward(m, kv, &sp, &ids, &n, 1, 1, out) : -1;
    xi_kv_store_free(kv);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}

char *tm_genmodel(const char *sub, const char *preset, const char *args) {
    const char *tools = getenv("XINFER_TOOLS");
    char *dir = xi_path_join(xi_test_tmpdir(), sub);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/genmodel --preset %s %s '%s' 2>&1", tools ? tools : "build/tools",
             preset, args, dir);
    char *out = NULL;
    int rc = xi_test_run(cmd, &out);
    if (rc != 0) {
        fprintf(stderr, "    %s -> exit %d: %s\n", cmd, rc, out ? out : "");
        free(dir);
        dir = NULL;
    }
    free(out);
    return dir;
}

void tm_gguf_copy_kv(xi_gguf_writer *w, const xi_gguf *g) {
    for (int i = 0; i < xi_gguf_kv_count(g); i++) {
        const xi_gguf_kv *kv = xi_gguf_kv_at(g, i);
        if (kv->type == XI_GGUF_STR) {
            xi_gguf_write_str(w, kv->key, kv->str);
        } else if (kv->type == XI_GGUF_ARR && kv->arr_type == XI_GGUF_STR) {
            const char **v = calloc(kv->n + 1, sizeof *v);
            uint32_t *lens = calloc(kv->n + 1, sizeof *lens);
            for (uint64_t k = 0; k < kv->n; k++) {
                uint64_t len = 0;
                v[k] = xi_gguf_arr_str(kv, k, &len);
                lens[k] = (uint32_t)len;
            }
            xi_gguf_write_arr_str(w, kv->key, kv->n, v, lens);
            free(v);
            free(lens);
        } else if (kv->type == XI_GGUF_ARR) {
            xi_gguf_write_arr(w, kv->key, kv->arr_type, kv->n, kv->data);
        } else {
            xi_gguf_write_scalar(w, kv->key, kv->type, kv->data);
        }
    }
}

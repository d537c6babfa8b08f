/* GGUF reader and writer: real llama.cpp files, round trips of every value type, splits, and
 * corrupt or truncated files built by the test, each of which must fail with one line naming
 * the file and the key or tensor. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/base.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "tensor/dtype.h"
#include "test.h"

/* Opening must fail with one line naming the file and every fragment given. */
static int open_fails_naming(const char *path, const char *a, const char *b, char *msg, size_t n) {
    msg[0] = 0;
    xi_gguf *g = xi_gguf_open(path, msg, n);
    if (g) {
        xi_gguf_close(g);
        snprintf(msg, n, "opened successfully");
        return 0;
    }
    const char *base = strrchr(path, '/');
    return strstr(msg, base ? base + 1 : path) && strstr(msg, a) && (!b || strstr(msg, b)) &&
           !strchr(msg, '\n');
}

TEST(test_gguf_reads_llama256_f32_as_the_safetensors_weights) {
    char err[512] = "";
    xi_gguf *g = xi_gguf_open(xi_test_data("gguf/llama256-random-f32.gguf"), err, sizeof err);
    CHECKF(g, "%s", err);
    CHECK_EQ(xi_gguf_version(g), 3);
    CHECK_STR(xi_gguf_get_str(g, "general.architecture"), "llama");
    int64_t v = 0;
    CHECK(xi_gguf_get_i64(g, "llama.block_count", &v) == 0 && v == 2);
    CHECK(xi_gguf_get_i64(g, "llama.embedding_length", &v) == 0 && v == 256);
    CHECK(xi_gguf_get_i64(g, "llama.feed_forward_length", &v) == 0 && v == 768);
    double eps = 0;
    CHECK(xi_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &eps) == 0);
    CHECK_NEAR(eps, 1e-5, 1e-9);
    CHECK(xi_gguf_get_i64(g, "general.architecture", &v) == -1); /* a string is not an integer */
    CHECK(!xi_gguf_get_str(g, "llama.block_count"));
    const xi_gguf_kv *toks = xi_gguf_find_kv(g, "tokenizer.ggml.tokens");
    CHECK(toks && toks->type == XI_GGUF_ARR && toks->arr_type == XI_GGUF_STR && toks->n == 512);
    uint64_t len = 0;
    const char *s = xi_gguf_arr_str(toks, 1, &len);
    CHECK(s && len == 3 && !memcmp(s, "<s>", 3));
    CHECK(!xi_gguf_arr_str(toks, 512, &len));
    /* 2 layers x 9 tensors + embeddings, final norm, output. */
    CHECK_EQ(xi_gguf_tensor_count(g), 2 * 9 + 3);
    const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->type->id == XI_GGML_F32 && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 512);
    CHECK_EQ(t->nbytes, 256 * 512 * 4);
    CHECK(((uintptr_t)t->data & 31) == 0);
    CHECK(!xi_gguf_find_tensor(g, "nope"));
    for (int i = 0; i < xi_gguf_tensor_count(g); i++)
        CHECK(xi_gguf_find_tensor(g, xi_gguf_tensor_at(g, i)->name) == xi_gguf_tensor_at(g, i));

    /* The weights are the BF16 safetensors' values (exact in F32); the embeddings and the
     * down projection are not permuted (only attn_q / attn_k are). */
    xi_st_set *st = xi_st_open_dir(xi_test_data("gguf/llama256-random-hf"), err, sizeof err);
    CHECKF(st, "%s", err);
    const char *pairs[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                              {"blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"},
                              {"output.weight", "lm_head.weight"}};
    for (size_t p = 0; p < XI_ARRAY_LEN(pairs); p++) {
        const xi_gguf_tensor *a = xi_gguf_find_tensor(g, pairs[p][0]);
        const xi_st_tensor *b = xi_st_find(st, pairs[p][1]);
        CHECK(a && b && b->dtype == XI_BF16);
        CHECK(a->ne[0] == b->shape[1] && a->ne[1] == b->shape[0]);
        int64_t n = xi_gguf_tensor_numel(a);
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        memcpy(x, a->data, (size_t)n * 4);
        xi_to_f32(y, b->data, XI_BF16, (size_t)n);
        CHECKF(!memcmp(x, y, (size_t)n * 4), "%s differs from %s", pairs[p][0], pairs[p][1]);
        free(x);
        free(y);
    }
    xi_st_close(st);
    xi_gguf_close(g);
}

/* A file with one value of every type, arrays, and F32 / F16 / BF16 / Q8_0 tensors. */
static char *write_sample(const char *name, uint32_t align, char *err, size_t errlen) {
    xi_gguf_writer *w = xi_gguf_writer_new(align);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    uint64_t u64 = 1ull << 62;
    int64_t i64 = -(1ll << 60);
    double f64 = 3.25;
    uint8_t b = 1;
    xi_gguf_write_scalar(w, "t.u8", XI_GGUF_U8, &u8);
    xi_gguf_write_scalar(w, "t.i8", XI_GGUF_I8, &i8);
    xi_gguf_write_scalar(w, "t.u16", XI_GGUF_U16, &u16);
    xi_gguf_write_scalar(w, "t.i16", XI_GGUF_I16, &i16);
    xi_gguf_write_u32(w, "t.u32", 4000000000u);
    xi_gguf_write_scalar(w, "t.i32", XI_GGUF_I32, &i32);
    xi_gguf_write_f32(w, "t.f32", -1.5f);
    xi_gguf_write_scalar(w, "t.bool", XI_GGUF_BOOL, &b);
    xi_gguf_write_str(w, "t.str", "héllo");
    xi_gguf_write_scalar(w, "t.u64", XI_GGUF_U64, &u64);
    xi_gguf_write_scalar(w, "t.i64", XI_GGUF_I64, &i64);
    xi_gguf_write_scalar(w, "t.f64", XI_GGUF_F64, &f64);
    int32_t arr[3] = {7, -8, 9};
    xi_gguf_write_arr(w, "t.arr_i32", XI_GGUF_I32, 3, arr);
    float farr[2] = {0.5f, -2.0f};
    xi_gguf_write_arr(w, "t.arr_f32", XI_GGUF_F32, 2, farr);
    const char *strs[3] = {"a", "", "ccc"};
    xi_gguf_write_arr_str(w, "t.arr_str", 3, strs, NULL);
    static float f32[3 * 5];
    static uint16_t f16[7], bf16[7];
    static uint8_t q8[2 * 34];
    for (int i = 0; i < 15; i++) f32[i] = (float)i - 7.5f;
    for (int i = 0; i < 7; i++) f16[i] = xi_f32_to_f16((float)i), bf16[i] = xi_f32_to_bf16(-(float)i);
    for (int i = 0; i < 2 * 34; i++) q8[i] = (uint8_t)(i * 7);
    xi_gguf_write_tensor(w, "w.f32", XI_GGML_F32, 2, (int64_t[]){5, 3}, f32);
    xi_gguf_write_tensor(w, "w.f16", XI_GGML_F16, 1, (int64_t[]){7}, f16);
    xi_gguf_write_tensor(w, "w.bf16", XI_GGML_BF16, 1, (int64_t[]){7}, bf16);
    xi_gguf_write_tensor(w, "w.q8_0", XI_GGML_Q8_0, 2, (int64_t[]){32, 2}, q8);
    char *path = xi_path_join(xi_test_tmpdir(), name);
    int rc = xi_gguf_writer_write(w, path, err, errlen);
    xi_gguf_writer_free(w);
    if (rc) {
        free(path);
        return NULL;
    }
    return path;
}

TEST(test_gguf_writer_round_trips_every_value_type_and_alignment) {
    char err[512] = "";
    uint32_t aligns[2] = {0, 64};
    for (int k = 0; k < 2; k++) {
        char *path = write_sample(k ? "a64.gguf" : "a32.gguf", aligns[k], err, sizeof err);
        CHECKF(path, "%s", err);
        xi_gguf *g = xi_gguf_open(path, err, sizeof err);
        CHECKF(g, "%s", err);
        int64_t v;
        double d;
        int b = 0;
        CHECK(xi_gguf_get_i64(g, "t.u8", &v) == 0 && v == 200);
        CHECK(xi_gguf_get_i64(g, "t.i8", &v) == 0 && v == -100);
        CHECK(xi_gguf_get_i64(g, "t.u16", &v) == 0 && v == 60000);
        CHECK(xi_gguf_get_i64(g, "t.i16", &v) == 0 && v == -30000);
        CHECK(xi_gguf_get_i64(g, "t.u32", &v) == 0 && v == 4000000000ll);
        CHECK(xi_gguf_get_i64(g, "t.i32", &v) == 0 && v == -2000000000ll);
        CHECK(xi_gguf_get_f64(g, "t.f32", &d) == 0 && d == -1.5);
        CHECK(xi_gguf_get_bool(g, "t.bool", &b) == 0 && b == 1);
        CHECK(xi_gguf_get_i64(g, "t.bool", &v) == -1);
        CHECK_STR(xi_gguf_get_str(g, "t.str"), "héllo");
        CHECK(xi_gguf_get_i64(g, "t.u64", &v) == 0 && v == 1ll << 62);
        CHECK(xi_gguf_get_i64(g, "t.i64", &v) == 0 && v == -(1ll << 60));
        CHECK(xi_gguf_get_f64(g, "t.f64", &d) == 0 && d == 3.25);
        CHECK(xi_gguf_get_f64(g, "t.u16", &d) == 0 && d == 60000.0);
        const xi_gguf_kv *a = xi_gguf_find_kv(g, "t.arr_i32");
        CHECK(a && a->n == 3 && xi_gguf_arr_i64(a, 1) == -8 && xi_gguf_arr_f64(a, 2) == 9.0);
        a = xi_gguf_find_kv(g, "t.arr_f32");
        CHECK(a && a->n == 2 && xi_gguf_arr_f64(a, 1) == -2.0);
        a = xi_gguf_find_kv(g, "t.arr_str");
        uint64_t len = 9;
        CHECK(a && a->n == 3 && xi_gguf_arr_str(a, 1, &len) && len == 0);
        const char *s = xi_gguf_arr_str(a, 2, &len);
        CHECK(s && len == 3 && !memcmp(s, "ccc", 3));
        CHECK_EQ(xi_gguf_kv_count(g), 15 + (k ? 1 : 0));
        if (k) CHECK(xi_gguf_get_i64(g, "general.alignment", &v) == 0 && v == 64);
        CHECK_EQ(xi_gguf_tensor_count(g), 4);
        uint32_t al = k ? 64 : 32;
        for (int i = 0; i < 4; i++) {
            const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
            CHECKF(((uintptr_t)t->data % al) == 0, "%s not %u-aligned", t->name, al);
        }
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "w.f32");
        CHECK(t && t->ne[0] == 5 && t->ne[1] == 3 && t->nbytes == 60);
        float f;
        memcpy(&f, (const float *)t->data + 14, 4);
        CHECK(f == 6.5f);
        t = xi_gguf_find_tensor(g, "w.f16");
        CHECK(t && t->type->id == XI_GGML_F16 && t->nbytes == 14);
        CHECK(xi_f16_to_f32(((const uint16_t *)t->data)[6]) == 6.0f);
        t = xi_gguf_find_tensor(g, "w.bf16");
        CHECK(t && xi_bf16_to_f32(((const uint16_t *)t->data)[3]) == -3.0f);
        t = xi_gguf_find_tensor(g, "w.q8_0");
        CHECK(t && t->nbytes == 68 && ((const uint8_t *)t->data)[67] == (uint8_t)(67 * 7));
        xi_gguf_close(g);
        free(path);
    }
}

/* Streamed tensors: bytes made by the callback land where the header says; a callback that
 * writes the wrong size, or a streamed tensor without one, fails naming the tensor. */
static int fill_rows(void *ctx, int i, FILE *f) {
    const int *short_by = ctx;
    float v[15];
    for (int k = 0; k < 15; k++) v[k] = (float)(100 * i + k);
    size_t n = (size_t)(15 - (i == 1 ? *short_by : 0));
    return fwrite(v, 4, n, f) == n ? 0 : -1;
}

TEST(test_gguf_writer_streams_tensors_from_a_callback) {
    for (int short_by = 0; short_by < 3; short_by++) {
        xi_gguf_writer *w = xi_gguf_writer_new(0);
        int64_t ne[2] = {5, 3};
        xi_gguf_write_tensor(w, "a", XI_GGML_F32, 2, ne, NULL);
        xi_gguf_write_tensor(w, "b", XI_GGML_F32, 2, ne, NULL);
        char err[512] = "", *path = xi_path_join(xi_test_tmpdir(), "fill.gguf");
        int rc = short_by == 2 ? xi_gguf_writer_write(w, path, err, sizeof err)
                               : xi_gguf_writer_write_fill(w, path, fill_rows, &short_by, err, sizeof err);
        xi_gguf_writer_free(w);
        if (short_by == 1) CHECKF(rc < 0 && strstr(err, "tensor b: the fill callback wrote the wrong size"), "%s", err);
        if (short_by == 2) CHECKF(rc < 0 && strstr(err, "tensor a: no data"), "%s", err);
        if (!short_by) {
            CHECKF(rc == 0, "%s", err);
            xi_gguf *g = xi_gguf_open(path, err, sizeof err);
            CHECKF(g, "%s", err);
            const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "b");
            CHECK(t && t->nbytes == 60 && ((const float *)t->data)[14] == 114.0f);
            CHECK(((const float *)xi_gguf_find_tensor(g, "a")->data)[3] == 3.0f);
            xi_gguf_close(g);
        }
        free(path);
    }
}

/* ---- a raw builder for files the writer would never produce ---- */

typedef struct raw {
    xi_buf b;
} raw;

static void r_u32(raw *r, uint32_t v) { xi_buf_append(&r->b, &v, 4); }
static void r_u64(raw *r, uint64_t v) { xi_buf_append(&r->b, &v, 8); }
static void r_str(raw *r, const char *s) {
    r_u64(r, strlen(s));
    xi_buf_append(&r->b, s, strlen(s));
}

typedef struct tinfo {
    const char *name;
    uint32_t n_dims, type;
    uint64_t ne[5];
    uint64_t offset;
} tinfo;

/* Header "GGUF" v, then n_kv key-values given as raw bytes, then tensor infos, padding to 32
 * and data_len bytes. */
static char *write_raw(const char *name, uint32_t version, const raw *kvs, uint64_t n_kv,
                       const tinfo *ts, int n_t, size_t data_len) {
    raw r = {0};
    xi_buf_append(&r.b, "GGUF", 4);
    r_u32(&r, version);
    r_u64(&r, (uint64_t)n_t);
    r_u64(&r, n_kv);
    if (kvs && kvs->b.len) xi_buf_append(&r.b, kvs->b.data, kvs->b.len);
    for (int i = 0; i < n_t; i++) {
        r_str(&r, ts[i].name);
        r_u32(&r, ts[i].n_dims);
        for (uint32_t d = 0; d < ts[i].n_dims && d < 5; d++) r_u64(&r, ts[i].ne[d]);
        r_u32(&r, ts[i].type);
        r_u64(&r, ts[i].offset);
    }
    while (r.b.len % 32) xi_buf_append(&r.b, "", 1);
    for (size_t i = 0; i < data_len; i++) xi_buf_append(&r.b, "\x11", 1);
    char *path = xi_path_join(xi_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    fwrite(r.b.data, 1, r.b.len, f);
    fclose(f);
    xi_buf_free(&r.b);
    return path;
}

TEST(test_gguf_rejects_corrupt_headers_naming_key_or_tensor) {
    char msg[512];
    tinfo good = {"blk.0.w", 2, XI_GGML_F32, {8, 4}, 0};
    char *p = write_raw("ok.gguf", 3, NULL, 0, &good, 1, 128);
    xi_gguf *g = xi_gguf_open(p, msg, sizeof msg);
    CHECKF(g, "%s", msg);
    xi_gguf_close(g);

    p = write_raw("v1.gguf", 1, NULL, 0, &good, 1, 128);
    CHECKF(open_fails_naming(p, "version 1", NULL, msg, sizeof msg), "%s", msg);
    p = write_raw("be.gguf", 0x03000000u, NULL, 0, &good, 1, 128);
    CHECKF(open_fails_naming(p, "big-endian", NULL, msg, sizeof msg), "%s", msg);
    p = write_raw("short.gguf", 3, NULL, 0, &good, 1, 100);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", "exceed", msg, sizeof msg), "%s", msg);

    tinfo t = good;
    t.type = 99;
    p = write_raw("type.gguf", 3, NULL, 0, &t, 1, 128);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", "unknown ggml type 99", msg, sizeof msg), "%s", msg);
    t = good;
    t.offset = 4;
    p = write_raw("align.gguf", 3, NULL, 0, &t, 1, 256);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", "alignment 32", msg, sizeof msg), "%s", msg);
    t = good;
    t.n_dims = 5;
    p = write_raw("dims.gguf", 3, NULL, 0, &t, 1, 256);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", "5 dims", msg, sizeof msg), "%s", msg);
    t = good;
    t.type = XI_GGML_Q4_K;
    t.ne[0] = 100;
    p = write_raw("block.gguf", 3, NULL, 0, &t, 1, 4096);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", "q4_K blocks of 256", msg, sizeof msg), "%s", msg);
    t = good;
    t.ne[1] = 1ull << 62;
    p = write_raw("huge.gguf", 3, NULL, 0, &t, 1, 256);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", NULL, msg, sizeof msg), "%s", msg);
    tinfo two[2] = {good, good};
    two[1].name = "blk.1.w";
    two[1].offset = 96; /* [96, 224) overlaps [0, 128) */
    p = write_raw("overlap.gguf", 3, NULL, 0, two, 2, 256);
    CHECKF(open_fails_naming(p, "overlaps", "blk.", msg, sizeof msg), "%s", msg);
    two[1].name = "blk.0.w";
    two[1].offset = 128;
    p = write_raw("dup.gguf", 3, NULL, 0, two, 2, 256);
    CHECKF(open_fails_naming(p, "tensor blk.0.w", "twice", msg, sizeof msg), "%s", msg);

    /* One bad key-value each: key, value type, then the value's raw bytes. */
    static const struct {
        const char *file, *key;
        uint32_t type;
        const char *bytes;
        size_t nbytes;
        const char *says;
    } bad_kv[] = {
        {"bool.gguf", "general.flag", XI_GGUF_BOOL, "\x02", 1, "bool"},
        {"vtype.gguf", "general.name", 77, "", 0, "unknown value type 77"},
        {"count.gguf", "tokenizer.ggml.tokens", XI_GGUF_ARR,
         "\x08\0\0\0" "\0\0\0\0\0\x01\0\0", 12, "cannot fit"},   /* 2^40 strings */
        {"strlen.gguf", "general.name", XI_GGUF_STR, "\0\0\0\0\0\0\x04\0", 8, "truncated"},
        {"align48.gguf", "general.alignment", XI_GGUF_U32, "\x30\0\0\0", 4, "power of two"},
        {"nested.gguf", "a.nested", XI_GGUF_ARR, "\x09\0\0\0" "\0\0\0\0\0\0\0\0", 12,
         "arrays"},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(bad_kv); i++) {
        raw kv = {0};
        r_str(&kv, bad_kv[i].key);
        r_u32(&kv, bad_kv[i].type);
        xi_buf_append(&kv.b, bad_kv[i].bytes, bad_kv[i].nbytes);
        p = write_raw(bad_kv[i].file, 3, &kv, 1, &good, 1, 128);
        xi_buf_free(&kv.b);
        char key[128];
        snprintf(key, sizeof key, "key %s", bad_kv[i].key);
        CHECKF(open_fails_naming(p, key, bad_kv[i].says, msg, sizeof msg), "%s", msg);
    }
    raw kv = {0};
    for (int i = 0; i < 2; i++) {
        r_str(&kv, "general.alignment");
        r_u32(&kv, XI_GGUF_U32);
        r_u32(&kv, 32);
    }
    p = write_raw("twice.gguf", 3, &kv, 2, &good, 1, 128);
    xi_buf_free(&kv.b);
    CHECKF(open_fails_naming(p, "key general.alignment", "twice", msg, sizeof msg), "%s", msg);
    p = xi_path_join(xi_test_tmpdir(), "magic.gguf");
    FILE *f = fopen(p, "wb");
    fputs("GGML and more", f);
    fclose(f);
    CHECKF(open_fails_naming(p, "not a GGUF file", NULL, msg, sizeof msg), "%s", msg);
}

/* Every prefix of a real file fails cleanly: the cut lands in the header, a string, an array
 * or a tensor's data, and each must be an error line, never a read past the end. */
TEST(test_gguf_every_truncation_of_a_real_file_fails_cleanly) {
    char err[512] = "";
    size_t len;
    char *full = xi_read_file(xi_test_data("gguf/stories260K-f32.gguf"), &len, err, sizeof err);
    CHECKF(full, "%s", err);
    char *path = xi_path_join(xi_test_tmpdir(), "cut.gguf");
    /* Written once, then cut shorter and shorter in place: every 7th byte through the
     * metadata and tokenizer arrays, and 32 cuts through the tensor infos and data. */
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(full, 1, len, f) == len);
    fclose(f);
    int tried = 0;
    size_t cut = len - 1;
    while (1) {
        CHECK(truncate(path, (off_t)cut) == 0);
        err[0] = 0;
        xi_gguf *g = xi_gguf_open(path, err, sizeof err);
        if (g) xi_gguf_close(g);
        CHECKF(!g, "a file cut at %zu of %zu bytes opened", cut, len);
        CHECKF(err[0] && strstr(err, "cut.gguf") && !strchr(err, '\n'), "cut %zu: '%s'", cut, err);
        tried++;
        if (cut == 0) break;
        if (cut > 20000)
            cut = cut - 20000 > len / 32 ? cut - len / 32 : 20000;
        else
            cut = cut > 7 ? cut - 7 : 0;
    }
    CHECK(tried > 2000);
    free(full);
    free(path);
}

TEST(test_gguf_split_parts_open_as_one_model) {
    char err[512] = "";
    static float a[64], b[32];
    for (int i = 0; i < 64; i++) a[i] = (float)i;
    for (int i = 0; i < 32; i++) b[i] = -(float)i;
    const char *dir = xi_test_tmpdir();
    for (int part = 0; part < 2; part++) {
        xi_gguf_writer *w = xi_gguf_writer_new(0);
        uint16_t no = (uint16_t)part, count = 2;
        xi_gguf_write_scalar(w, "split.no", XI_GGUF_U16, &no);
        xi_gguf_write_scalar(w, "split.count", XI_GGUF_U16, &count);
        if (part == 0) xi_gguf_write_str(w, "general.architecture", "llama");
        if (part == 0) xi_gguf_write_tensor(w, "a", XI_GGML_F32, 2, (int64_t[]){16, 4}, a);
        else xi_gguf_write_tensor(w, "b", XI_GGML_F32, 1, (int64_t[]){32}, b);
        char name[64];
        snprintf(name, sizeof name, "m-%05d-of-00002.gguf", part + 1);
        char *p = xi_path_join(dir, name);
        CHECKF(xi_gguf_writer_write(w, p, err, sizeof err) == 0, "%s", err);
        xi_gguf_writer_free(w);
        free(p);
    }
    char *first = xi_path_join(dir, "m-00001-of-00002.gguf");
    xi_gguf *g = xi_gguf_open(first, err, sizeof err);
    CHECKF(g, "%s", err);
    CHECK_EQ(xi_gguf_n_files(g), 2);
    CHECK_EQ(xi_gguf_tensor_count(g), 2);
    CHECK_STR(xi_gguf_get_str(g, "general.architecture"), "llama");
    const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "b");
    CHECK(t && strstr(t->file, "m-00002-of-00002.gguf"));
    float v;
    memcpy(&v, (const float *)t->data + 31, 4);
    CHECK(v == -31.0f);
    xi_gguf_close(g);
    char msg[512];
    char *second = xi_path_join(dir, "m-00002-of-00002.gguf");
    CHECKF(open_fails_naming(second, "first part", NULL, msg, sizeof msg), "%s", msg);
    /* A missing part is named; a part count that disagrees with the name is refused. */
    char *lone = xi_path_join(dir, "k-00001-of-00002.gguf");
    CHECK(rename(first, lone) == 0);
    msg[0] = 0;
    CHECK(!xi_gguf_open(lone, msg, sizeof msg));
    CHECKF(strstr(msg, "k-00002-of-00002.gguf") && !strchr(msg, '\n'), "%s", msg);
    char *third = xi_path_join(dir, "n-00001-of-00003.gguf");
    CHECK(rename(lone, third) == 0);
    CHECKF(open_fails_naming(third, "split.count: 2", "3 parts", msg, sizeof msg), "%s", msg);
    free(lone);
    free(first);
    free(second);
    free(third);
}

/* ---- xinfer inspect FILE.gguf, through the binary ---- */

TEST(test_gguf_inspect_shows_metadata_and_each_tensors_type) {
    const char *file = xi_test_data("gguf/llama256-random-q4_k_m-mix.gguf");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s inspect '%s' --json 2>/dev/null", xi_test_bin(), file);
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    CHECKF(j, "%s: %s", je.text, out);
    free(out);
    CHECK_STR(json_string_value(json_object_get(j, "format")), "gguf");
    json_t *meta = json_object_get(j, "metadata");
    CHECK_STR(json_string_value(json_object_get(meta, "general.architecture")), "llama");
    CHECK_EQ(json_integer_value(json_object_get(meta, "llama.block_count")), 2);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(meta, "tokenizer.ggml.tokens"), "n")),
             512);
    /* Every tensor's type as llama-quantize's mixture made it (the reference lists them). */
    json_t *ref = json_load_file(xi_test_data("gguf/llama256-random-q4_k_m-mix.reference.json"), 0, &je);
    CHECK(ref);
    json_t *types = json_object_get(ref, "tensor_types");
    json_t *tensors = json_object_get(j, "tensors");
    CHECK_EQ(json_array_size(tensors), json_object_size(types));
    int q6 = 0;
    size_t i;
    json_t *t;
    json_array_foreach(tensors, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *want = json_string_value(json_object_get(types, name));
        const char *got = json_string_value(json_object_get(t, "type"));
        CHECKF(want && got && !strcasecmp(want, got), "%s: %s vs %s", name, got, want);
        q6 += !strcmp(got, "q6_K");
    }
    CHECK(q6 > 0);
    json_decref(ref);
    json_decref(j);
    /* A broken file: one line naming it, exit 1. */
    char *cut = xi_path_join(xi_test_tmpdir(), "cut.gguf");
    snprintf(cmd, sizeof cmd, "head -c 5000 '%s' > '%s' && %s inspect '%s' 2>&1", file, cut,
             xi_test_bin(), cut);
    int rc = xi_test_run(cmd, &out);
    CHECKF(rc == 1 && strstr(out, "cut.gguf") && strstr(out, "truncated") &&
           strchr(out, '\n') == out + strlen(out) - 1, "rc %d: %s", rc, out);
    free(out);
    free(cut);
}

/* The writer's F16, BF16 and Q8_0 conversions give llama.cpp's bytes: every 2-D tensor of the
 * F32 file, converted, equals the same tensor of llama-quantize's files. */
TEST(test_gguf_writer_conversions_match_llama_cpp_bytes) {
    static const struct {
        const char *file;
        int type;
    } cases[] = {{"f16", XI_GGML_F16}, {"bf16", XI_GGML_BF16}, {"q8_0", XI_GGML_Q8_0}};
    char err[512] = "";
    xi_gguf *src = xi_gguf_open(xi_test_data("gguf/llama256-random-f32.gguf"), err, sizeof err);
    CHECKF(src, "%s", err);
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        char rel[96];
        snprintf(rel, sizeof rel, "gguf/llama256-random-%s.gguf", cases[c].file);
        xi_gguf *ref = xi_gguf_open(xi_test_data(rel), err, sizeof err);
        CHECKF(ref, "%s", err);
        xi_gguf_writer *w = xi_gguf_writer_new(0);
        int n = 0;
        for (int i = 0; i < xi_gguf_tensor_count(src); i++) {
            const xi_gguf_tensor *t = xi_gguf_tensor_at(src, i);
            if (t->n_dims != 2) continue;
            float *x = malloc(t->nbytes);
            memcpy(x, t->data, t->nbytes);
            CHECK(xi_gguf_write_tensor_f32(w, t->name, cases[c].type, 2, t->ne, x) == 0);
            free(x); /* the writer keeps its own converted copy */
            n++;
        }
        char *path = xi_path_join(xi_test_tmpdir(), "converted.gguf");
        CHECKF(xi_gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
        xi_gguf_writer_free(w);
        xi_gguf *got = xi_gguf_open(path, err, sizeof err);
        CHECKF(got, "%s", err);
        CHECK_EQ(xi_gguf_tensor_count(got), n);
        CHECK(n == 16);
        for (int i = 0; i < n; i++) {
            const xi_gguf_tensor *a = xi_gguf_tensor_at(got, i);
            const xi_gguf_tensor *b = xi_gguf_find_tensor(ref, a->name);
            CHECK(b && b->type->id == cases[c].type && a->nbytes == b->nbytes);
            CHECKF(!memcmp(a->data, b->data, a->nbytes), "%s %s: bytes differ from llama.cpp's",
                   cases[c].file, a->name);
        }
        xi_gguf_close(got);
        xi_gguf_close(ref);
        free(path);
    }
    /* Only those conversions: a Q4_K request is refused, and so is the file. */
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    static const float zeros[256];
    CHECK(xi_gguf_write_tensor_f32(w, "x", XI_GGML_Q4_K, 1, (int64_t[]){256}, zeros) == -1);
    char *bad = xi_path_join(xi_test_tmpdir(), "refused.gguf");
    CHECK(xi_gguf_writer_write(w, bad, err, sizeof err) == -1 && strstr(err, "invalid"));
    xi_gguf_writer_free(w);
    free(bad);
    xi_gguf_close(src);
}

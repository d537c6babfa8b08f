#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/safetensors.h"
#include "test.h"

/* Write a safetensors file from a literal header and `data_size` bytes of data (value i & 255).
 * hlen_override != 0 writes that header length instead of the true one. */
static char *write_raw(const char *name, const char *header, size_t data_size, uint64_t hlen_override) {
    char *path = xi_path_join(xi_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    uint64_t hlen = hlen_override ? hlen_override : strlen(header);
    for (int i = 0; i < 8; i++) fputc((int)((hlen >> (8 * i)) & 255), f);
    fputs(header, f);
    for (size_t i = 0; i < data_size; i++) fputc((int)(i & 255), f);
    fclose(f);
    return path;
}

/* Opening must fail, and the one-line message must name every fragment given. */
static int open_fails_naming(const char *path, const char *a, const char *b, char *msg, size_t n) {
    msg[0] = 0;
    xi_st_set *s = xi_st_open_file(path, msg, n);
    if (s) {
        xi_st_close(s);
        snprintf(msg, n, "opened successfully");
        return 0;
    }
    return strstr(msg, a) && (!b || strstr(msg, b)) && !strchr(msg, '\n');
}

TEST(test_st_reads_stories260k_names_shapes_dtypes) {
    char err[512] = "";
    xi_st_set *s = xi_st_open_dir(xi_test_data("models/stories260K"), err, sizeof err);
    CHECKF(s, "%s", err);
    /* 5 layers x 9 tensors + embeddings + final norm (tied: no lm_head). */
    CHECK_EQ(xi_st_count(s), 5 * 9 + 2);
    const xi_st_tensor *t = xi_st_find(s, "model.embed_tokens.weight");
    CHECK(t);
    CHECK_EQ(t->dtype, XI_F32);
    CHECK_EQ(t->n_dims, 2);
    CHECK_EQ(t->shape[0], 512);
    CHECK_EQ(t->shape[1], 64);
    CHECK_EQ(t->nbytes, 512 * 64 * 4);
    t = xi_st_find(s, "model.layers.4.self_attn.k_proj.weight");
    CHECK(t);
    CHECK_EQ(t->shape[0], 32); /* 4 KV heads x head_dim 8 */
    CHECK_EQ(t->shape[1], 64);
    t = xi_st_find(s, "model.layers.2.mlp.down_proj.weight");
    CHECK(t);
    CHECK_EQ(t->shape[0], 64);
    CHECK_EQ(t->shape[1], 172);
    t = xi_st_find(s, "model.norm.weight");
    CHECK(t);
    CHECK_EQ(t->n_dims, 1);
    CHECK(strstr(t->file, "model.safetensors"));
    CHECK(!xi_st_find(s, "lm_head.weight"));
    CHECK(!xi_st_find(s, ""));
    CHECK_STR(xi_st_metadata(s, "format"), "pt");
    CHECK(!xi_st_metadata(s, "nope"));
    /* xi_st_at walks the file in offset order and every name is found again. */
    const uint8_t *prev = NULL;
    for (int i = 0; i < xi_st_count(s); i++) {
        const xi_st_tensor *a = xi_st_at(s, i);
        CHECK(a && xi_st_find(s, a->name) == a);
        CHECK((const uint8_t *)a->data >= prev);
        prev = (const uint8_t *)a->data + a->nbytes;
    }
    CHECK(!xi_st_at(s, -1));
    CHECK(!xi_st_at(s, xi_st_count(s)));
    /* Norm weights of a trained model are positive-ish and finite: the data pointer is real. */
    t = xi_st_find(s, "model.layers.0.input_layernorm.weight");
    float w0;
    memcpy(&w0, t->data, 4);
    CHECK(w0 > 0.0f && w0 < 100.0f);
    xi_st_close(s);
}

TEST(test_st_reads_qwen2_tiny_bf16_with_bias) {
    char err[512] = "";
    xi_st_set *s = xi_st_open_dir(xi_test_data("models/qwen2-tiny-random"), err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(xi_st_count(s), 2 * 12 + 2);
    const xi_st_tensor *t = xi_st_find(s, "model.embed_tokens.weight");
    CHECK(t);
    CHECK_EQ(t->dtype, XI_BF16);
    CHECK_EQ(t->shape[0], 151936);
    CHECK_EQ(t->shape[1], 64);
    t = xi_st_find(s, "model.layers.1.self_attn.q_proj.bias");
    CHECK(t);
    CHECK_EQ(t->dtype, XI_BF16);
    CHECK_EQ(t->n_dims, 1);
    CHECK_EQ(t->shape[0], 64);
    for (int i = 0; i < xi_st_count(s); i++) CHECK_EQ(xi_st_at(s, i)->dtype, XI_BF16);
    xi_st_close(s);
}

TEST(test_st_rejects_truncated_file_naming_tensor) {
    char msg[512];
    const char *h = "{\"w.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]}}";
    char *p = write_raw("trunc.safetensors", h, 40, 0); /* 24 bytes of data missing */
    CHECKF(open_fails_naming(p, "trunc.safetensors", "tensor w.weight", msg, sizeof msg), "%s", msg);
    CHECKF(strstr(msg, "exceed data size 40"), "%s", msg);
    /* Shorter than the length prefix. */
    char *p2 = xi_path_join(xi_test_tmpdir(), "tiny.safetensors");
    FILE *f = fopen(p2, "wb");
    fputs("abc", f);
    fclose(f);
    CHECKF(open_fails_naming(p2, "tiny.safetensors", "truncated", msg, sizeof msg), "%s", msg);
    free(p);
    free(p2);
}

TEST(test_st_rejects_header_length_beyond_file) {
    char msg[512];
    const char *h = "{}";
    char *p = write_raw("hlen.safetensors", h, 0, 1000);
    CHECKF(open_fails_naming(p, "hlen.safetensors", "header length 1000", msg, sizeof msg), "%s", msg);
    char *p2 = write_raw("huge.safetensors", h, 0, (uint64_t)1 << 40);
    CHECKF(open_fails_naming(p2, "huge.safetensors", "limit", msg, sizeof msg), "%s", msg);
    free(p);
    free(p2);
}

TEST(test_st_rejects_offsets_beyond_data) {
    char msg[512];
    const char *h = "{\"model.layers.0.mlp.up_proj.weight\":{\"dtype\":\"U8\",\"shape\":[4900],"
                    "\"data_offsets\":[100,5000]}}";
    char *p = write_raw("model.safetensors", h, 4000, 0);
    CHECKF(open_fails_naming(p, "model.safetensors", "tensor model.layers.0.mlp.up_proj.weight", msg,
                             sizeof msg), "%s", msg);
    CHECKF(strstr(msg, "data_offsets [100, 5000] exceed data size 4000"), "%s", msg);
    free(p);
}

TEST(test_st_rejects_shape_offset_size_mismatch) {
    char msg[512];
    const char *h = "{\"a.weight\":{\"dtype\":\"F16\",\"shape\":[3,5],\"data_offsets\":[0,32]}}";
    char *p = write_raw("mismatch.safetensors", h, 32, 0);
    CHECKF(open_fails_naming(p, "mismatch.safetensors", "tensor a.weight", msg, sizeof msg), "%s", msg);
    CHECKF(strstr(msg, "30 bytes"), "%s", msg);
    /* Overflowing shapes are caught, not wrapped around to a matching size. */
    const char *h2 = "{\"b\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,0]}}";
    char *p2 = write_raw("overflow.safetensors", h2, 0, 0);
    CHECKF(open_fails_naming(p2, "overflow.safetensors", "tensor b", msg, sizeof msg), "%s", msg);
    const char *h3 = "{\"c\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}";
    char *p3 = write_raw("neg.safetensors", h3, 0, 0);
    CHECKF(open_fails_naming(p3, "neg.safetensors", "tensor c", msg, sizeof msg), "%s", msg);
    /* Two tensors sharing bytes. */
    const char *h4 = "{\"x\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                     "\"y\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}";
    char *p4 = write_raw("overlap.safetensors", h4, 16, 0);
    CHECKF(open_fails_naming(p4, "overlap.safetensors", "overlap", msg, sizeof msg), "%s", msg);
    free(p);
    free(p2);
    free(p3);
    free(p4);
}

TEST(test_st_rejects_bad_json_and_unknown_dtype) {
    char msg[512];
    char *p = write_raw("badjson.safetensors", "{\"a\":{\"dtype\":\"F32\",", 0, 0);
    CHECKF(open_fails_naming(p, "badjson.safetensors", "JSON", msg, sizeof msg), "%s", msg);
    const char *h = "{\"model.norm.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}";
    char *p2 = write_raw("dtype.safetensors", h, 2, 0);
    CHECKF(open_fails_naming(p2, "dtype.safetensors", "tensor model.norm.weight", msg, sizeof msg),
           "%s", msg);
    CHECKF(strstr(msg, "F8_E4M3"), "%s", msg);
    const char *h3 = "{\"__metadata__\":{\"format\":3}}";
    char *p3 = write_raw("meta.safetensors", h3, 0, 0);
    CHECKF(open_fails_naming(p3, "meta.safetensors", "__metadata__", msg, sizeof msg), "%s", msg);
    free(p);
    free(p2);
    free(p3);
}

/* Write a shard with the writer: tensors named in `names`, each [2,3] f32 filled with its index. */
static int write_shard(const char *dir, const char *file, const char *const *names, int n) {
    char *path = xi_path_join(dir, file);
    FILE *f = fopen(path, "wb");
    free(path);
    if (!f) return -1;
    xi_st_spec specs[8];
    for (int i = 0; i < n; i++) specs[i] = (xi_st_spec){names[i], XI_F32, 2, {2, 3}};
    const char *meta[] = {"format", "pt"};
    char err[256];
    int64_t nb = xi_st_write_header(f, specs, n, meta, 1, err, sizeof err);
    for (int i = 0; nb >= 0 && i < n; i++)
        for (int k = 0; k < 6; k++) {
            float v = (float)(i * 10 + k);
            fwrite(&v, 4, 1, f);
        }
    fclose(f);
    return nb == 6 * 4 * n ? 0 : -1;
}

static void write_text(const char *dir, const char *file, const char *text) {
    char *path = xi_path_join(dir, file);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    free(path);
}

TEST(test_st_opens_two_shard_index_each_shard_once) {
    const char *dir = xi_test_tmpdir();
    const char *a[] = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"};
    const char *b[] = {"model.norm.weight", "lm_head.weight", "model.layers.0.mlp.down_proj.weight"};
    CHECK(write_shard(dir, "model-00001-of-00002.safetensors", a, 2) == 0);
    CHECK(write_shard(dir, "model-00002-of-00002.safetensors", b, 3) == 0);
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{\"total_size\":120},\"weight_map\":{"
               "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
               "\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
               "\"model.layers.0.mlp.up_proj.weight\":\"model-00001-of-00002.safetensors\","
               "\"lm_head.weight\":\"model-00002-of-00002.safetensors\","
               "\"model.layers.0.mlp.down_proj.weight\":\"model-00002-of-00002.safetensors\"}}");
    char err[512] = "";
    xi_st_set *s = xi_st_open_dir(dir, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(xi_st_count(s), 5); /* a shard opened twice would give duplicates and fail */
    const xi_st_tensor *t = xi_st_find(s, "lm_head.weight");
    CHECK(t && strstr(t->file, "model-00002-of-00002.safetensors"));
    float v[6];
    memcpy(v, t->data, sizeof v);
    CHECK_NEAR(v[0], 10, 0);
    CHECK_NEAR(v[5], 15, 0);
    t = xi_st_find(s, "model.layers.0.mlp.up_proj.weight");
    CHECK(t && strstr(t->file, "model-00001-of-00002.safetensors"));
    CHECK_EQ(t->shape[1], 3);
    CHECK_STR(xi_st_metadata(s, "format"), "pt");
    xi_st_close(s);
}

TEST(test_st_index_to_missing_shard_or_tensor_names_both) {
    const char *dir = xi_test_tmpdir();
    const char *a[] = {"model.embed_tokens.weight"};
    CHECK(write_shard(dir, "model-00001-of-00002.safetensors", a, 1) == 0);
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{"
               "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
               "\"model.norm.weight\":\"model-00002-of-00002.safetensors\"}}");
    char err[512] = "";
    xi_st_set *s = xi_st_open_dir(dir, err, sizeof err);
    CHECK(!s);
    CHECKF(strstr(err, "model-00002-of-00002.safetensors") && strstr(err, "model.norm.weight"), "%s",
           err);
    /* The shard exists but lacks a tensor the index puts there. */
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{"
               "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
               "\"model.layers.0.self_attn.q_proj.weight\":\"model-00001-of-00002.safetensors\"}}");
    err[0] = 0;
    s = xi_st_open_dir(dir, err, sizeof err);
    CHECK(!s);
    CHECKF(strstr(err, "model-00001-of-00002.safetensors") &&
               strstr(err, "model.layers.0.self_attn.q_proj.weight"), "%s", err);
    /* An index may not reach outside its folder. */
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"../model-00001-of-00002.safetensors\"}}");
    s = xi_st_open_dir(dir, err, sizeof err);
    CHECK(!s);
    CHECKF(strstr(err, "bad shard name"), "%s", err);
}

TEST(test_st_open_dir_without_weights_fails_naming_dir) {
    char err[512] = "";
    const char *dir = xi_test_tmpdir();
    CHECK(!xi_st_open_dir(dir, err, sizeof err));
    CHECKF(strstr(err, dir), "%s", err);
    CHECK(!xi_st_open_file("/nonexistent/x.safetensors", err, sizeof err));
    CHECKF(strstr(err, "/nonexistent/x.safetensors"), "%s", err);
}

TEST(test_st_same_tensor_in_two_files_is_an_error) {
    /* No index and no model.safetensors: every *.safetensors is read, and a name may not repeat. */
    const char *dir = xi_test_tmpdir();
    const char *a[] = {"model.norm.weight", "model.embed_tokens.weight"};
    const char *b[] = {"lm_head.weight", "model.norm.weight"};
    CHECK(write_shard(dir, "a.safetensors", a, 2) == 0);
    CHECK(write_shard(dir, "b.safetensors", b, 2) == 0);
    char err[512] = "";
    CHECK(!xi_st_open_dir(dir, err, sizeof err));
    CHECKF(strstr(err, "model.norm.weight") && strstr(err, "a.safetensors") && strstr(err, "b.safetensors"),
           "%s", err);
    /* Without the clash both files open as one set, in name order of the files. */
    const char *c[] = {"lm_head.weight"};
    CHECK(write_shard(dir, "b.safetensors", c, 1) == 0);
    xi_st_set *s = xi_st_open_dir(dir, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(xi_st_count(s), 3);
    CHECK(strstr(xi_st_at(s, 0)->file, "a.safetensors"));
    CHECK(strstr(xi_st_at(s, 2)->file, "b.safetensors"));
    xi_st_close(s);
}

TEST(test_st_mutated_headers_fail_cleanly_or_stay_in_bounds) {
    /* A small valid file, then 400 deterministic corruptions of its header bytes and length
     * prefix: each open either fails with a one-line message or yields tensors that lie inside
     * the file (every byte is touched, so a bad pointer crashes the test). */
    const char *dir = xi_test_tmpdir();
    const char *names[] = {"a", "bb", "model.layers.0.mlp.up_proj.weight", "d"};
    CHECK(write_shard(dir, "orig.safetensors", names, 4) == 0);
    char *orig = xi_path_join(dir, "orig.safetensors"), *mut = xi_path_join(dir, "mut.safetensors");
    size_t len = 0;
    char *bytes = xi_read_file(orig, &len, NULL, 0);
    CHECK(bytes && len > 16);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (uint8_t)bytes[i];
    uint64_t rng = 0x1234567;
    const char alphabet[] = "0123456789[]{},:\"-eE.FIUB ";
    int opened = 0, failed = 0;
    unsigned checksum = 0;
    for (int iter = 0; iter < 400; iter++) {
        char *m = malloc(len);
        memcpy(m, bytes, len);
        size_t mlen = len;
        for (int k = 0; k < 1 + iter % 3; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = rng >> 17;
            if (iter % 50 == 49) mlen = (size_t)(r % len);                    /* truncate */
            else if (iter % 10 == 3) m[r % 8] = (char)(r >> 20);              /* length prefix */
            else m[8 + r % hlen] = alphabet[(r >> 24) % (sizeof alphabet - 1)]; /* header text */
        }
        FILE *f = fopen(mut, "wb");
        CHECK(f);
        fwrite(m, 1, mlen, f);
        fclose(f);
        free(m);
        char err[512] = "";
        xi_st_set *s = xi_st_open_file(mut, err, sizeof err);
        if (!s) {
            CHECKF(strstr(err, "mut.safetensors") && !strchr(err, '\n'), "iter %d: %s", iter, err);
            failed++;
            continue;
        }
        opened++;
        size_t total = 0;
        unsigned sum = 0;
        for (int i = 0; i < xi_st_count(s); i++) {
            const xi_st_tensor *t = xi_st_at(s, i);
            total += t->nbytes;
            for (size_t b = 0; b < t->nbytes; b++) sum += ((const uint8_t *)t->data)[b];
        }
        CHECKF(total <= mlen, "iter %d: %zu tensor bytes in a %zu-byte file", iter, total, mlen);
        checksum += sum; /* printed below, which keeps the reads */
        xi_st_close(s);
    }
    CHECK(failed > 100); /* the corruptions really corrupt */
    free(bytes);
    free(orig);
    free(mut);
    fprintf(stderr, "    %d opened, %d rejected (data checksum %u)\n", opened, failed, checksum);
}

/* ---- xinfer inspect, through the binary ---- */

static json_t *inspect_json(const char *dir, int *rc) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect '%s' --json 2>/dev/null", xi_test_bin(), dir);
    char *out = NULL;
    *rc = xi_test_run(cmd, &out);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return j;
}

TEST(test_inspect_stories260k_counts_params_dtypes_and_tensors) {
    int rc = -1;
    json_t *j = inspect_json(xi_test_data("models/stories260K"), &rc);
    CHECK_EQ(rc, 0);
    CHECK(j);
    CHECK_STR(json_string_value(json_object_get(j, "architecture")), "LlamaForCausalLM");
    /* 512x64 embeddings + 5 x (2x64 norms + 2x64x64 + 2x32x64 + 3x172x64) + 64. */
    CHECK_EQ(json_integer_value(json_object_get(j, "parameters")), 260032);
    CHECK_EQ(json_integer_value(json_object_get(j, "total_bytes")), 260032 * 4);
    json_t *f32 = json_object_get(json_object_get(j, "dtypes"), "f32");
    CHECK_EQ(json_integer_value(json_object_get(f32, "tensors")), 47);
    CHECK_EQ(json_object_size(json_object_get(j, "dtypes")), 1);
    json_t *ts = json_object_get(j, "tensors");
    CHECK_EQ(json_array_size(ts), 47);
    json_t *t0 = json_array_get(ts, 0);
    CHECK_STR(json_string_value(json_object_get(t0, "name")), "model.embed_tokens.weight");
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(t0, "shape"), 0)), 512);
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(t0, "shape"), 1)), 64);
    json_decref(j);

    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect '%s' 2>&1", xi_test_bin(), xi_test_data("models/stories260K"));
    char *out = NULL;
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    CHECKF(out && strstr(out, "LlamaForCausalLM") && strstr(out, "260032") &&
               strstr(out, "model.layers.4.mlp.down_proj.weight") && strstr(out, "[64, 172]"),
           "%s", out ? out : "");
    free(out);
}

TEST(test_inspect_awq_counts_packed_weights_not_scales) {
    int rc = -1;
    json_t *j = inspect_json(xi_test_data("models/stories260K-awq"), &rc);
    CHECK_EQ(rc, 0);
    CHECK(j);
    /* As stories260K with the MLP padded to 192: qweight int32s count 8 weights, scales none. */
    CHECK_EQ(json_integer_value(json_object_get(j, "parameters")), 32768 + 5 * (128 + 8192 + 4096 + 36864) + 64);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(json_object_get(j, "dtypes"), "i32"), "tensors")),
             5 * 7 * 2);
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "quantization"), "method")), "awq");
    json_decref(j);
}

TEST(test_inspect_truncated_weights_exit_1_naming_file_and_tensor) {
    const char *dir = xi_test_tmpdir();
    char *src = xi_test_data("models/stories260K");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/' && head -c 500000 '%s/model.safetensors' > '%s/model.safetensors'",
             src, dir, src, dir);
    CHECK_EQ(xi_test_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "%s inspect '%s' 2>&1 >/dev/null", xi_test_bin(), dir);
    char *err = NULL;
    CHECK_EQ(xi_test_run(cmd, &err), 1);
    CHECK(err);
    CHECKF(strstr(err, "model.safetensors: tensor ") && strstr(err, "exceed data size"), "%s", err);
    char *nl = strchr(err, '\n');
    CHECKF(nl && nl[1] == 0, "not one line: %s", err); /* exactly one line */
    free(err);
    /* A path that is neither a folder nor a hub name fails the same way, naming it. */
    snprintf(cmd, sizeof cmd, "%s inspect '%s/nope' 2>&1 >/dev/null", xi_test_bin(), dir);
    CHECK_EQ(xi_test_run(cmd, &err), 1);
    CHECKF(err && strstr(err, "/nope: no such model folder"), "%s", err ? err : "");
    free(err);
    /* A folder without config.json names the file it misses. */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/empty' && %s inspect '%s/empty' 2>&1 >/dev/null", dir,
             xi_test_bin(), dir);
    CHECK_EQ(xi_test_run(cmd, &err), 1);
    CHECKF(err && strstr(err, "empty/config.json"), "%s", err ? err : "");
    free(err);
}

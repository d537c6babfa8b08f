/* Fuzz the GGUF reader. The input is a whole .gguf file. Every tensor the reader accepts must
 * lie inside the file (its first and last byte are touched), every metadata string and array
 * element must be readable, and a rejected file must come back with one error line. The
 * tokenizer in the metadata must load or fail with a message. */
#include "fuzz_util.h"
#include "model/gguf.h"
#include "tokenizer/tokenizer_gguf.h"

static volatile uint8_t sink;

static void walk(const xi_gguf *g) {
    for (int i = 0; i < xi_gguf_kv_count(g); i++) {
        const xi_gguf_kv *kv = xi_gguf_kv_at(g, i);
        if (!kv || !kv->key) fuzz_fail("kv %d missing", i);
        if (xi_gguf_find_kv(g, kv->key) != kv) fuzz_fail("key %s not found", kv->key);
        if (kv->type == XI_GGUF_STR && !kv->str) fuzz_fail("string %s without a copy", kv->key);
        if (kv->type != XI_GGUF_ARR) continue;
        for (uint64_t k = 0; k < kv->n; k++) {
            if (kv->arr_type == XI_GGUF_STR) {
                uint64_t len;
                const char *s = xi_gguf_arr_str(kv, k, &len);
                if (!s) fuzz_fail("%s[%llu] unreadable", kv->key, (unsigned long long)k);
                if (len) sink ^= (uint8_t)(s[0] ^ s[len - 1]);
            } else {
                sink ^= (uint8_t)xi_gguf_arr_i64(kv, k);
            }
        }
    }
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
        const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
        if (!t || !t->name || !t->type) fuzz_fail("tensor %d incomplete", i);
        if (xi_gguf_find_tensor(g, t->name) != t) fuzz_fail("tensor %s not found", t->name);
        if (t->nbytes) {
            const uint8_t *d = t->data;
            sink ^= d[0];
            sink ^= d[t->nbytes - 1];
        }
        /* Dequantize the first row of a computable type: its bytes are inside the tensor. */
        if (xi_qtype_supported(t->type) && t->nbytes && t->ne[0] <= 4096) {
            float row[4096];
            xi_qtype_dequant_row(t->type, t->data, row, t->ne[0]);
            sink ^= (uint8_t)(row[0] != row[0]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512], err[256];
    fuzz_write("model.gguf", data, size);
    fuzz_path("model.gguf", path, sizeof path);
    err[0] = 0;
    xi_gguf *g = xi_gguf_open(path, err, sizeof err);
    if (!g) {
        if (!err[0] || strchr(err, '\n')) fuzz_fail("open failed without one error line");
        return 0;
    }
    walk(g);
    /* The tokenizer in the metadata loads or fails with a message, and encodes when loaded. */
    err[0] = 0;
    xi_tokenizer *t = xi_tokenizer_load_gguf(g, err, sizeof err);
    if (!t && !err[0]) fuzz_fail("tokenizer failed without an error");
    if (t) {
        int32_t *ids = NULL;
        int n = xi_tokenizer_encode(t, "Hello world <s> 123", 19, 1, 1, &ids, err, sizeof err);
        char *text = n > 0 ? xi_tokenizer_decode(t, ids, n, 0, NULL, err, sizeof err) : NULL;
        free(text);
        free(ids);
        xi_tokenizer_free(t);
    }
    xi_gguf_close(g);
    return 0;
}

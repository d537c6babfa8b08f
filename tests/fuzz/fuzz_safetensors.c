/* Fuzz the safetensors reader. The input is a whole .safetensors file, or, when it starts
 * with '{', a header JSON NUL data bytes, written with the matching 8-byte length so that
 * mutations reach the header checks rather than the length check. Every tensor the reader
 * accepts must lie inside the file, so touching its first and last byte is safe; a rejected
 * file must come back with an error line. */
#include "fuzz_util.h"
#include "model/safetensors.h"

static volatile uint8_t sink;

static void walk(const xi_st_set *s) {
    int n = xi_st_count(s);
    for (int i = 0; i < n; i++) {
        const xi_st_tensor *t = xi_st_at(s, i);
        if (!t || !t->name || !t->file) fuzz_fail("tensor %d missing", i);
        if (t->n_dims < 0 || t->n_dims > XI_ST_MAX_DIMS) fuzz_fail("n_dims %d", t->n_dims);
        if (t->nbytes) {
            const uint8_t *d = t->data;
            sink ^= d[0];
            sink ^= d[t->nbytes - 1];
        }
        if (xi_st_find(s, t->name) == NULL) fuzz_fail("tensor %s not found by name", t->name);
    }
    (void)xi_st_find(s, "");
    (void)xi_st_metadata(s, "format");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512], err[256];
    if (size && data[0] == '{') {
        const uint8_t *nul = memchr(data, 0, size);
        uint64_t hlen = nul ? (uint64_t)(nul - data) : size;
        size_t dlen = nul ? size - hlen - 1 : 0;
        uint8_t *file = malloc(8 + size);
        for (int i = 0; i < 8; i++) file[i] = (uint8_t)(hlen >> (8 * i)); /* little endian */
        memcpy(file + 8, data, hlen);
        if (dlen) memcpy(file + 8 + hlen, nul + 1, dlen);
        fuzz_write("model.safetensors", file, 8 + hlen + dlen);
        free(file);
    } else {
        fuzz_write("model.safetensors", data, size);
    }
    fuzz_path("model.safetensors", path, sizeof path);
    err[0] = 0;
    xi_st_set *s = xi_st_open_file(path, err, sizeof err);
    if (!s) {
        if (!err[0]) fuzz_fail("open failed without an error line");
        return 0;
    }
    walk(s);
    xi_st_close(s);
    /* The folder path (no index: model.safetensors) must agree with the file path. */
    err[0] = 0;
    s = xi_st_open_dir(fuzz_dir(), err, sizeof err);
    if (!s) fuzz_fail("open_dir rejected what open_file accepted: %s", err);
    walk(s);
    xi_st_close(s);
    return 0;
}

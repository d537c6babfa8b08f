/* Fuzz the sharded safetensors path: the input is model.safetensors.index.json, next to two
 * valid shards (a.safetensors: "x" F32 [2,3]; b.safetensors: "y" BF16 [4]) written once. */
#include "fuzz_util.h"
#include "model/safetensors.h"

static volatile uint8_t sink;

static void write_shard(const char *name, const xi_st_spec *sp) {
    char path[512], err[256];
    FILE *f = fopen(fuzz_path(name, path, sizeof path), "wb");
    if (!f) abort();
    int64_t nb = xi_st_write_header(f, sp, 1, NULL, 0, err, sizeof err);
    if (nb < 0) fuzz_fail("write_header: %s", err);
    for (int64_t i = 0; i < nb; i++) fputc((int)(i & 0x7f), f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    xi_st_spec a = {.name = "x", .dtype = XI_F32, .n_dims = 2, .shape = {2, 3}};
    xi_st_spec b = {.name = "y", .dtype = XI_BF16, .n_dims = 1, .shape = {4}};
    write_shard("a.safetensors", &a);
    write_shard("b.safetensors", &b);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    fuzz_write("model.safetensors.index.json", data, size);
    err[0] = 0;
    xi_st_set *s = xi_st_open_dir(fuzz_dir(), err, sizeof err);
    if (!s) {
        if (!err[0]) fuzz_fail("open_dir failed without an error line");
        return 0;
    }
    for (int i = 0; i < xi_st_count(s); i++) {
        const xi_st_tensor *t = xi_st_at(s, i);
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[t->nbytes - 1];
        if (xi_st_find(s, t->name) != t) fuzz_fail("find(%s) is another tensor", t->name);
    }
    (void)xi_st_metadata(s, "total_size");
    xi_st_close(s);
    return 0;
}

/* Fuzz model loading (config + weights checked against each other) around a real model,
 * stories260K. Input byte 0: bit 0 picks what is fuzzed, bits 1-2 the load options.
 *   bit 0 = 0: the rest is config.json, next to the real model.safetensors;
 *   bit 0 = 1: the rest is the safetensors header JSON, written with its 8-byte length in
 *              front of the real file's data section, next to the real config.json.
 * A model either loads or the error names what was wrong; nothing may crash or leak. */
#include "base/base.h"
#include "fuzz_util.h"
#include "model/model.h"

static uint8_t *real_file;    /* the real model.safetensors; owned */
static size_t real_file_len;
static const uint8_t *real_data; /* its data section, inside real_file */
static size_t real_data_len;
static char *real_config;     /* real config.json text; owned */
static size_t real_config_len;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[512], err[256];
    fuzz_data_path("models/stories260K/config.json", path, sizeof path);
    real_config = xi_read_file(path, &real_config_len, err, sizeof err);
    if (!real_config) fuzz_fail("%s (set XINFER_TEST_DATA)", err);
    fuzz_data_path("models/stories260K/model.safetensors", path, sizeof path);
    real_file = (uint8_t *)xi_read_file(path, &real_file_len, err, sizeof err);
    if (!real_file || real_file_len < 8) fuzz_fail("%s", real_file ? "model too short" : err);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | real_file[i];
    if (hlen > real_file_len - 8) fuzz_fail("bad header length in %s", path);
    real_data = real_file + 8 + hlen;
    real_data_len = real_file_len - 8 - hlen;
    return 0;
}

static void write_safetensors(const uint8_t *header, size_t hlen, const uint8_t *d, size_t dlen) {
    uint8_t *file = malloc(8 + hlen + dlen);
    for (int i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(file + 8, header, hlen);
    memcpy(file + 8 + hlen, d, dlen);
    fuzz_write("model.safetensors", file, 8 + hlen + dlen);
    free(file);
}

static int real_weights_written;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) return 0;
    if (data[0] & 1) {
        fuzz_write("config.json", real_config, real_config_len);
        write_safetensors(data + 1, size - 1, real_data, real_data_len);
        real_weights_written = 0;
    } else {
        fuzz_write("config.json", data + 1, size - 1);
        if (!real_weights_written) { /* put the real file back; it stays while configs vary */
            fuzz_write("model.safetensors", real_file, real_file_len);
            real_weights_written = 1;
        }
    }
    static const char *const quant[] = {"auto", "none", "int8", "awq"};
    xi_model_params p = {
        .dir = fuzz_dir(),
        .dtype = "auto",
        .quantization = quant[(data[0] >> 1) & 3],
        .load_format = (data[0] >> 3) & 1 ? "mmap" : "auto",
        .n_threads = 1,
    };
    char err[256] = "";
    xi_model *m = xi_model_load(&p, err, sizeof err);
    if (m) {
        const xi_config *c = xi_model_config(m);
        if (c->vocab_size <= 0 || c->n_layers <= 0) fuzz_fail("loaded a model with no shape");
        (void)xi_model_weight_bytes(m);
        (void)xi_kv_block_bytes(c, 16, XI_F32);
        xi_model_free(m);
    } else if (!err[0]) {
        fuzz_fail("load failed without an error line");
    }
    return 0;
}

/* cli/inspect: `xinfer inspect MODEL_DIR [--json]` prints what a model folder holds:
 * architecture, parameter count, bytes per dtype and the tensor table. It opens the folder
 * with the same validating reader the engine uses, so a folder that inspects cleanly has
 * well-formed weights, and a broken one fails with the same one-line error. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "hub/hub.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "tensor/dtype.h"

typedef struct inspect_totals {
    uint64_t params;                    /* logical weights: an AWQ qweight int32 holds 8 */
    uint64_t bytes;                     /* every tensor's bytes */
    uint64_t expert_params, expert_bytes; /* of which MoE experts' (".mlp.experts.") */
    int count[XI_DTYPE_COUNT];
    uint64_t dtype_bytes[XI_DTYPE_COUNT];
    int n_files;
} inspect_totals;

static uint64_t numel(const xi_st_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= (uint64_t)t->shape[d];
    return n;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* AWQ's qzeros and scales are quantization metadata, not parameters of the model. */
static uint64_t tensor_params(const xi_st_tensor *t) {
    if (ends_with(t->name, ".qweight")) return numel(t) * 8;
    if (ends_with(t->name, ".qzeros") || ends_with(t->name, ".scales")) return 0;
    return numel(t);
}

static void totals_compute(const xi_st_set *s, inspect_totals *tt) {
    memset(tt, 0, sizeof *tt);
    const char *last_file = NULL;
    for (int i = 0; i < xi_st_count(s); i++) {
        const xi_st_tensor *t = xi_st_at(s, i);
        tt->params += tensor_params(t);
        tt->bytes += t->nbytes;
        if (strstr(t->name, ".mlp.experts.")) {
            tt->expert_params += tensor_params(t);
            tt->expert_bytes += t->nbytes;
        }
        tt->count[t->dtype]++;
        tt->dtype_bytes[t->dtype] += t->nbytes;
        /* xi_st_at walks file by file, so a new file pointer starts a new file. */
        if (t->file != last_file) tt->n_files++, last_file = t->file;
    }
}

static void shape_str(const xi_st_tensor *t, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

static const char *torch_name(xi_dtype t) {
    return t == XI_BF16 ? "bfloat16" : t == XI_F16 ? "float16" : "float32";
}

/* What one token reads: every tensor but the experts it is not routed to (k of E). */
static double active_share(const xi_config *c) {
    return c->n_experts ? (double)c->n_experts_per_tok / c->n_experts : 1.0;
}

static uint64_t active_params(const xi_config *c, const inspect_totals *tt) {
    return tt->params - (uint64_t)((double)tt->expert_params * (1.0 - active_share(c)));
}

static uint64_t active_bytes(const xi_config *c, const inspect_totals *tt) {
    return tt->bytes - (uint64_t)((double)tt->expert_bytes * (1.0 - active_share(c)));
}

static int moe_layers(const xi_config *c) {
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) n += c->layer[l].mlp == XI_MLP_MOE;
    return n;
}

static void print_text(const char *dir, const xi_config *c, const xi_st_set *s, const inspect_totals *tt) {
    printf("model         %s\n", dir);
    printf("architecture  %s: hidden %d, intermediate %d, layers %d, heads %d (kv %d, head_dim %d), "
           "vocab %d%s\n",
           c->architecture, c->hidden_size, c->intermediate_size, c->n_layers, c->n_heads, c->n_kv_heads,
           c->head_dim, c->vocab_size, c->tie_word_embeddings ? ", tied embeddings" : "");
    printf("rope          theta %g, max positions %d%s\n", c->rope_theta, c->max_position_embeddings,
           c->rope_type == XI_ROPE_LLAMA3 ? ", llama3 scaling"
           : c->rope_type == XI_ROPE_YARN ? ", yarn scaling"
           : c->rope_type == XI_ROPE_LINEAR ? ", linear scaling" : "");
    printf("torch_dtype   %s\n", torch_name(c->torch_dtype));
    if (c->quant_awq)
        printf("quantization  awq int%d, group %d%s\n", c->quant_bits, c->quant_group_size,
               c->quant_zero_point ? ", zero point" : "");
    double p = (double)tt->params;
    printf("parameters    %llu (%.2f %s)\n", (unsigned long long)tt->params,
           p >= 1e9 ? p / 1e9 : p >= 1e6 ? p / 1e6 : p / 1e3, p >= 1e9 ? "B" : p >= 1e6 ? "M" : "K");
    if (c->n_experts)
        printf("experts       %d per MoE layer (%d of %d layers, moe_intermediate %d), %d per token: "
               "%llu active parameters (%.2f%%), %.1f MiB read per token\n",
               c->n_experts, moe_layers(c), c->n_layers, c->moe_intermediate_size, c->n_experts_per_tok,
               (unsigned long long)active_params(c, tt), 100.0 * (double)active_params(c, tt) / p,
               active_bytes(c, tt) / 1048576.0);
    printf("weights       %.1f MiB in %d file%s, %d tensors\n\n", tt->bytes / 1048576.0, tt->n_files,
           tt->n_files == 1 ? "" : "s", xi_st_count(s));
    printf("%-8s %8s %16s %12s\n", "dtype", "tensors", "bytes", "MiB");
    for (int d = 0; d < XI_DTYPE_COUNT; d++)
        if (tt->count[d])
            printf("%-8s %8d %16llu %12.2f\n", xi_dtype_name((xi_dtype)d), tt->count[d],
                   (unsigned long long)tt->dtype_bytes[d], tt->dtype_bytes[d] / 1048576.0);
    printf("%-8s %8d %16llu %12.2f\n\n", "total", xi_st_count(s), (unsigned long long)tt->bytes,
           tt->bytes / 1048576.0);
    printf("%-56s %-6s %-18s %10s\n", "tensor", "dtype", "shape", "MiB");
    for (int i = 0; i < xi_st_count(s); i++) {
        const xi_st_tensor *t = xi_st_at(s, i);
        char shape[160];
        shape_str(t, shape, sizeof shape);
        printf("%-56s %-6s %-18s %10.3f\n", t->name, xi_dtype_name(t->dtype), shape, t->nbytes / 1048576.0);
    }
}

static int print_json(const char *dir, const xi_config *c, const xi_st_set *s, const inspect_totals *tt) {
    json_t *dtypes = json_object(), *tensors = json_array();
    for (int d = 0; d < XI_DTYPE_COUNT; d++)
        if (tt->count[d])
            json_object_set_new(dtypes, xi_dtype_name((xi_dtype)d),
                                json_pack("{s:i, s:I}", "tensors", tt->count[d], "bytes",
                                          (json_int_t)tt->dtype_bytes[d]));
    for (int i = 0; i < xi_st_count(s); i++) {
        const xi_st_tensor *t = xi_st_at(s, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        const char *base = strrchr(t->file, '/');
        json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I, s:s}", "name", t->name, "dtype",
                                                 xi_dtype_name(t->dtype), "shape", shape, "bytes",
                                                 (json_int_t)t->nbytes, "file", base ? base + 1 : t->file));
    }
    json_t *root = json_pack(
        "{s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:i, s:s}, s:I, s:I, s:i, s:o, s:o}",
        "model", dir, "architecture", c->architecture, "config", "hidden_size", c->hidden_size,
        "intermediate_size", c->intermediate_size, "num_hidden_layers", c->n_layers,
        "num_attention_heads", c->n_heads, "num_key_value_heads", c->n_kv_heads, "head_dim", c->head_dim,
        "vocab_size", c->vocab_size, "tie_word_embeddings", c->tie_word_embeddings, "rope_theta",
        c->rope_theta, "max_position_embeddings", c->max_position_embeddings, "torch_dtype",
        torch_name(c->torch_dtype), "parameters", (json_int_t)tt->params, "total_bytes",
        (json_int_t)tt->bytes, "files", tt->n_files, "dtypes", dtypes, "tensors", tensors);
    if (!root) return -1;
    if (c->n_experts)
        json_object_set_new(root, "moe",
                            json_pack("{s:i, s:i, s:i, s:i, s:I, s:I}", "num_experts", c->n_experts,
                                      "num_experts_per_tok", c->n_experts_per_tok, "moe_layers",
                                      moe_layers(c), "moe_intermediate_size", c->moe_intermediate_size,
                                      "active_parameters", (json_int_t)active_params(c, tt),
                                      "active_bytes", (json_int_t)active_bytes(c, tt)));
    if (c->quant_awq)
        json_object_set_new(root, "quantization",
                            json_pack("{s:s, s:i, s:i, s:b}", "method", "awq", "bits", c->quant_bits,
                                      "group_size", c->quant_group_size, "zero_point", c->quant_zero_point));
    int rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    printf("\n");
    json_decref(root);
    return rc;
}

int cmd_inspect(int argc, char **argv) {
    const char *dir = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: xinfer inspect MODEL_DIR|FILE.gguf [--json]\n"
                   "Print a model folder's architecture, parameter count, bytes per dtype and tensors;\n"
                   "for a GGUF file its metadata and each tensor's type.\n");
            return 0;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "xinfer inspect: unexpected argument '%s' (usage: xinfer inspect MODEL_DIR [--json])\n",
                    argv[i]);
            return 1;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: xinfer inspect MODEL_DIR [--json]\n");
        return 1;
    }
    char err[1024] = "";
    /* a local folder wins; ORG/NAME[@REV] is pulled into the hub cache on first use */
    char *resolved = xi_hub_resolve(dir, NULL, err, sizeof err);
    if (!resolved) {
        fprintf(stderr, "xinfer inspect: %s\n", err);
        return 1;
    }
    dir = resolved;
    if (xi_hub_is_gguf_path(dir) || xi_gguf_is_file(dir)) { /* an Ollama blob has no .gguf */
        int grc = cmd_inspect_gguf(dir, as_json);
        free(resolved);
        return grc;
    }
    xi_config cfg;
    if (xi_config_load(&cfg, dir, err, sizeof err)) {
        fprintf(stderr, "xinfer inspect: %s\n", err);
        free(resolved);
        return 1;
    }
    xi_st_set *s = xi_st_open_dir(dir, err, sizeof err);
    if (!s) {
        fprintf(stderr, "xinfer inspect: %s\n", err);
        xi_config_free(&cfg);
        free(resolved);
        return 1;
    }
    inspect_totals tt;
    totals_compute(s, &tt);
    int rc = 0;
    if (as_json) rc = print_json(dir, &cfg, s, &tt);
    else print_text(dir, &cfg, s, &tt);
    if (fflush(stdout)) rc = -1;
    xi_st_close(s);
    xi_config_free(&cfg);
    free(resolved);
    return rc ? 1 : 0;
}

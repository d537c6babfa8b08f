/* model/config: read config.json and generation_config.json. Every shape, eps and rope
 * parameter comes from the files; a missing required field or an unsupported choice is a
 * one-line error naming the file and the field. */
#include "model/config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int xi_config_get_int(json_t *o, const char *key, int *out, int required, const char *file,
                      char *err, size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) return xi_errf(err, errlen, "%s: missing \"%s\"", file, key);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return xi_errf(err, errlen, "%s: \"%s\" must be a non-negative integer", file, key);
    if (json_integer_value(v) > (1 << 30))
        return xi_errf(err, errlen, "%s: \"%s\" %lld is out of range (at most 2^30)", file, key,
                       (long long)json_integer_value(v));
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *key, double *out, int required, const char *file,
                   char *err, size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) return xi_errf(err, errlen, "%s: missing \"%s\"", file, key);
        return 0;
    }
    if (!json_is_number(v)) return xi_errf(err, errlen, "%s: \"%s\" must be a number", file, key);
    *out = json_number_value(v);
    return 0;
}

/* eos_token_id is an int or a list of ints; add each once. */
static void add_eos(xi_config *c, json_t *v) {
    if (json_is_integer(v)) {
        int id = (int)json_integer_value(v);
        for (int i = 0; i < c->n_eos; i++)
            if (c->eos_ids[i] == id) return;
        if (c->n_eos < XI_MAX_EOS) c->eos_ids[c->n_eos++] = id;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) add_eos(c, e);
    }
}

static int parse_rope_scaling(xi_config *c, json_t *rs, const char *file, char *err,
                              size_t errlen) {
    c->rope_type = XI_ROPE_NONE;
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs)) return xi_errf(err, errlen, "%s: rope_scaling must be an object", file);
    json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : "";
    double f = 1.0;
    if (get_num(rs, "factor", &f, 0, file, err, errlen)) return -1;
    c->rope_factor = f;
    if (!strcmp(type, "default")) {
        c->rope_type = XI_ROPE_NONE;
    } else if (!strcmp(type, "llama3")) {
        c->rope_type = XI_ROPE_LLAMA3;
        c->rope_low_freq_factor = 1.0;
        c->rope_high_freq_factor = 4.0;
        c->rope_original_max_pos = 8192;
        if (get_num(rs, "low_freq_factor", &c->rope_low_freq_factor, 1, file, err, errlen) ||
            get_num(rs, "high_freq_factor", &c->rope_high_freq_factor, 1, file, err, errlen) ||
            xi_config_get_int(rs, "original_max_position_embeddings", &c->rope_original_max_pos, 1, file,
                    err, errlen))
            return -1;
    } else if (!strcmp(type, "yarn")) {
        c->rope_type = XI_ROPE_YARN;
        c->yarn_beta_fast = 32.0;
        c->yarn_beta_slow = 1.0;
        c->yarn_mscale = 1.0;
        c->yarn_mscale_all_dim = 0.0;
        c->rope_original_max_pos = c->max_position_embeddings;
        if (xi_config_get_int(rs, "original_max_position_embeddings", &c->rope_original_max_pos, 0, file,
                    err, errlen) ||
            get_num(rs, "beta_fast", &c->yarn_beta_fast, 0, file, err, errlen) ||
            get_num(rs, "beta_slow", &c->yarn_beta_slow, 0, file, err, errlen) ||
            get_num(rs, "mscale", &c->yarn_mscale, 0, file, err, errlen) ||
            get_num(rs, "mscale_all_dim", &c->yarn_mscale_all_dim, 0, file, err, errlen))
            return -1;
    } else if (!strcmp(type, "linear")) {
        c->rope_type = XI_ROPE_LINEAR;
    } else {
        return xi_errf(err, errlen,
                       "%s: rope_scaling type \"%s\" is not supported (supported: llama3, yarn, "
                       "linear)",
                       file, type);
    }
    if (!(c->rope_factor > 0)) return xi_errf(err, errlen, "%s: rope_scaling.factor must be > 0", file);
    return 0;
}

static int parse_quant(xi_config *c, json_t *q, const char *file, char *err, size_t errlen) {
    if (!q || json_is_null(q)) return 0;
    json_t *m = json_object_get(q, "quant_method");
    const char *method = json_is_string(m) ? json_string_value(m) : "";
    if (strcmp(method, "awq"))
        return xi_errf(err, errlen,
                       "%s: quantization_config.quant_method \"%s\" is not supported (supported: awq)",
                       file, method);
    c->quant_awq = 1;
    c->quant_bits = 4;
    c->quant_group_size = 128;
    c->quant_zero_point = 1;
    if (xi_config_get_int(q, "bits", &c->quant_bits, 0, file, err, errlen) ||
        xi_config_get_int(q, "group_size", &c->quant_group_size, 0, file, err, errlen))
        return -1;
    json_t *zp = json_object_get(q, "zero_point");
    if (json_is_boolean(zp)) c->quant_zero_point = json_is_true(zp);
    json_t *ver = json_object_get(q, "version");
    const char *v = json_is_string(ver) ? json_string_value(ver) : "gemm";
    if (strcasecmp(v, "gemm"))
        return xi_errf(err, errlen, "%s: AWQ version \"%s\" is not supported (supported: gemm)", file, v);
    if (c->quant_bits != 4)
        return xi_errf(err, errlen, "%s: AWQ with %d bits is not supported (supported: 4)", file,
                       c->quant_bits);
    if (c->quant_group_size <= 0)
        return xi_errf(err, errlen, "%s: AWQ group_size %d is not supported", file, c->quant_group_size);
    json_t *mods = json_object_get(q, "modules_to_not_convert");
    if (json_is_array(mods) && json_array_size(mods)) {
        c->modules_to_not_convert = calloc(json_array_size(mods), sizeof(char *));
        size_t i;
        json_t *e;
        json_array_foreach(mods, i, e) if (json_is_string(e))
            c->modules_to_not_convert[c->n_modules_to_not_convert++] = strdup(json_string_value(e));
    }
    return 0;
}

static int parse_generation_config(xi_config *c, const char *dir, char *err, size_t errlen) {
    char *path = xi_path_join(dir, "generation_config.json");
    if (!xi_file_exists(path)) {
        free(path);
        return 0;
    }
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    if (!g || !json_is_object(g)) {
        xi_errf(err, errlen, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
        json_decref(g);
        free(path);
        return -1;
    }
    double v;
    v = -1; if (!get_num(g, "temperature", &v, 0, path, err, errlen)) c->gen_temperature = (float)v;
    v = -1; if (!get_num(g, "top_p", &v, 0, path, err, errlen)) c->gen_top_p = (float)v;
    v = -1; if (!get_num(g, "min_p", &v, 0, path, err, errlen)) c->gen_min_p = (float)v;
    v = -1; if (!get_num(g, "repetition_penalty", &v, 0, path, err, errlen)) c->gen_repetition_penalty = (float)v;
    int k = -2;
    json_t *tk = json_object_get(g, "top_k");
    if (json_is_integer(tk)) k = (int)json_integer_value(tk);
    c->gen_top_k = k;
    json_t *ds = json_object_get(g, "do_sample");
    if (json_is_false(ds)) c->gen_temperature = 0.0f; /* HF greedy */
    add_eos(c, json_object_get(g, "eos_token_id"));
    json_decref(g);
    free(path);
    return 0;
}

int xi_config_load(xi_config *c, const char *dir, char *err, size_t errlen) {
    char *path = xi_path_join(dir, "config.json");
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    int rc = -1;
    if (!j) {
        memset(c, 0, sizeof *c);
        if (!xi_file_exists(path)) xi_errf(err, errlen, "%s: not found (not a Hugging Face model folder?)", path);
        else xi_errf(err, errlen, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
    } else {
        rc = xi_config_parse(c, j, path, dir, err, errlen);
    }
    json_decref(j);
    free(path);
    return rc;
}

int xi_config_parse(xi_config *c, json_t *j, const char *path, const char *dir, char *err,
                    size_t errlen) {
    memset(c, 0, sizeof *c);
    c->bos_token_id = -1;
    c->gen_temperature = c->gen_top_p = c->gen_min_p = c->gen_repetition_penalty = -1.0f;
    c->gen_top_k = -2;
    int rc = -1;
    if (!json_is_object(j)) {
        xi_errf(err, errlen, "%s: expected a JSON object", path);
        goto out;
    }
    json_t *archs = json_object_get(j, "architectures");
    const char *arch = json_is_array(archs) && json_is_string(json_array_get(archs, 0))
                           ? json_string_value(json_array_get(archs, 0))
                           : NULL;
    if (!arch) {
        xi_errf(err, errlen, "%s: missing \"architectures\"", path);
        goto out;
    }
    snprintf(c->architecture, sizeof c->architecture, "%s", arch);
    c->family = xi_arch_find(arch);
    if (!c->family) {
        char known[512];
        xi_arch_known(known, sizeof known);
        xi_errf(err, errlen, "%s: architecture %s is not supported (supported: %s)", path, arch,
                known);
        goto out;
    }
    double eps = 1e-6, theta = 10000.0;
    if (xi_config_get_int(j, "hidden_size", &c->hidden_size, 1, path, err, errlen) ||
        xi_config_get_int(j, "intermediate_size", &c->intermediate_size, 1, path, err, errlen) ||
        xi_config_get_int(j, "num_hidden_layers", &c->n_layers, 1, path, err, errlen) ||
        xi_config_get_int(j, "num_attention_heads", &c->n_heads, 1, path, err, errlen) ||
        xi_config_get_int(j, "vocab_size", &c->vocab_size, 1, path, err, errlen) ||
        get_num(j, "rms_norm_eps", &eps, 1, path, err, errlen) ||
        get_num(j, "rope_theta", &theta, 0, path, err, errlen))
        goto out;
    c->n_kv_heads = c->n_heads;
    c->max_position_embeddings = 2048;
    if (xi_config_get_int(j, "num_key_value_heads", &c->n_kv_heads, 0, path, err, errlen) ||
        xi_config_get_int(j, "max_position_embeddings", &c->max_position_embeddings, 0, path, err, errlen))
        goto out;
    if (c->n_heads == 0 || c->hidden_size == 0 || c->n_layers == 0 || c->vocab_size == 0 ||
        c->n_kv_heads == 0) {
        xi_errf(err, errlen, "%s: sizes must be positive", path);
        goto out;
    }
    if (c->n_layers > 65536) {
        xi_errf(err, errlen, "%s: num_hidden_layers %d is more than 65536", path, c->n_layers);
        goto out;
    }
    c->head_dim = c->hidden_size / c->n_heads;
    if (xi_config_get_int(j, "head_dim", &c->head_dim, 0, path, err, errlen)) goto out;
    if (c->n_heads % c->n_kv_heads) {
        xi_errf(err, errlen, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                path, c->n_heads, c->n_kv_heads);
        goto out;
    }
    if (c->head_dim <= 0 || c->head_dim % 2) {
        xi_errf(err, errlen, "%s: head_dim %d must be positive and even", path, c->head_dim);
        goto out;
    }
    if (!(theta > 0 && theta < 1e30) || !(eps > 0 && eps < 1)) {
        xi_errf(err, errlen, !(theta > 0 && theta < 1e30) ? "%s: rope_theta %g is out of range (it must be > 0)"
                                                          : "%s: rms_norm_eps %g is out of range (0 < eps < 1)",
                path, !(theta > 0 && theta < 1e30) ? theta : eps);
        goto out;
    }
    c->rms_norm_eps = (float)eps;
    c->rope_theta = theta;
    json_t *hact = json_object_get(j, "hidden_act");
    if (json_is_string(hact) && strcmp(json_string_value(hact), "silu")) {
        xi_errf(err, errlen, "%s: hidden_act \"%s\" is not supported (supported: silu)", path,
                json_string_value(hact));
        goto out;
    }
    json_t *tie = json_object_get(j, "tie_word_embeddings");
    c->tie_word_embeddings = tie ? json_is_true(tie) : 0;
    json_t *mb = json_object_get(j, "mlp_bias");
    if (json_is_true(mb)) {
        xi_errf(err, errlen, "%s: mlp_bias=true is not supported", path);
        goto out;
    }
    json_t *td = json_object_get(j, "torch_dtype");
    if (!td) td = json_object_get(j, "dtype");
    const char *tds = json_is_string(td) ? json_string_value(td) : "float32";
    c->torch_dtype = !strcmp(tds, "bfloat16") ? XI_BF16 : !strcmp(tds, "float16") ? XI_F16 : XI_F32;
    json_t *bos = json_object_get(j, "bos_token_id");
    if (json_is_integer(bos)) c->bos_token_id = (int)json_integer_value(bos);
    add_eos(c, json_object_get(j, "eos_token_id"));
    if (parse_rope_scaling(c, json_object_get(j, "rope_scaling"), path, err, errlen) ||
        parse_quant(c, json_object_get(j, "quantization_config"), path, err, errlen) ||
        (dir && parse_generation_config(c, dir, err, errlen)) ||
        c->family->parse(c, j, path, err, errlen))
        goto out;
    rc = 0;
out:
    if (rc) xi_config_free(c);
    return rc;
}

void xi_config_free(xi_config *c) {
    free(c->layer);
    c->layer = NULL;
    free(c->rope_freq_factors);
    c->rope_freq_factors = NULL;
    for (int i = 0; i < c->n_modules_to_not_convert; i++) free(c->modules_to_not_convert[i]);
    free(c->modules_to_not_convert);
    c->modules_to_not_convert = NULL;
    c->n_modules_to_not_convert = 0;
}

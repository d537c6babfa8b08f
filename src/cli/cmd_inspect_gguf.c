/* cli/inspect for GGUF files: `xinfer inspect FILE.gguf [--json]` prints the metadata (arrays
 * as their type, length and first values), tensors and bytes per type, and every tensor's type
 * and ggml dimensions. The file is opened with the validating reader, so a broken file fails
 * with its one-line error. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "model/gguf.h"

#define ARRAY_HEAD 8 /* array elements shown */

/* A metadata value as JSON: scalars as themselves, arrays as {type, n, head}. */
static json_t *value_json(const xi_gguf_kv *kv) {
    if (kv->type == XI_GGUF_STR) return json_string_nocheck(kv->str);
    if (kv->type != XI_GGUF_ARR) {
        xi_gguf_kv one = *kv; /* read a scalar through the array accessors */
        one.type = XI_GGUF_ARR;
        one.arr_type = kv->type;
        one.n = 1;
        if (kv->type == XI_GGUF_BOOL) return json_boolean(xi_gguf_arr_i64(&one, 0));
        if (kv->type == XI_GGUF_F32 || kv->type == XI_GGUF_F64)
            return json_real(xi_gguf_arr_f64(&one, 0));
        return json_integer(xi_gguf_arr_i64(&one, 0));
    }
    json_t *head = json_array();
    for (uint64_t i = 0; i < kv->n && i < ARRAY_HEAD; i++) {
        if (kv->arr_type == XI_GGUF_STR) {
            uint64_t len;
            const char *s = xi_gguf_arr_str(kv, i, &len);
            json_array_append_new(head, json_stringn_nocheck(s, (size_t)len));
        } else if (kv->arr_type == XI_GGUF_F32 || kv->arr_type == XI_GGUF_F64) {
            json_array_append_new(head, json_real(xi_gguf_arr_f64(kv, i)));
        } else {
            json_array_append_new(head, json_integer(xi_gguf_arr_i64(kv, i)));
        }
    }
    return json_pack("{s:s, s:I, s:o}", "type", xi_gguf_vtype_name(kv->arr_type), "n",
                     (json_int_t)kv->n, "head", head);
}

static void dims_str(const xi_gguf_tensor *t, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

int cmd_inspect_gguf(const char *path, int as_json) {
    char err[1024] = "";
    xi_gguf *g = xi_gguf_open(path, err, sizeof err);
    if (!g) {
        fprintf(stderr, "xinfer inspect: %s\n", err);
        return 1;
    }
    /* Tensors and bytes per type, in ggml id order. */
    int count[XI_GGML_TYPE_MAX] = {0};
    uint64_t bytes[XI_GGML_TYPE_MAX] = {0}, total = 0;
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
        const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
        count[t->type->id]++;
        bytes[t->type->id] += t->nbytes;
        total += t->nbytes;
    }
    int rc = 0;
    if (as_json) {
        json_t *meta = json_object(), *types = json_object(), *tensors = json_array();
        for (int i = 0; i < xi_gguf_kv_count(g); i++)
            json_object_set_new_nocheck(meta, xi_gguf_kv_at(g, i)->key, value_json(xi_gguf_kv_at(g, i)));
        for (int id = 0; id < XI_GGML_TYPE_MAX; id++)
            if (count[id])
                json_object_set_new(types, xi_qtype_get(id)->name,
                                    json_pack("{s:i, s:I, s:b}", "tensors", count[id], "bytes",
                                              (json_int_t)bytes[id], "supported",
                                              xi_qtype_supported(xi_qtype_get(id))));
        for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
            const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
            json_t *ne = json_array();
            for (int d = 0; d < t->n_dims; d++) json_array_append_new(ne, json_integer(t->ne[d]));
            const char *base = strrchr(t->file, '/');
            json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I, s:s}", "name", t->name,
                                                     "type", t->type->name, "ne", ne, "bytes",
                                                     (json_int_t)t->nbytes, "file",
                                                     base ? base + 1 : t->file));
        }
        json_t *root = json_pack("{s:s, s:s, s:i, s:i, s:I, s:o, s:o, s:o}", "model", path,
                                 "format", "gguf", "version", (int)xi_gguf_version(g), "files",
                                 xi_gguf_n_files(g), "total_bytes", (json_int_t)total,
                                 "metadata", meta, "types", types, "tensors", tensors);
        rc = !root || json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("\n");
        json_decref(root);
    } else {
        printf("model         %s\n", path);
        printf("format        GGUF v%u, %d file%s, %d tensors, %.1f MiB\n\n", xi_gguf_version(g),
               xi_gguf_n_files(g), xi_gguf_n_files(g) == 1 ? "" : "s", xi_gguf_tensor_count(g),
               total / 1048576.0);
        for (int i = 0; i < xi_gguf_kv_count(g); i++) {
            const xi_gguf_kv *kv = xi_gguf_kv_at(g, i);
            json_t *v = value_json(kv);
            char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(7)) : NULL;
            size_t n = s ? strlen(s) : 0;
            printf("%-44s %.*s%s\n", kv->key, n > 100 ? 100 : (int)n, s ? s : "?",
                   n > 100 ? " ..." : "");
            free(s);
            json_decref(v);
        }
        printf("\n%-8s %8s %16s %12s\n", "type", "tensors", "bytes", "MiB");
        for (int id = 0; id < XI_GGML_TYPE_MAX; id++)
            if (count[id])
                printf("%-8s %8d %16llu %12.2f%s\n", xi_qtype_get(id)->name, count[id],
                       (unsigned long long)bytes[id], bytes[id] / 1048576.0,
                       xi_qtype_supported(xi_qtype_get(id)) ? "" : "  (not supported)");
        printf("\n%-48s %-7s %-22s %10s\n", "tensor", "type", "ne", "MiB");
        for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
            const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
            char dims[128];
            dims_str(t, dims, sizeof dims);
            printf("%-48s %-7s %-22s %10.3f\n", t->name, t->type->name, dims, t->nbytes / 1048576.0);
        }
    }
    if (fflush(stdout)) rc = 1;
    xi_gguf_close(g);
    return rc ? 1 : 0;
}

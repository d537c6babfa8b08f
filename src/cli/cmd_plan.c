/* cli/plan: `xinfer plan` — which hardware a model needs and how many sequences fit.
 *   xinfer plan --model Qwen2.5-7B --device 910b3            one plan
 *   xinfer plan --model ./Qwen2.5-7B-Instruct-AWQ --recommend rank the catalogue devices
 *   xinfer plan --guidance                                    the seed guidance, recomputed
 * Every number comes from ops/plan (formulas in reference ascend.md §6); ranges are printed
 * as ranges because the device sources disagree. Exit 0, or 1 with one error line. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "hub/hub.h"
#include "model/gguf.h"
#include "ops/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void usage(FILE *f) {
    fprintf(f,
        "usage: xinfer plan --model NAME|DIR [--device KEY] [options]\n"
        "       xinfer plan --model NAME|DIR --recommend\n"
        "       xinfer plan --guidance | --list\n\n"
        "  --model NAME|DIR              a model folder (config.json) or a catalogue name\n"
        "  --device KEY                  catalogue device (see --list); without it: --recommend\n"
        "  --memory-gb N                 memory per device in GiB (needed for kunpeng920; alone\n"
        "                                it plans a custom device)\n"
        "  --bandwidth-gbs N             memory bandwidth per device in GB/s (overrides the table)\n"
        "  --quantization none|awq|int8  default: what the checkpoint holds\n"
        "  --kv-cache-dtype auto|float16|bfloat16|float32|fp8\n"
        "  --max-model-len N             default: max_position_embeddings\n"
        "  --typical-context N           tokens of a typical sequence (default min(2048, max len))\n"
        "  --tensor-parallel-size N      (--tp N) default: the smallest that fits\n"
        "  --gpu-memory-utilization F    fraction of device memory to use (0.9)\n"
        "  --block-size N                KV block (default 128 on Ascend as vllm-ascend, 16 on CPU)\n"
        "  --overhead-gb N               runtime reserve per device (1.5 NPU, 1.0 CPU)\n"
        "  --max-num-seqs N              cap on the batch of the decode estimate (256)\n"
        "  --recommend                   rank the catalogue devices that fit\n"
        "  --guidance                    recompute the seed deployment guidance as a table\n"
        "  --list                        catalogue models and devices\n"
        "  --json                        machine-readable output\n");
}

typedef struct plan_args {
    const char *model, *device;
    xi_plan_params p;
    double memory_gb, bandwidth_gbs;
    int recommend, guidance, list, json;
} plan_args;

static int parse_kv(const char *s, xi_plan_kv *out) {
    static const char *const names[] = {"auto", "float16", "bfloat16", "float32", "fp8"};
    for (int i = 0; i < 5; i++)
        if (!strcasecmp(s, names[i])) return *out = (xi_plan_kv)i, 0;
    if (!strcasecmp(s, "half") || !strcasecmp(s, "fp16")) return *out = XI_KV_F16, 0;
    if (!strcasecmp(s, "fp8_e4m3") || !strcasecmp(s, "fp8_e5m2")) return *out = XI_KV_FP8, 0;
    return -1;
}

static int parse_args(int argc, char **argv, plan_args *a) {
    memset(a, 0, sizeof *a);
    xi_plan_params_default(&a->p);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL, *flag = argv[i];
        long long n;
        int got;
        if (!strcmp(flag, "--recommend")) { a->recommend = 1; continue; }
        if (!strcmp(flag, "--guidance")) { a->guidance = 1; continue; }
        if (!strcmp(flag, "--list")) { a->list = 1; continue; }
        if (!strcmp(flag, "--json")) { a->json = 1; continue; }
        if (flag[0] != '-' && !a->model) { a->model = flag; continue; }
#define VALUE(name) ((got = xi_arg_value(argc, argv, &i, name, &v)) != 0 && (got > 0 || (v = NULL, 1)))
        if (VALUE("--model")) { if (!v) goto bad; a->model = v; }
        else if (VALUE("--device")) { if (!v) goto bad; a->device = v; }
        else if (VALUE("--memory-gb")) { if (!v || xi_parse_float(v, 0.01, 1e6, &a->memory_gb)) goto bad; }
        else if (VALUE("--bandwidth-gbs")) { if (!v || xi_parse_float(v, 0.01, 1e6, &a->bandwidth_gbs)) goto bad; }
        else if (VALUE("--quantization")) {
            if (!v) goto bad;
            if (!strcasecmp(v, "none") || !strcasecmp(v, "auto")) a->p.quant = strcasecmp(v, "none") ? -1 : XI_PQ_NONE;
            else if (!strcasecmp(v, "awq")) a->p.quant = XI_PQ_AWQ;
            else if (!strcasecmp(v, "int8") || !strcasecmp(v, "w8a16")) a->p.quant = XI_PQ_INT8;
            else goto bad;
        } else if (VALUE("--kv-cache-dtype")) { if (!v || parse_kv(v, &a->p.kv_dtype)) goto bad; }
        else if (VALUE("--max-model-len")) { if (!v || xi_parse_int(v, 1, 1 << 24, &n)) goto bad; a->p.max_model_len = (int)n; }
        else if (VALUE("--typical-context")) { if (!v || xi_parse_int(v, 1, 1 << 24, &n)) goto bad; a->p.typical_context = (int)n; }
        else if (VALUE("--tensor-parallel-size") || VALUE("--tp") || VALUE("-tp")) { if (!v || xi_parse_int(v, 1, 64, &n)) goto bad; a->p.tp = (int)n; }
        else if (VALUE("--gpu-memory-utilization")) { if (!v || xi_parse_float(v, 0.01, 1, &a->p.util)) goto bad; }
        else if (VALUE("--block-size")) { if (!v || xi_parse_int(v, 1, 4096, &n)) goto bad; a->p.block_size = (int)n; }
        else if (VALUE("--overhead-gb")) { double g; if (!v || xi_parse_float(v, 0, 1e6, &g)) goto bad; a->p.overhead_bytes = g * GIB; }
        else if (VALUE("--max-num-seqs")) { if (!v || xi_parse_int(v, 1, 1 << 20, &n)) goto bad; a->p.max_num_seqs = (int)n; }
        else {
            fprintf(stderr, "xinfer plan: unknown argument '%s' (see xinfer plan --help)\n", flag);
            return -1;
        }
#undef VALUE
        continue;
    bad:
        fprintf(stderr, "xinfer plan: %s: %s\n", flag, v ? "invalid value" : "needs a value");
        if (v) fprintf(stderr, "  got '%s'\n", v);
        return -1;
    }
    return 0;
}

/* A folder, a catalogue name (ORG/ prefixes and -Instruct suffixes are understood), or an
 * ORG/NAME the catalogue lacks: that one is resolved through the hub cache (pulled on first
 * use), since only its config.json tells its shape. */
static int load_model(const char *spec, xi_plan_model *m) {
    char err[600] = "";
    int rc;
    if (xi_dir_exists(spec) || xi_gguf_is_file(spec)) {
        rc = xi_plan_model_load(spec, m, err, sizeof err);
    } else {
        rc = xi_plan_model_catalog(spec, m, err, sizeof err);
        if (rc && xi_hub_is_repo_name(spec)) {
            char *dir = xi_hub_resolve(spec, NULL, err, sizeof err);
            rc = dir ? xi_plan_model_load(dir, m, err, sizeof err) : -1;
            free(dir);
        }
    }
    if (rc) fprintf(stderr, "xinfer plan: %s\n", err);
    return rc;
}

/* ---- one plan -------------------------------------------------------------------------- */

/* Print and release j. */
static void print_json(json_t *j) {
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) puts(s);
    free(s);
    json_decref(j);
}

static json_t *range(double lo, double hi) {
    return lo > 0 ? json_pack("[f, f]", lo, hi) : json_null();
}

static json_t *plan_json(const xi_plan_model *m, const xi_plan_device *d, const xi_plan *r) {
    json_t *notes = json_array();
    for (int i = 0; i < r->n_notes; i++) json_array_append_new(notes, json_string(r->notes[i]));
    json_t *model = json_pack("{s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:s}", "name", m->name, "source",
                              m->source, "params", (json_int_t)r->w.params, "layers", m->layers, "heads",
                              m->heads, "kv_heads", m->kv_heads, "head_dim", m->head_dim, "vocab", m->vocab,
                              "dtype", m->dtype);
    json_t *dev = json_pack("{s:s, s:s, s:I, s:i, s:o, s:o, s:s}", "key", d->key, "name", d->name,
                            "memory_bytes", (json_int_t)d->mem_bytes, "devices_per_unit", d->devices,
                            "bandwidth_gbs", range(d->bw_lo / 1e9, d->bw_hi / 1e9), "fp16_tflops",
                            range(d->tflops_lo, d->tflops_hi), "source", d->source);
    json_t *w = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "params_linear",
                          (json_int_t)r->w.params_linear, "params_embed_lm_head",
                          (json_int_t)(r->w.params_embed + r->w.params_lm_head), "linear_bytes",
                          (json_int_t)r->w.bytes_linear, "linear_scale_zero_bytes",
                          (json_int_t)r->w.bytes_linear_meta, "embed_lm_head_bytes",
                          (json_int_t)r->w.bytes_embed, "norm_bias_bytes", (json_int_t)r->w.bytes_other,
                          "total_bytes", (json_int_t)r->w.bytes, "per_device_bytes",
                          (json_int_t)r->weights_per_device);
    json_object_set_new(w, "active_params", json_integer((json_int_t)r->w.params_active));
    json_object_set_new(w, "active_bytes", json_integer((json_int_t)r->w.bytes_active));
    json_object_set_new(w, "batch_bytes", json_integer((json_int_t)r->w.bytes_batch));
    json_object_set_new(model, "experts", json_integer(m->experts));
    json_object_set_new(model, "experts_per_tok", json_integer(m->experts_per_tok));
    json_t *kv = json_pack("{s:s, s:I, s:I, s:I, s:I}", "dtype", r->kv_dtype, "bytes_per_token",
                           (json_int_t)r->kv_per_token, "bytes_per_token_per_device",
                           (json_int_t)r->kv_per_token_device, "bytes_per_full_sequence",
                           (json_int_t)r->kv_per_seq_full, "bytes_per_typical_sequence",
                           (json_int_t)r->kv_per_seq_typical);
    json_t *mem = json_pack("{s:I, s:f, s:I, s:I, s:I}", "device_bytes", (json_int_t)r->device_bytes,
                            "utilization", r->util, "usable_bytes", (json_int_t)r->usable_bytes,
                            "overhead_bytes", (json_int_t)r->overhead_bytes, "kv_budget_bytes",
                            (json_int_t)r->kv_budget);
    json_t *dec = json_pack("{s:o, s:i, s:o, s:o, s:o}", "batch1_tok_s", range(r->tok1_lo, r->tok1_hi),
                            "batch", r->batch, "batch_tok_s", range(r->tokn_lo, r->tokn_hi),
                            "batch_tok_s_per_sequence",
                            range(r->tokn_lo / r->batch, r->tokn_hi / r->batch), "compute_ceiling_tok_s",
                            range(r->compute_lo, r->compute_hi));
    return json_pack("{s:o, s:o, s:s, s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:b, s:I, s:I, s:i, s:o, s:o}",
                     "model", model, "device", dev, "quantization", xi_plan_quant_name(r->quant),
                     "max_model_len", r->max_model_len, "typical_context", r->typical_context,
                     "block_size", r->block_size, "tensor_parallel_size", r->tp, "weights", w,
                     "kv_cache", kv, "memory", mem, "fits", r->fits, "max_seqs_full",
                     (json_int_t)r->max_seqs_full, "max_seqs_typical", (json_int_t)r->max_seqs_typical,
                     "min_tp", r->min_tp, "decode", dec, "notes", notes);
}

static void print_range(const char *unit, double lo, double hi) {
    if (lo <= 0) printf("unknown");
    else if (hi - lo < 0.005 * hi) printf("%.1f %s", lo, unit);
    else printf("%.1f-%.1f %s", lo, hi, unit);
}

static void plan_text(const xi_plan_model *m, const xi_plan_device *d, const xi_plan *r) {
    printf("%s (%s): %.2f B parameters, %d layers, %d heads / %d KV heads x %d, %s\n", m->name, m->source,
           (double)r->w.params / 1e9, m->layers, m->heads, m->kv_heads, m->head_dim, m->dtype);
    printf("on %s, tensor parallel %d\n", d->name, r->tp);
    char ckpt[64] = "";
    if (m->quant_method[0])
        snprintf(ckpt, sizeof ckpt, " (checkpoint: %s %d-bit, group %d)", m->quant_method, m->quant_bits,
                 m->quant_group);
    if (m->quant == XI_PQ_GGUF) snprintf(ckpt, sizeof ckpt, " (mostly %s, bytes as stored)", m->gguf_type);
    printf("  quantization %s%s, KV cache %s, max-model-len %d, block size %d, typical context %d\n\n",
           xi_plan_quant_name(r->quant), ckpt, r->kv_dtype, r->max_model_len, r->block_size,
           r->typical_context);
    printf("  weights       %.2f GiB = linear layers %.2f GiB", r->w.bytes / GIB, r->w.bytes_linear / GIB);
    if (r->w.bytes_linear_meta) printf(" (of which scales/zeros %.3f GiB)", r->w.bytes_linear_meta / GIB);
    printf(" + embeddings/lm_head %.2f GiB (%s) + norms/biases %.4f GiB\n", r->w.bytes_embed / GIB,
           m->quant == XI_PQ_GGUF ? "as stored" : "16-bit", r->w.bytes_other / GIB);
    printf("                %.2f GiB per device\n", r->weights_per_device / GIB);
    if (m->experts)
        printf("  experts       %d per MoE layer (%d layers), %d per token: %.2f B active parameters; a "
               "step reads %.2f GiB of weights at batch 1, %.2f GiB at batch %d (expected union of "
               "experts, uniform routing)\n", m->experts, m->moe_layers, m->experts_per_tok,
               (double)r->w.params_active / 1e9, r->w.bytes_active / GIB, r->w.bytes_batch / GIB, r->batch);
    printf("  KV cache      %lld B per token (%lld B per device); per sequence %.3f GiB at %d tokens, "
           "%.1f MiB at %d\n", (long long)r->kv_per_token, (long long)r->kv_per_token_device,
           r->kv_per_seq_full / GIB, r->max_model_len, r->kv_per_seq_typical / (1024.0 * 1024.0),
           r->typical_context);
    printf("  memory        %.2f GiB x %.2f = %.2f GiB - weights %.2f - overhead %.2f = %.2f GiB for KV "
           "per device\n", r->device_bytes / GIB, r->util, r->usable_bytes / GIB,
           r->weights_per_device / GIB, r->overhead_bytes / GIB, r->kv_budget / GIB);
    if (r->fits)
        printf("  concurrency   %lld sequence%s at %d tokens, %lld at %d tokens\n", (long long)r->max_seqs_full,
               r->max_seqs_full == 1 ? "" : "s", r->max_model_len, (long long)r->max_seqs_typical,
               r->typical_context);
    else
        printf("  concurrency   DOES NOT FIT at TP %d: not one %d-token sequence (%lld at %d tokens)\n", r->tp,
               r->max_model_len, (long long)r->max_seqs_typical, r->typical_context);
    if (r->min_tp) printf("  minimum TP    %d\n", r->min_tp);
    else printf("  minimum TP    none up to %d on this device\n", d->max_tp);
    printf("  decode bound  batch 1: ");
    print_range("tok/s", r->tok1_lo, r->tok1_hi);
    if (d->bw_lo) {
        printf(" (bandwidth ");
        print_range("GB/s", d->bw_lo / 1e9, d->bw_hi / 1e9);
        printf(d->bw_hi > d->bw_lo ? ": a range)\n" : ")\n");
        printf("                device figures: %s\n", d->source);
        printf("                batch %d%s: ", r->batch,
               r->max_seqs_typical > r->batch ? " (the --max-num-seqs cap)" : " (all that fit)");
        print_range("tok/s total", r->tokn_lo, r->tokn_hi);
        printf(", ");
        print_range("per sequence", r->tokn_lo / r->batch, r->tokn_hi / r->batch);
        if (r->compute_lo > 0) {
            printf(" (compute ceiling ");
            print_range("tok/s", r->compute_lo, r->compute_hi);
            printf(")");
        }
        printf("\n                upper bounds: expect roughly half in practice\n");
    } else {
        printf("\n");
    }
    for (int i = 0; i < r->n_notes; i++) printf("  note: %s\n", r->notes[i]);
}

/* ---- recommend ------------------------------------------------------------------------- */

typedef struct ranked {
    const xi_plan_device *d;
    xi_plan r;
    int ok; /* fits, and the device runs the weight format natively */
} ranked;

static int rank_cmp(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->ok != y->ok) return y->ok - x->ok;
    if (x->r.tp != y->r.tp) return x->r.tp - y->r.tp;
    return (y->r.tok1_lo > x->r.tok1_lo) - (y->r.tok1_lo < x->r.tok1_lo);
}

static int recommend(const plan_args *a, const xi_plan_model *m, xi_plan_device *cpu) {
    int n = 0;
    ranked *list = xi_calloc((size_t)xi_plan_device_count(), sizeof *list);
    char err[300];
    for (int i = 0; i < xi_plan_device_count(); i++) {
        const xi_plan_device *d = xi_plan_device_at(i);
        if (d->is_cpu) {
            if (strcmp(d->key, "kunpeng920") || !cpu) continue; /* only with --memory-gb */
            d = cpu;
        }
        xi_plan_params p = a->p;
        p.tp = 0;
        list[n].d = d;
        if (xi_plan_compute(m, d, &p, &list[n].r, err, sizeof err) == 0) {
            list[n].ok = list[n].r.fits && (list[n].r.quant != XI_PQ_AWQ || d->w4);
            n++;
        }
    }
    qsort(list, (size_t)n, sizeof *list, rank_cmp);
    if (a->json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) {
            json_t *row = plan_json(m, list[i].d, &list[i].r);
            json_object_set_new(row, "recommended", json_boolean(list[i].ok));
            json_array_append_new(arr, row);
        }
        print_json(json_pack("{s:s, s:o}", "model", m->name, "ranking", arr));
        free(list);
        return 0;
    }
    const xi_plan *r0 = n ? &list[0].r : NULL;
    printf("%s, quantization %s, max-model-len %d, typical context %d: devices ranked by fewest devices "
           "(TP), then batch-1 decode bound\n\n", m->name, r0 ? xi_plan_quant_name(r0->quant) : "-",
           r0 ? r0->max_model_len : 0, r0 ? r0->typical_context : 0);
    printf("  %-4s %-12s %3s %12s %12s %10s %10s  %-22s %s\n", "rank", "device", "TP", "weights/dev",
           "KV/dev", "seqs@max", "seqs@typ", "batch-1 tok/s", "notes");
    int rank = 0;
    for (int i = 0; i < n; i++) {
        const xi_plan *r = &list[i].r;
        char tok[48], rk[16];
        if (r->tok1_lo <= 0) snprintf(tok, sizeof tok, "unknown");
        else if (r->tok1_hi - r->tok1_lo < 0.005 * r->tok1_hi) snprintf(tok, sizeof tok, "%.1f", r->tok1_lo);
        else snprintf(tok, sizeof tok, "%.1f-%.1f", r->tok1_lo, r->tok1_hi);
        if (list[i].ok) snprintf(rk, sizeof rk, "%d", ++rank);
        else snprintf(rk, sizeof rk, "no");
        printf("  %-4s %-12s %3d %8.2f GiB %8.2f GiB %10lld %10lld  %-22s %s\n", rk, list[i].d->key, r->tp,
               r->weights_per_device / GIB, r->kv_budget / GIB, (long long)r->max_seqs_full,
               (long long)r->max_seqs_typical, tok, r->n_notes ? r->notes[0] : "");
    }
    free(list);
    return 0;
}

/* ---- guidance -------------------------------------------------------------------------- */

/* The seed guidance: "7B on one 310P (24 GB) for 1–5 concurrent users, 13B–34B on one 910B
 * (64 GB) for 5–20, 70B on 2–4 910B". Each claim is checked with the models and quantizations
 * a deployment would use; 910B means the common 910B3. */
static const struct {
    const char *claim, *model, *device;
    int quant, tp, users_lo, users_hi;
} guidance_rows[] = {
    {"7B on one 310P (24 GB), 1-5 users", "qwen2.5-7b", "310p-pro", XI_PQ_NONE, 1, 1, 5},
    {"7B on one 310P (24 GB), 1-5 users", "llama-3.1-8b", "310p-pro", XI_PQ_NONE, 1, 1, 5},
    {"7B on one 310P (24 GB), 1-5 users", "qwen2.5-7b", "310p-pro", XI_PQ_INT8, 1, 1, 5},
    {"13B-34B on one 910B (64 GB), 5-20 users", "qwen2.5-14b", "910b3", XI_PQ_NONE, 1, 5, 20},
    {"13B-34B on one 910B (64 GB), 5-20 users", "qwen2.5-32b", "910b3", XI_PQ_NONE, 1, 5, 20},
    {"13B-34B on one 910B (64 GB), 5-20 users", "qwen2.5-32b", "910b3", XI_PQ_INT8, 1, 5, 20},
    {"13B-34B on one 910B (64 GB), 5-20 users", "qwen2.5-32b", "910b3", XI_PQ_AWQ, 1, 5, 20},
    {"70B on 2-4 910B", "llama-3.1-70b", "910b3", XI_PQ_NONE, 2, 1, 1},
    {"70B on 2-4 910B", "llama-3.1-70b", "910b3", XI_PQ_NONE, 4, 1, 1},
    {"70B on 2-4 910B", "qwen2.5-72b", "910b3", XI_PQ_NONE, 4, 1, 1},
    {"70B on 2-4 910B", "llama-3.1-70b", "910b3", XI_PQ_INT8, 2, 1, 1},
    {"70B on 2-4 910B", "llama-3.1-70b", "910b3", XI_PQ_AWQ, 2, 1, 1},
};

static int guidance(const plan_args *a) {
    json_t *arr = json_array();
    if (!a->json)
        printf("Seed guidance recomputed (max-model-len %d, typical context %d, utilization %.2f):\n\n"
               "  %-40s %-14s %-5s %-9s %3s %9s %9s %8s %8s  %-13s %-13s %s\n",
               a->p.max_model_len ? a->p.max_model_len : 32768,
               a->p.typical_context ? a->p.typical_context : 2048, a->p.util, "claim", "model", "quant",
               "device", "TP", "weights", "KV/dev", "seqs@max", "seqs@typ", "batch-1 tok/s",
               "tok/s/user@hi", "verdict");
    for (size_t i = 0; i < XI_ARRAY_LEN(guidance_rows); i++) {
        xi_plan_model m;
        xi_plan r;
        char err[600];
        const xi_plan_device *d = xi_plan_device_find(guidance_rows[i].device, err, sizeof err);
        xi_plan_params p = a->p;
        p.quant = guidance_rows[i].quant;
        p.tp = guidance_rows[i].tp;
        if (!p.max_model_len) p.max_model_len = 32768; /* comparable rows: Llama allows 128K */
        if (!d || xi_plan_model_catalog(guidance_rows[i].model, &m, err, sizeof err) ||
            xi_plan_compute(&m, d, &p, &r, err, sizeof err)) {
            fprintf(stderr, "xinfer plan: %s\n", err);
            json_decref(arr);
            return 1;
        }
        int hi = guidance_rows[i].users_hi, lo = guidance_rows[i].users_lo;
        /* Per-user bound with `hi` users decoding together at the typical context. */
        double step = (double)r.weights_per_device + (double)hi * r.kv_per_token_device * r.typical_context;
        double u_lo = d->bw_lo / step, u_hi = d->bw_hi / step;
        const char *verdict = !r.fits                        ? "disagrees: does not fit"
                              : r.max_seqs_typical >= hi     ? "agrees"
                              : r.max_seqs_typical >= lo     ? "partly: fewer users"
                                                             : "disagrees: too few users";
        if (a->json) {
            json_t *row = plan_json(&m, d, &r);
            json_object_set_new(row, "claim", json_string(guidance_rows[i].claim));
            json_object_set_new(row, "users", json_pack("[i, i]", lo, hi));
            json_object_set_new(row, "tok_s_per_user_at_hi", range(u_lo, u_hi));
            json_object_set_new(row, "verdict", json_string(verdict));
            json_array_append_new(arr, row);
            continue;
        }
        char tok1[32], tokh[32];
        snprintf(tok1, sizeof tok1, "%.0f-%.0f", r.tok1_lo, r.tok1_hi);
        snprintf(tokh, sizeof tokh, "%.0f-%.0f", u_lo, u_hi);
        if (r.tok1_hi - r.tok1_lo < 0.005 * r.tok1_hi) snprintf(tok1, sizeof tok1, "%.1f", r.tok1_lo);
        if (u_hi - u_lo < 0.005 * u_hi) snprintf(tokh, sizeof tokh, "%.1f", u_lo);
        printf("  %-40s %-14s %-5s %-9s %3d %5.1f GiB %5.1f GiB %8lld %8lld  %-13s %-13s %s\n",
               guidance_rows[i].claim, m.name, xi_plan_quant_name(r.quant), d->key, r.tp,
               r.weights_per_device / GIB, r.kv_budget / GIB, (long long)r.max_seqs_full,
               (long long)r.max_seqs_typical, tok1, r.fits ? tokh : "-", verdict);
    }
    if (a->json) {
        print_json(json_incref(arr));
    } else {
        printf("\n  weights and KV are per device; tok/s are memory-bandwidth upper bounds (expect about "
               "half);\n  'users' = sequences of the typical context decoding together. See docs/ops.md.\n");
    }
    json_decref(arr);
    return 0;
}

static void list_catalogue(void) {
    printf("models:\n");
    for (int i = 0; i < xi_plan_model_count(); i++) printf("  %s\n", xi_plan_model_name(i));
    printf("devices:\n");
    for (int i = 0; i < xi_plan_device_count(); i++) {
        const xi_plan_device *d = xi_plan_device_at(i);
        printf("  %-12s %s", d->key, d->name);
        if (d->mem_bytes) printf(", %.1f GiB per device", d->mem_bytes / GIB);
        if (d->bw_lo) printf(", %.0f-%.0f GB/s", d->bw_lo / 1e9, d->bw_hi / 1e9);
        printf("\n");
    }
}

int cmd_plan(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    plan_args a;
    if (parse_args(argc, argv, &a)) return 1;
    if (a.list) {
        list_catalogue();
        return 0;
    }
    if (a.guidance) return guidance(&a);
    if (!a.model) {
        fprintf(stderr, "xinfer plan: --model is required (a folder or one of the catalogue names; "
                        "see --list)\n");
        return 1;
    }
    xi_plan_model m;
    if (load_model(a.model, &m)) return 1;

    char err[600];
    xi_plan_device dev;
    const xi_plan_device *d = NULL;
    if (a.device) {
        d = xi_plan_device_find(a.device, err, sizeof err);
        if (!d) {
            fprintf(stderr, "xinfer plan: %s\n", err);
            return 1;
        }
    } else if (a.memory_gb > 0 && !a.recommend) {
        d = xi_plan_device_find("custom", err, sizeof err);
    }
    xi_plan_device cpu = *xi_plan_device_find("kunpeng920", err, sizeof err);
    if (a.memory_gb > 0) cpu.mem_bytes = (int64_t)(a.memory_gb * GIB);
    if (a.bandwidth_gbs > 0) cpu.bw_lo = cpu.bw_hi = a.bandwidth_gbs * 1e9;
    if (!d || a.recommend) return recommend(&a, &m, a.memory_gb > 0 ? &cpu : NULL);

    dev = *d;
    if (a.memory_gb > 0) dev.mem_bytes = (int64_t)(a.memory_gb * GIB);
    if (a.bandwidth_gbs > 0) dev.bw_lo = dev.bw_hi = a.bandwidth_gbs * 1e9;
    xi_plan r;
    if (xi_plan_compute(&m, &dev, &a.p, &r, err, sizeof err)) {
        fprintf(stderr, "xinfer plan: %s\n", err);
        return 1;
    }
    if (a.json) {
        print_json(plan_json(&m, &dev, &r));
    } else {
        plan_text(&m, &dev, &r);
    }
    return 0;
}

/* ops/plan: the capacity arithmetic of reference ascend.md §6.
 *
 * Weights: 16-bit = 2 B/param; int8 (W8A16) = 1 B/param + one f32 scale per output channel;
 * AWQ/GPTQ = bits/8 per param + per group of `group` inputs an fp16 scale and a packed
 * bits-wide zero point per output column (the checkpoint layout). Embeddings, lm_head,
 * norms and biases stay 16-bit. KV per token = 2 × layers × kv_heads × head_dim × bytes,
 * each sequence rounded up to whole blocks. KV budget per device = memory × utilization −
 * weights/TP − runtime overhead. Decode is memory-bound: one step reads every weight once
 * plus each sequence's KV, so tok/s ≤ BW / bytes read per step (× batch for the total). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "ops/plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Runtime reserve per device that is neither weights nor KV: on an NPU the ACL context,
 * HCCL buffers, operator workspaces and the activation peak of one 2048-token prefill chunk
 * (what vLLM profiles at start-up); on a CPU xinfer's scratch buffers and activations. An
 * assumption to be measured, overridable with --overhead-gb. */
#define OVERHEAD_NPU (1.5 * GIB)
#define OVERHEAD_CPU (1.0 * GIB)

void xi_plan_params_default(xi_plan_params *p) {
    memset(p, 0, sizeof *p);
    p->quant = -1;
    p->kv_dtype = XI_KV_AUTO;
    p->util = 0.9;
    p->overhead_bytes = -1;
    p->max_num_seqs = 256;
}

const char *xi_plan_quant_name(xi_plan_quant q) {
    static const char *const names[] = {"none", "awq", "int8", "gguf"};
    return names[q];
}

static void note(xi_plan *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(xi_plan *r, const char *fmt, ...) {
    if (r->n_notes == (int)XI_ARRAY_LEN(r->notes)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes[r->n_notes++], sizeof r->notes[0], fmt, ap);
    va_end(ap);
}

/* Bytes of one [n_out, n_in] linear layer. */
static int64_t linear_bytes(int64_t n_out, int64_t n_in, xi_plan_quant q, const xi_plan_model *m,
                            int wbytes, int64_t *meta) {
    if (q == XI_PQ_INT8) {
        *meta += n_out * 4;
        return n_out * n_in + n_out * 4;
    }
    if (q == XI_PQ_AWQ) {
        int bits = m->quant_bits ? m->quant_bits : 4;
        int group = m->quant_group ? m->quant_group : 128;
        int zero = m->quant ? m->quant_zero_point : 1;
        int64_t groups = (n_in + group - 1) / group;
        /* scales fp16 [groups, n_out]; zeros packed like the weights [groups, n_out·bits/8] */
        int64_t md = groups * n_out * 2 + (zero ? groups * n_out * bits / 8 : 0);
        *meta += md;
        return n_out * n_in * bits / 8 + md;
    }
    return n_out * n_in * wbytes;
}

/* Bytes of one expert (gate, up, down) of a MoE layer. */
static int64_t expert_bytes(const xi_plan_model *m, xi_plan_quant q, int wb, int64_t *meta) {
    const int64_t h = m->hidden, f = m->moe_intermediate;
    return 2 * linear_bytes(f, h, q, m, wb, meta) + linear_bytes(h, f, q, m, wb, meta);
}

/* Experts a batch of n tokens is expected to touch in one MoE layer, uniform routing. */
static double experts_touched(const xi_plan_model *m, int n) {
    if (!m->experts) return 0;
    return m->experts * (1.0 - pow(1.0 - (double)m->experts_per_tok / m->experts, n));
}

static void count_weights(const xi_plan_model *m, xi_plan_quant q, xi_plan_weights *w) {
    memset(w, 0, sizeof *w);
    int64_t h = m->hidden, qd = (int64_t)m->heads * m->head_dim, kvd = (int64_t)m->kv_heads * m->head_dim;
    int64_t in = m->intermediate, wb = m->dtype_bytes;
    const int64_t shapes[7][2] = {{qd, h}, {kvd, h}, {kvd, h}, {h, qd}, {in, h}, {in, h}, {h, in}};
    /* per dense layer (7 linears) and per MoE layer (4 attention linears + experts) */
    int64_t dense_bytes = 0, attn_bytes = 0, dense_meta = 0, attn_meta = 0, dense_params = 0, attn_params = 0;
    for (int i = 0; i < 7; i++) {
        int64_t meta = 0, b = linear_bytes(shapes[i][0], shapes[i][1], q, m, (int)wb, &meta);
        dense_params += shapes[i][0] * shapes[i][1];
        dense_bytes += b, dense_meta += meta;
        if (i < 4) attn_params += shapes[i][0] * shapes[i][1], attn_bytes += b, attn_meta += meta;
    }
    const int64_t n_moe = m->experts ? m->moe_layers : 0, n_dense = m->layers - n_moe;
    int64_t e_meta = 0, e_bytes = m->experts ? expert_bytes(m, q, (int)wb, &e_meta) : 0;
    const int64_t e_params = 3 * h * m->moe_intermediate;
    int64_t layer_other = 2 * h + (m->attention_bias ? qd + 2 * kvd : 0) + (m->qk_norm ? 2LL * m->head_dim : 0);
    w->params_linear = dense_params * n_dense + (attn_params + e_params * m->experts) * n_moe;
    w->params_embed = (int64_t)m->vocab * h;
    w->params_lm_head = m->tied ? 0 : (int64_t)m->vocab * h;
    /* norms, biases and the MoE routers (kept 16-bit by AWQ checkpoints) */
    w->params_other = layer_other * m->layers + (int64_t)m->experts * h * n_moe + h; /* + final norm */
    w->params = w->params_linear + w->params_embed + w->params_lm_head + w->params_other;
    int b16 = wb > 2 ? (int)wb : 2; /* unquantized parts keep the checkpoint's width */
    w->bytes_linear = dense_bytes * n_dense + (attn_bytes + e_bytes * m->experts) * n_moe;
    w->bytes_linear_meta = dense_meta * n_dense + (attn_meta + e_meta * m->experts) * n_moe;
    w->bytes_embed = (w->params_embed + w->params_lm_head) * b16;
    w->bytes_other = w->params_other * b16;
    if (q == XI_PQ_GGUF) { /* as stored in the file */
        e_bytes = m->experts && n_moe ? m->gguf_experts / (m->experts * n_moe) : 0;
        w->bytes_linear = m->gguf_linear + m->gguf_experts;
        w->bytes_linear_meta = 0;
        w->bytes_embed = m->gguf_embed;
        w->bytes_other = m->gguf_other;
    }
    w->bytes = w->bytes_linear + w->bytes_embed + w->bytes_other;
    /* a token reads its k experts of each MoE layer, not all E */
    const int64_t idle = m->experts ? (int64_t)(m->experts - m->experts_per_tok) * n_moe : 0;
    w->bytes_expert = e_bytes;
    w->params_active = w->params - idle * e_params;
    w->bytes_active = w->bytes - idle * e_bytes;
    w->bytes_batch = w->bytes_active;
}

int xi_plan_tp_valid(const xi_plan_model *m, xi_plan_quant q, int tp) {
    if (tp < 1 || m->heads % tp) return 0;
    if (m->kv_heads % tp && tp % m->kv_heads) return 0;
    if (q == XI_PQ_AWQ && tp > 1) {
        int group = m->quant_group ? m->quant_group : 128;
        int ffn = m->experts ? m->moe_intermediate : m->intermediate;
        if (ffn % tp || (ffn / tp) % group) return 0;
    }
    return 1;
}

/* Everything that depends on the TP size. */
static void plan_for_tp(const xi_plan_model *m, const xi_plan_device *d, const xi_plan_params *p,
                        xi_plan *r, int tp) {
    r->tp = tp;
    /* Linear layers and the vocab-parallel embedding/lm_head split across ranks; norms and
     * biases are tiny and counted whole on every rank. */
    r->weights_per_device = (r->w.bytes_linear + r->w.bytes_embed + tp - 1) / tp + r->w.bytes_other;
    int kv_heads_dev = m->kv_heads >= tp ? m->kv_heads / tp : 1; /* replicated past kv_heads */
    r->kv_per_token_device = 2LL * m->layers * kv_heads_dev * m->head_dim * r->kv_bytes;
    /* In int64: max_model_len may be near INT_MAX. */
    int64_t blocks_full = ((int64_t)r->max_model_len + r->block_size - 1) / r->block_size;
    int64_t blocks_typ = ((int64_t)r->typical_context + r->block_size - 1) / r->block_size;
    r->kv_per_seq_full = blocks_full * r->block_size * r->kv_per_token_device;
    r->kv_per_seq_typical = blocks_typ * r->block_size * r->kv_per_token_device;
    r->kv_budget = r->usable_bytes - r->weights_per_device - r->overhead_bytes;
    r->max_seqs_full = r->kv_budget > 0 ? r->kv_budget / r->kv_per_seq_full : 0;
    r->max_seqs_typical = r->kv_budget > 0 ? r->kv_budget / r->kv_per_seq_typical : 0;
    r->fits = r->max_seqs_full >= 1;

    /* Decode bound: a step reads the weights its tokens use once (dense: all of this
     * device's; MoE: the experts picked, see count_weights) and every sequence's KV (typical
     * context). The batched figure is the concurrency that fits, capped. */
    r->batch = (int)XI_MIN(r->max_seqs_typical, (int64_t)p->max_num_seqs);
    if (r->batch < 1) r->batch = 1;
    double kv_read = (double)r->kv_per_token_device * r->typical_context;
    double idle1 = (double)(r->w.bytes - r->w.bytes_active);
    double idlen = (m->experts - experts_touched(m, r->batch)) * m->moe_layers * (double)r->w.bytes_expert;
    r->w.bytes_batch = r->w.bytes - (int64_t)idlen;
    double step1 = (double)r->weights_per_device - idle1 / tp + kv_read;
    double stepn = (double)r->weights_per_device - idlen / tp + kv_read * r->batch;
    r->tok1_lo = d->bw_lo / step1, r->tok1_hi = d->bw_hi / step1;
    r->tokn_lo = d->bw_lo / stepn * r->batch, r->tokn_hi = d->bw_hi / stepn * r->batch;
    /* Compute ceiling: 2 FLOPs per weight of the linear layers and lm_head, plus attention
     * (QK and PV: 4 × heads × head_dim per context token per layer), split over TP. */
    double active_linear = (double)(r->w.params_linear - (r->w.params - r->w.params_active));
    double flops = 2.0 * (active_linear + (double)m->vocab * m->hidden) +
                   4.0 * m->layers * m->heads * m->head_dim * (double)r->typical_context;
    flops /= tp;
    r->compute_lo = d->tflops_lo * 1e12 / flops, r->compute_hi = d->tflops_hi * 1e12 / flops;
    if (r->compute_lo > 0) {
        r->tokn_lo = XI_MIN(r->tokn_lo, r->compute_lo);
        r->tokn_hi = XI_MIN(r->tokn_hi, r->compute_hi);
    }
}

int xi_plan_compute(const xi_plan_model *m, const xi_plan_device *d, const xi_plan_params *p,
                    xi_plan *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (!(p->util > 0 && p->util <= 1))
        return xi_errf(err, errlen, "--gpu-memory-utilization %g: must be in (0, 1]", p->util);
    if (d->mem_bytes <= 0)
        return xi_errf(err, errlen, "--device %s: needs --memory-gb (memory of the machine)", d->key);
    if (p->tp < 0 || (p->tp > 0 && p->tp > d->max_tp))
        return xi_errf(err, errlen, "--tensor-parallel-size %d: %s allows 1..%d", p->tp, d->key, d->max_tp);
    r->quant = p->quant >= 0 ? (xi_plan_quant)p->quant : m->quant;
    if ((r->quant == XI_PQ_GGUF) != (m->quant == XI_PQ_GGUF))
        return xi_errf(err, errlen, "--quantization %s: %s", xi_plan_quant_name(r->quant),
                       m->quant == XI_PQ_GGUF ? "a GGUF file is planned as it is stored"
                                              : "only a GGUF file is planned as gguf");
    r->max_model_len = p->max_model_len > 0 ? p->max_model_len : m->max_position;
    r->typical_context = p->typical_context > 0 ? p->typical_context : XI_MIN(2048, r->max_model_len);
    if (r->typical_context > r->max_model_len)
        return xi_errf(err, errlen, "--typical-context %d: larger than --max-model-len %d",
                       r->typical_context, r->max_model_len);
    r->block_size = p->block_size > 0 ? p->block_size : (d->is_cpu ? 16 : 128);
    r->util = p->util;

    static const char *const kv_names[] = {NULL, "float16", "bfloat16", "float32", "fp8"};
    static const int kv_sizes[] = {0, 2, 2, 4, 1};
    r->kv_dtype = p->kv_dtype == XI_KV_AUTO ? m->dtype : kv_names[p->kv_dtype];
    r->kv_bytes = p->kv_dtype == XI_KV_AUTO ? m->dtype_bytes : kv_sizes[p->kv_dtype];

    count_weights(m, r->quant, &r->w);
    r->kv_per_token = 2LL * m->layers * m->kv_heads * m->head_dim * r->kv_bytes;
    /* One full-length sequence's KV, rounded up to a block, must fit int64 arithmetic. */
    if ((double)r->kv_per_token * ((double)r->max_model_len + r->block_size) > 0x1p62)
        return xi_errf(err, errlen, "--max-model-len %d: the KV cache of one sequence of %s is "
                       "too large to plan", r->max_model_len, m->name);
    r->device_bytes = d->mem_bytes;
    r->usable_bytes = (int64_t)((double)d->mem_bytes * p->util);
    r->overhead_bytes = p->overhead_bytes >= 0 ? (int64_t)p->overhead_bytes
                                               : (int64_t)(d->is_cpu ? OVERHEAD_CPU : OVERHEAD_NPU);

    /* Smallest valid TP that holds one full-length sequence. */
    int group_blocked = 0;
    for (int tp = 1; tp <= d->max_tp && !r->min_tp; tp *= 2) {
        if (!xi_plan_tp_valid(m, r->quant, tp)) {
            group_blocked |= xi_plan_tp_valid(m, XI_PQ_NONE, tp);
            continue;
        }
        plan_for_tp(m, d, p, r, tp);
        if (r->fits) r->min_tp = tp;
    }
    int tp = p->tp > 0 ? p->tp : (r->min_tp ? r->min_tp : 1);
    if (!xi_plan_tp_valid(m, r->quant, tp))
        return xi_errf(err, errlen, "--tensor-parallel-size %d: %s has %d heads and %d KV heads%s", tp,
                       m->name, m->heads, m->kv_heads,
                       r->quant == XI_PQ_AWQ ? " (and AWQ needs intermediate/TP in whole groups)" : "");
    plan_for_tp(m, d, p, r, tp);

    if (group_blocked)
        note(r, "4-bit TP > 1 needs intermediate_size/TP in whole groups of %d; %d is not (AWQ "
             "releases often pad it, e.g. Qwen2.5-72B-AWQ uses 29696): plan that folder instead",
             m->quant_group ? m->quant_group : 128, m->intermediate);
    if (!d->w4 && r->quant == XI_PQ_AWQ)
        note(r, "%s has no 4-bit weight matmul (aclnnWeightQuantBatchMatmulV2 takes INT8 only): "
             "convert AWQ to W8A16 (--quantization int8) or dequantize", d->key);
    if (!d->bf16 && !d->is_cpu && (!strcmp(m->dtype, "bfloat16") || p->kv_dtype == XI_KV_BF16))
        note(r, "%s has no BF16: bfloat16 weights and KV run as float16 (same size)", d->key);
    if (tp > d->devices)
        note(r, "TP %d spans %d units of %d device%s: all-reduce then crosses PCIe/HCCS", tp,
             (tp + d->devices - 1) / d->devices, d->devices, d->devices == 1 ? "" : "s");
    if (!d->bw_lo)
        note(r, "bandwidth unknown: give --bandwidth-gbs for a decode estimate");
    return 0;
}

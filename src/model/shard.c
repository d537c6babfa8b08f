/* model/shard: which part of the model a tensor-parallel rank holds (Megatron-LM's split).
 *
 *   q, k, v      by heads (rows): rank r holds query heads [r nh/tp, (r+1) nh/tp) and the KV
 *                heads they read; with fewer KV heads than ranks each KV head is replicated
 *                on the tp/n_kv ranks whose query heads use it (as vLLM does)
 *   o_proj       by its input (columns): the rank's heads; partial sums all-reduced
 *   gate, up     by output columns: ffn/tp each
 *   down         by its input (columns): the same ffn/tp; partial sums all-reduced
 *   MoE          every expert split as the dense MLP (gate/up by columns, down by input):
 *                each rank does 1/tp of every routed expert, so the ranks' work and the bytes
 *                they read are equal whatever the router picks (experts spread over ranks
 *                would leave a rank idle whenever a step's tokens avoid its experts, and at
 *                batch 1 only top_k of them run); the router and routing are replicated
 *   lm_head      by vocabulary rows (multiples of 8); logits gathered on rank 0
 *   embeddings, norms, q/k norms, routers: replicated
 *
 * AWQ shards along its groups: an input split (o_proj, down) must keep whole groups, an
 * output split whole packed int32s (8 columns); GGUF block formats along their blocks (an
 * input split keeps whole blocks of 32 or 256; rows split anywhere); a -tp that cuts either
 * is refused with the values that work. int8 takes each output channel's scale from its whole row; its 8-bit
 * activations are blocked by 32 within the rank's slice, so a slice of o_proj's or down's
 * input that is not a multiple of 32 rounds them unlike -tp 1 (ARCHITECTURE.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/wformat.h"
#include "model/gguf.h"
#include "model/model_internal.h"

/* The GGUF tensor of role in layer l (stacked for experts), or NULL (not a GGUF model). */
static const xi_gguf_tensor *gguf_tensor(const xi_model *m, xi_tensor_role role, int l) {
    char mod[256], name[300];
    if (!m->gguf || xi_arch_tensor_name(m->cfg.family, XI_NAMES_GGUF, role, l, 0, mod, sizeof mod))
        return NULL;
    snprintf(name, sizeof name, "%s.weight", mod);
    return xi_gguf_find_tensor(m->gguf, name);
}

/* Whether an input slice of `per_rank` columns of that tensor cuts the blocks of its format
 * (with why). */
static int cuts_blocks(const xi_gguf_tensor *t, int l, const char *what, int64_t per_rank,
                       char *why, size_t n) {
    const xi_wformat *f = t ? xi_wformat_for(XI_GGML, t->type) : NULL;
    if (!f || f->block <= 1 || per_rank % f->block == 0) return 0;
    return snprintf(why, n, "layer %d: %s input of %lld per rank cuts its %s blocks of %d", l, what,
                    (long long)per_rank, f->name, f->block), 1;
}

/* Why tp cannot split this model (0 when it can). */
static int split_refused(const xi_model *m, int awq, int tp, char *why, size_t n) {
    const xi_config *c = &m->cfg;
    const int hd = c->head_dim;
    /* AWQ: an output slice keeps whole packs (the row's out_unit), an input slice whole groups */
    const int pack = awq ? m->qfmt->out_unit : 1, g = awq && !m->qfmt->block ? c->quant_group_size : 1;
    if (c->n_heads % tp)
        return snprintf(why, n, "%d attention heads do not split %d ways", c->n_heads, tp), 1;
    if (c->n_kv_heads % tp && tp % c->n_kv_heads)
        return snprintf(why, n, "%d KV heads neither split %d ways nor replicate evenly",
                        c->n_kv_heads, tp), 1;
    const int nkl = c->n_kv_heads >= tp ? c->n_kv_heads / tp : 1;
    const int64_t qdl = (int64_t)c->n_heads / tp * hd;
    if (awq && (qdl % pack || (int64_t)nkl * hd % pack))
        return snprintf(why, n, "q/k/v rows of %lld and %lld per rank cut AWQ's packs of %d columns",
                        (long long)qdl, (long long)nkl * hd, pack), 1;
    if (awq && qdl % g)
        return snprintf(why, n, "o_proj's input of %lld per rank cuts AWQ groups of %d",
                        (long long)qdl, g), 1;
    for (int l = 0; l < c->n_layers; l++) {
        const int ff = c->layer[l].ffn, moe = c->layer[l].mlp == XI_MLP_MOE;
        if (ff % tp)
            return snprintf(why, n, "layer %d: an MLP width of %d does not split %d ways", l, ff, tp), 1;
        if (cuts_blocks(gguf_tensor(m, XI_T_ATTN_O, l), l, "o_proj's", qdl, why, n) ||
            cuts_blocks(gguf_tensor(m, moe ? XI_T_EXP_DOWN : XI_T_FFN_DOWN, l), l,
                        moe ? "the experts' down" : "down's", ff / tp, why, n))
            return 1;
        if (awq && (ff / tp) % pack)
            return snprintf(why, n, "layer %d: gate/up columns of %d per rank cut AWQ's packs of %d",
                            l, ff / tp, pack), 1;
        if (awq && (ff / tp) % g)
            return snprintf(why, n, "layer %d: down's input of %d per rank cuts AWQ groups of %d",
                            l, ff / tp, g), 1;
    }
    int64_t v0, v1;
    xi_shard_vocab(c->vocab_size, tp, tp - 1, &v0, &v1);
    if (v0 >= v1)
        return snprintf(why, n, "a vocabulary of %d leaves a rank no lm_head rows", c->vocab_size), 1;
    return 0;
}

int xi_shard_plan(xi_model *m, xi_comm *comm, char *err, size_t errlen) {
    const xi_config *c = &m->cfg;
    const int tp = comm ? comm->size : 1, rank = comm ? comm->rank : 0;
    const int awq = m->qfmt && m->qfmt->out_unit > 1; /* AWQ: a format of packed columns */
    char why[200];
    if (split_refused(m, awq, tp, why, sizeof why)) {
        char ok[200] = "";
        size_t o = 0;
        for (int t = 1; t <= c->n_heads && t <= 64 && o < sizeof ok; t++) {
            char dummy[8];
            if (!split_refused(m, awq, t, dummy, sizeof dummy))
                o += (size_t)snprintf(ok + o, sizeof ok - o, "%s%d", o ? ", " : "", t);
        }
        return xi_errf(err, errlen, "-tp %d: %s%s; -tp values that work for this model: %s", tp,
                       why, awq ? " (AWQ)" : "", ok);
    }
    xi_shard *s = &m->shard;
    s->tp = tp, s->rank = rank;
    s->n_heads = c->n_heads / tp;
    s->q_head0 = rank * s->n_heads;
    if (c->n_kv_heads >= tp) {
        s->n_kv_heads = c->n_kv_heads / tp;
        s->kv_head0 = rank * s->n_kv_heads;
    } else {
        s->n_kv_heads = 1;
        s->kv_head0 = rank * c->n_kv_heads / tp;
    }
    xi_shard_vocab(c->vocab_size, tp, rank, &s->vocab0, &s->vocab1);
    m->comm = tp > 1 ? comm : NULL;
    return 0;
}

void xi_shard_localize(xi_model *m) {
    xi_config *c = &m->cfg;
    const int tp = m->shard.tp;
    if (tp == 1) return;
    c->n_heads = m->shard.n_heads;
    c->n_kv_heads = m->shard.n_kv_heads;
    c->intermediate_size /= tp;
    c->moe_intermediate_size /= tp;
    for (int l = 0; l < c->n_layers; l++) c->layer[l].ffn /= tp;
}

int xi_shard_pack_awq(xi_weight *w, const int32_t *qweight, const int32_t *qzeros,
                      const uint16_t *scales, int64_t n_in, int64_t n_out, int group,
                      const xi_slice *sl, void **owned, size_t *owned_bytes, char *err,
                      size_t errlen) {
    if (!sl || (sl->r0 == 0 && sl->r1 == n_out && sl->c0 == 0 && sl->c1 == n_in))
        return xi_weight_pack_awq(w, qweight, qzeros, scales, n_in, n_out, group, owned,
                                  owned_bytes, err, errlen);
    /* xi_shard_plan checked the alignment; this guards a caller that did not */
    if (sl->r0 % 8 || sl->r1 % 8 || sl->c0 % group || sl->c1 % group)
        return xi_errf(err, errlen, "AWQ slice [%lld, %lld) x [%lld, %lld) cuts a group of %d",
                       (long long)sl->r0, (long long)sl->r1, (long long)sl->c0, (long long)sl->c1, group);
    const int64_t R = sl->r1 - sl->r0, C = sl->c1 - sl->c0, P = n_out / 8, PR = R / 8;
    const int64_t G0 = sl->c0 / group, G = C / group;
    int32_t *qw = malloc((size_t)(C * PR) * 4), *qz = malloc((size_t)(G * PR) * 4);
    uint16_t *sc = malloc((size_t)(G * R) * 2);
    int rc = -1;
    if (!qw || !qz || !sc) {
        xi_errf(err, errlen, "out of memory");
        goto done;
    }
    /* memcpy: the file's tensors are only as aligned as their offsets */
    for (int64_t k = 0; k < C; k++)
        memcpy(qw + k * PR, (const char *)qweight + (size_t)((sl->c0 + k) * P + sl->r0 / 8) * 4, (size_t)PR * 4);
    for (int64_t gi = 0; gi < G; gi++) {
        memcpy(qz + gi * PR, (const char *)qzeros + (size_t)((G0 + gi) * P + sl->r0 / 8) * 4, (size_t)PR * 4);
        memcpy(sc + gi * R, (const char *)scales + (size_t)((G0 + gi) * n_out + sl->r0) * 2, (size_t)R * 2);
    }
    rc = xi_weight_pack_awq(w, qw, qz, sc, C, R, group, owned, owned_bytes, err, errlen);
done:
    free(qw);
    free(qz);
    free(sc);
    return rc;
}

int xi_shard_quantize_q8(xi_weight *w, const void *src, xi_dtype dtype, int64_t n_out,
                         int64_t n_in, const xi_slice *sl, void **owned, size_t *owned_bytes,
                         char *err, size_t errlen) {
    const size_t es = xi_dtype_size(dtype);
    const xi_slice all = {0, n_out, 0, n_in};
    if (!sl) sl = &all;
    const int64_t R = sl->r1 - sl->r0, C = sl->c1 - sl->c0;
    /* the slice's rows, whole: each scale is its row's maximum */
    const void *rows = (const char *)src + (size_t)(sl->r0 * n_in) * es;
    if (C == n_in) return xi_weight_quantize_q8(w, rows, dtype, R, n_in, owned, owned_bytes, err, errlen);
    xi_weight full;
    void *tmp;
    size_t tmp_bytes;
    if (xi_weight_quantize_q8(&full, rows, dtype, R, n_in, &tmp, &tmp_bytes, err, errlen)) return -1;
    const size_t scale_off = ((size_t)(R * C) + 63) & ~(size_t)63, total = scale_off + (size_t)R * 4;
    int8_t *buf = xi_alloc_big(total);
    if (!buf) {
        xi_free_big(tmp, tmp_bytes);
        return xi_errf(err, errlen, "int8 quantization: out of memory for %zu bytes", total);
    }
    float *scale = (float *)((char *)buf + scale_off);
    for (int64_t r = 0; r < R; r++)
        memcpy(buf + r * C, (const int8_t *)full.data + r * n_in + sl->c0, (size_t)C);
    memcpy(scale, full.scale, (size_t)R * 4);
    xi_free_big(tmp, tmp_bytes);
    *w = full; /* the format of the whole rows', on the slice's columns */
    w->n_in = C;
    w->data = buf;
    w->scale = scale;
    *owned = buf;
    *owned_bytes = total;
    return 0;
}

void xi_shard_vocab(int vocab, int tp, int rank, int64_t *v0, int64_t *v1) {
    const int64_t per = tp == 1 ? vocab : ((vocab + tp - 1) / tp + 7) / 8 * 8;
    *v0 = rank * per;
    *v1 = *v0 + per < vocab ? *v0 + per : vocab;
}

/* model/tp: the collectives of a tensor-parallel forward pass, and the loop the ranks other
 * than 0 run.
 *
 * Rank 0 (the engine's) sends each step's flat batch, as plain arrays, before computing it;
 * every rank then runs the same layers on its shard and meets the others twice per layer
 * (after o_proj and after down: the all-reduce of partial sums) and once at the end (rank 0
 * gathers the lm_head's vocabulary slices). Block ids mean the same on every rank, so the
 * others hold only their KV heads' memory, made at their first step in rank 0's geometry. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model_internal.h"

enum { MSG_STOP = 0, MSG_STEP = 1, MSG_PING = 2 };

/* The fixed-size part of a step message. */
typedef struct msg_head {
    int64_t kind, n_tokens, n_seqs, n_logits, n_table;
    int64_t kv_blocks, block_size, kv_dtype, payload;
} msg_head;

/* Payload: slots i64[T], tokens i32[T], positions i32[T], (q_start, q_len, n_blocks) i32[3S],
 * block tables i32[n_table], logits rows i32[L]. */
static size_t payload_bytes(const msg_head *h) {
    return (size_t)h->n_tokens * 16 + (size_t)(3 * h->n_seqs + h->n_table + h->n_logits) * 4;
}

static int grow_msg(xi_model *m, size_t n) {
    if (n <= m->tp_msg_cap) return 0;
    uint8_t *p = realloc(m->tp_msg, n);
    if (!p) return -1;
    m->tp_msg = p;
    m->tp_msg_cap = n;
    return 0;
}

static int comm_err(xi_model *m, int rc) {
    if (rc) m->tp_failed = 1;
    return rc;
}

int xi_tp_send_batch(xi_model *m, const xi_kv_store *kv, const xi_batch *b, char *err, size_t errlen) {
    msg_head h = {.kind = MSG_STEP, .n_tokens = b->n_tokens, .n_seqs = b->n_seqs,
                  .n_logits = b->n_logits, .kv_blocks = xi_kv_store_blocks(kv),
                  .block_size = xi_kv_store_block_size(kv), .kv_dtype = xi_kv_store_dtype(kv)};
    for (int s = 0; s < b->n_seqs; s++) h.n_table += b->seqs[s].n_blocks;
    h.payload = (int64_t)payload_bytes(&h);
    if (grow_msg(m, (size_t)h.payload)) return xi_errf(err, errlen, "tensor parallel: out of memory");
    uint8_t *p = m->tp_msg;
    const size_t T = (size_t)b->n_tokens;
    memcpy(p, b->slots, T * 8), p += T * 8;
    memcpy(p, b->tokens, T * 4), p += T * 4;
    memcpy(p, b->positions, T * 4), p += T * 4;
    int32_t *q = (int32_t *)p;
    for (int s = 0; s < b->n_seqs; s++) {
        *q++ = b->seqs[s].q_start;
        *q++ = b->seqs[s].q_len;
        *q++ = b->seqs[s].n_blocks;
    }
    for (int s = 0; s < b->n_seqs; s++) {
        memcpy(q, b->seqs[s].block_table, (size_t)b->seqs[s].n_blocks * 4);
        q += b->seqs[s].n_blocks;
    }
    memcpy(q, b->logits_rows, (size_t)b->n_logits * 4);
    if (comm_err(m, m->comm->bcast(m->comm, &h, sizeof h, err, errlen)) ||
        comm_err(m, m->comm->bcast(m->comm, m->tp_msg, h.payload, err, errlen)))
        return -1;
    m->tp_steps++;
    m->tp_tokens += b->n_tokens;
    return 0;
}

int xi_tp_allreduce(xi_model *m, float *buf, int64_t n, char *err, size_t errlen) {
    return comm_err(m, m->comm->allreduce_sum(m->comm, buf, n, err, errlen));
}

int xi_tp_reserve(xi_model *m, int max_logits) {
    if (!m->comm) return 0;
    const int64_t vl = m->shard.vocab1 - m->shard.vocab0, V = m->cfg.vocab_size;
    float *a = realloc(m->tp_logits, (size_t)(max_logits * vl) * sizeof(float));
    if (a) m->tp_logits = a;
    float *g = m->comm->rank == 0 ? realloc(m->tp_gather, (size_t)(max_logits * V) * sizeof(float)) : NULL;
    if (g) m->tp_gather = g;
    int64_t *c = m->tp_counts ? m->tp_counts : calloc((size_t)m->shard.tp, sizeof *c);
    m->tp_counts = c;
    return !a || !c || (m->comm->rank == 0 && !g) ? -1 : 0;
}

/* Every rank's [n_rows, its vocabulary slice] into logits [n_rows, vocab] on rank 0. */
int xi_tp_logits(xi_model *m, int n_rows, float *logits, char *err, size_t errlen) {
    const xi_shard *s = &m->shard;
    const int V = m->cfg.vocab_size;
    int64_t v0, v1;
    for (int r = 0; r < s->tp; r++) {
        xi_shard_vocab(V, s->tp, r, &v0, &v1);
        m->tp_counts[r] = (int64_t)n_rows * (v1 - v0);
    }
    if (comm_err(m, m->comm->gather(m->comm, m->tp_logits, m->tp_gather, m->tp_counts, err, errlen)))
        return -1;
    if (m->comm->rank != 0) return 0;
    const float *src = m->tp_gather;
    for (int r = 0; r < s->tp; r++) {
        xi_shard_vocab(V, s->tp, r, &v0, &v1);
        for (int i = 0; i < n_rows; i++, src += v1 - v0)
            memcpy(logits + (int64_t)i * V + v0, src, (size_t)(v1 - v0) * sizeof(float));
    }
    return 0;
}

int xi_model_serve_rank(xi_model *m, char *err, size_t errlen) {
    if (!m->comm || m->comm->rank == 0)
        return xi_errf(err, errlen, "xi_model_serve_rank: only ranks other than 0 serve steps");
    xi_batch_seq *seqs = NULL;
    int cap_seqs = 0, rc = -1;
    for (;;) {
        msg_head h;
        if (comm_err(m, m->comm->bcast(m->comm, &h, sizeof h, err, errlen))) break;
        if (h.kind == MSG_STOP) {
            rc = 0;
            break;
        }
        if (h.kind == MSG_PING) continue;
        if (h.n_tokens < 1 || h.n_seqs < 1 || h.payload != (int64_t)payload_bytes(&h) ||
            grow_msg(m, (size_t)h.payload)) {
            xi_errf(err, errlen, "tensor parallel: rank %d got a bad step message", m->comm->rank);
            break;
        }
        if (comm_err(m, m->comm->bcast(m->comm, m->tp_msg, h.payload, err, errlen))) break;
        if (!m->tp_kv || xi_kv_store_blocks(m->tp_kv) != h.kv_blocks ||
            xi_kv_store_block_size(m->tp_kv) != h.block_size ||
            xi_kv_store_dtype(m->tp_kv) != (xi_dtype)h.kv_dtype) {
            xi_kv_store_free(m->tp_kv);
            m->tp_kv = xi_kv_store_new(&m->cfg, (int)h.kv_blocks, (int)h.block_size,
                                       (xi_dtype)h.kv_dtype, err, errlen);
            if (!m->tp_kv) break;
        }
        if (h.n_seqs > cap_seqs) {
            xi_batch_seq *ns = realloc(seqs, (size_t)h.n_seqs * sizeof *ns);
            if (!ns) {
                xi_errf(err, errlen, "tensor parallel: out of memory");
                break;
            }
            seqs = ns;
            cap_seqs = (int)h.n_seqs;
        }
        const uint8_t *p = m->tp_msg;
        const size_t T = (size_t)h.n_tokens;
        xi_batch b = {.n_tokens = (int32_t)h.n_tokens, .n_seqs = (int32_t)h.n_seqs,
                      .n_logits = (int32_t)h.n_logits, .seqs = seqs};
        b.slots = (const int64_t *)p, p += T * 8;
        b.tokens = (const int32_t *)p, p += T * 4;
        b.positions = (const int32_t *)p, p += T * 4;
        const int32_t *q = (const int32_t *)p, *tab = q + 3 * h.n_seqs;
        int64_t used = 0;
        for (int s = 0; s < h.n_seqs; s++, q += 3) {
            seqs[s] = (xi_batch_seq){.q_start = q[0], .q_len = q[1], .n_blocks = q[2],
                                     .block_table = tab + used};
            used += q[2] < 0 ? 0 : q[2];
        }
        if (used != h.n_table) {
            xi_errf(err, errlen, "tensor parallel: rank %d got a bad step message", m->comm->rank);
            break;
        }
        b.logits_rows = tab + used;
        if (xi_model_forward_rank(m, m->tp_kv, &b, NULL, err, errlen)) break;
    }
    free(seqs);
    return rc;
}

int xi_model_tp_stop(xi_model *m, char *err, size_t errlen) {
    if (!m->comm || m->comm->rank != 0 || m->tp_failed || !m->tp_live) return 0;
    msg_head h = {.kind = MSG_STOP};
    m->tp_failed = 1; /* once */
    return m->comm->bcast(m->comm, &h, sizeof h, err, errlen);
}

int xi_model_tp_ping(xi_model *m, char *err, size_t errlen) {
    if (!m->comm || m->comm->rank != 0 || !m->tp_live) return 0;
    if (m->tp_failed) return xi_errf(err, errlen, "tensor parallel: the ranks are gone");
    msg_head h = {.kind = MSG_PING};
    return comm_err(m, m->comm->bcast(m->comm, &h, sizeof h, err, errlen));
}

int xi_model_tp_failed(const xi_model *m) { return m->comm && m->tp_failed; }

void xi_tp_free(xi_model *m) {
    char err[256];
    xi_model_tp_stop(m, err, sizeof err);
    /* what the collectives cost, for bench/tp.sh: rank 0's bytes sent and time spent waiting
     * in them (the all-reduces and the logits gather; the batch itself is not timed) */
    if (m->comm && m->comm->rank == 0 && m->tp_steps)
        XI_INFO("tensor parallel: %lld steps of %.1f tokens: %.1f KiB sent and %.3f ms in "
                "collectives per step (rank 0 of %d)", (long long)m->tp_steps,
                (double)m->tp_tokens / (double)m->tp_steps,
                (double)m->comm->bytes_sent / 1024.0 / (double)m->tp_steps,
                m->comm->seconds * 1e3 / (double)m->tp_steps, m->comm->size);
    xi_kv_store_free(m->tp_kv);
    free(m->tp_logits);
    free(m->tp_gather);
    free(m->tp_counts);
    free(m->tp_msg);
}

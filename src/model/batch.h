/* model/batch: the flat batch one forward pass runs. Built by the engine (engine thread) from
 * a schedule; read by the model runner. The engine never sees tensors; the model never sees
 * requests: this struct of plain arrays is the whole boundary between them. */
#ifndef XI_BATCH_H
#define XI_BATCH_H

#include <stdint.h>

typedef struct xi_batch_seq {
    int32_t q_start;             /* first row of this sequence in the flat token arrays */
    int32_t q_len;               /* tokens scheduled this step (prefill chunk or 1 decode) */
    const int32_t *block_table;  /* [n_blocks] KV block ids, position p lives in block p / bs */
    int32_t n_blocks;
} xi_batch_seq;

typedef struct xi_batch {
    int32_t n_tokens;
    const int32_t *tokens;       /* [n_tokens] token ids */
    const int32_t *positions;    /* [n_tokens] absolute positions; a sequence's rows are
                                    consecutive positions, so row i attends to keys
                                    [0, positions[i]] of its sequence */
    const int64_t *slots;        /* [n_tokens] KV slot = block_id * block_size + pos % bs */
    int32_t n_seqs;
    const xi_batch_seq *seqs;    /* [n_seqs], rows in order: seqs[i].q_start ascending */
    int32_t n_logits;
    const int32_t *logits_rows;  /* [n_logits] flat rows whose logits are wanted, in the
                                    order they are written to the logits output */
    int32_t n_hidden;
    const int32_t *hidden_rows;  /* [n_hidden] flat rows whose final hidden states are wanted */
    float *hidden;               /* [n_hidden][hidden_size] out: those rows after the final
                                    RMSNorm, before lm_head (pooling requests) */
} xi_batch;

#endif

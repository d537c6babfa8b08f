#include "engine/request.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static void hash_full_blocks(xi_request *r) {
    while ((r->n_hashes + 1) * r->block_size <= r->n_tokens) {
        int b = r->n_hashes;
        const xi_block_hash *parent = b ? &r->hashes[b - 1] : NULL;
        r->hashes[b] = xi_block_hash_compute(parent, r->tokens + (size_t)b * r->block_size,
                                             r->block_size, b ? NULL : r->salt,
                                             b ? 0 : r->salt_len);
        r->n_hashes++;
    }
}

int xi_request_init(xi_request *r, int64_t id, const int32_t *prompt, int n_prompt,
                    const xi_request_limits *lim, int max_len, int block_size, const char *salt,
                    char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (n_prompt < 1) return xi_errf(err, errlen, "prompt: empty");
    if (max_len < n_prompt + 1)
        return xi_errf(err, errlen, "prompt: %d tokens leave no room in %d", n_prompt, max_len);
    if (block_size < 1) return xi_errf(err, errlen, "block_size: %d", block_size);
    r->id = id;
    r->status = XI_REQ_WAITING;
    r->stop_token = -1;
    r->num_cached_prompt = -1;
    r->block_size = block_size;
    r->cap_tokens = max_len;
    r->cap_blocks = (max_len + block_size - 1) / block_size;
    r->lim = *lim;
    r->tokens = malloc((size_t)r->cap_tokens * sizeof *r->tokens);
    r->blocks = malloc((size_t)r->cap_blocks * sizeof *r->blocks);
    r->hashes = malloc((size_t)r->cap_blocks * sizeof *r->hashes);
    r->stop_ids = lim->n_stop_ids ? malloc((size_t)lim->n_stop_ids * sizeof *r->stop_ids) : NULL;
    if (salt && *salt) {
        r->salt = xi_strdup(salt);
        r->salt_len = strlen(salt);
    }
    if (!r->tokens || !r->blocks || !r->hashes || (lim->n_stop_ids && !r->stop_ids) ||
        (salt && *salt && !r->salt)) {
        xi_request_free(r);
        return xi_errf(err, errlen, "request: out of memory for %d tokens", max_len);
    }
    if (lim->n_stop_ids) memcpy(r->stop_ids, lim->stop_ids, (size_t)lim->n_stop_ids * 4);
    r->lim.stop_ids = r->stop_ids;
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    r->n_prompt = r->n_tokens = n_prompt;
    hash_full_blocks(r);
    return 0;
}

void xi_request_free(xi_request *r) {
    free(r->tokens);
    free(r->blocks);
    free(r->hashes);
    free(r->stop_ids);
    free(r->salt);
    memset(r, 0, sizeof *r);
}

int xi_request_append(xi_request *r, int32_t token) {
    if (r->n_tokens >= r->cap_tokens) return -1;
    r->tokens[r->n_tokens++] = token;
    hash_full_blocks(r);
    return 0;
}

int xi_request_check_stop(xi_request *r, int max_model_len) {
    int n_out = xi_request_num_outputs(r);
    if (n_out >= r->lim.min_tokens && n_out > 0) {
        int32_t last = r->tokens[r->n_tokens - 1];
        if (!r->lim.ignore_eos && last == r->lim.eos_token_id) {
            r->finish = XI_REQ_FINISHED_STOP; /* EOS is no "stop reason" (vLLM: None) */
            return 1;
        }
        for (int i = 0; i < r->lim.n_stop_ids; i++) {
            if (last == r->stop_ids[i]) {
                r->finish = XI_REQ_FINISHED_STOP;
                r->stop_token = last;
                return 1;
            }
        }
    }
    if (r->n_tokens >= max_model_len || n_out >= r->lim.max_tokens ||
        r->n_tokens >= r->cap_tokens) {
        r->finish = XI_REQ_FINISHED_LENGTH;
        return 1;
    }
    return 0;
}

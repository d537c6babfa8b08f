/* engine/guide: the JSON-object mask (see guide.h). */
#include "engine/guide.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int xi_guide_vocab_init(xi_guide_vocab *g, const xi_tokenizer *tok, int vocab, char *err,
                        size_t errlen) {
    memset(g, 0, sizeof *g);
    const int nt = xi_tokenizer_vocab_size(tok);
    xi_buf all = {0};
    g->off = malloc(((size_t)vocab + 1) * sizeof *g->off);
    g->usable = calloc((size_t)vocab, 1);
    g->allow = calloc((size_t)vocab, 1);
    if (!g->off || !g->usable || !g->allow) goto oom;
    for (int i = 0; i < vocab; i++) {
        g->off[i] = (uint32_t)all.len;
        if (i >= nt || xi_tokenizer_is_special(tok, i)) continue;
        if (xi_token_bytes(tok, i, &all)) goto oom;
        g->usable[i] = all.len > g->off[i];
    }
    g->off[vocab] = (uint32_t)all.len;
    g->bytes = all.data;
    g->vocab = vocab;
    return 0;
oom:
    free(all.data);
    xi_guide_vocab_free(g);
    return xi_errf(err, errlen, "response_format: out of memory for the token table");
}

void xi_guide_vocab_free(xi_guide_vocab *g) {
    free(g->off);
    free(g->bytes);
    free(g->usable);
    free(g->allow);
    memset(g, 0, sizeof *g);
}

static int only_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') return 0;
    return n > 0;
}

int xi_guide_mask(xi_guide_vocab *g, const xi_json_fsm *f, const int32_t *end, int n_end,
                  int want_more) {
    const int done = xi_json_fsm_done(f);
    /* after the object, whitespace only while the end is held back or there is none
     * (ignore_eos), so the sequence always has a token to draw */
    const int pad = want_more || !n_end;
    int n = 0;
    for (int i = 0; i < g->vocab; i++) {
        int ok = 0;
        if (g->usable[i]) {
            const char *b = g->bytes + g->off[i];
            const size_t len = g->off[i + 1] - g->off[i];
            if (done) {
                ok = pad && only_space(b, len);
            } else {
                xi_json_fsm t = *f;
                ok = xi_json_fsm_feed(&t, b, len) == 0;
            }
        }
        g->allow[i] = (uint8_t)ok;
        n += ok;
    }
    for (int k = 0; k < n_end; k++)
        if (end[k] >= 0 && end[k] < g->vocab && (done || !n) && !g->allow[end[k]]) {
            g->allow[end[k]] = 1;
            n++;
        }
    return n;
}

void xi_guide_advance(const xi_guide_vocab *g, xi_json_fsm *f, int32_t token) {
    if (token < 0 || token >= g->vocab || !g->usable[token]) return;
    xi_json_fsm_feed(f, g->bytes + g->off[token], g->off[token + 1] - g->off[token]);
}

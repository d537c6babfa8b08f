/* sample: penalties, truncation and seeded draws on one logits row. See sample.h for the
 * order of operations and the logprob semantics. */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ==== PRNG ============================================================================== */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void xi_rng_seed(xi_rng *r, uint64_t seed) {
    /* splitmix64 expands the seed so that nearby seeds give unrelated streams and the state is
     * never all zero (xoshiro's one forbidden state). */
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t xi_rng_next(xi_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double xi_rng_uniform(xi_rng *r) { return (double)(xi_rng_next(r) >> 11) * 0x1.0p-53; }

/* ==== parameters and per-request state ================================================== */

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void xi_sampling_default(xi_sampling *s) {
    memset(s, 0, sizeof *s);
    s->temperature = 1.0f;
    s->top_p = 1.0f;
    s->repetition_penalty = 1.0f;
}

/* One distinct token seen in the prompt or the output. */
typedef struct seen_tok {
    int32_t token;
    int32_t count;              /* times generated */
    int32_t in_prompt;
} seen_tok;

struct xi_sampler {
    xi_sampling p;              /* bias and stop_ids point at the copies below */
    xi_logit_bias *bias;        /* [n_bias] owned */
    int32_t *stop_ids;          /* [n_stop_ids] owned */
    int32_t *allowed;           /* [n_allowed] owned, ascending, no repeats */
    int vocab;
    int n_generated;
    xi_rng rng;
    /* Distinct prompt/output tokens: a dense list (penalties iterate it) indexed by an
     * open-addressing table, so memory follows the request's length, not the vocab. */
    seen_tok *seen;             /* [cap] owned, n used */
    int n, cap;
    int32_t *slots;             /* [n_slots] index into seen or -1; n_slots = 2 × cap, pow2 */
    int n_slots;
};

static uint32_t tok_hash(int32_t t) { return (uint32_t)t * 2654435761u; }

static int seen_grow(xi_sampler *s) {
    int cap = s->cap ? s->cap * 2 : 64;
    seen_tok *seen = realloc(s->seen, (size_t)cap * sizeof *seen);
    if (!seen) return -1;
    s->seen = seen;
    int n_slots = cap * 2;
    int32_t *slots = malloc((size_t)n_slots * sizeof *slots);
    if (!slots) return -1;
    memset(slots, 0xff, (size_t)n_slots * sizeof *slots);
    for (int i = 0; i < s->n; i++) {
        uint32_t h = tok_hash(seen[i].token) & (uint32_t)(n_slots - 1);
        while (slots[h] >= 0) h = (h + 1) & (uint32_t)(n_slots - 1);
        slots[h] = i;
    }
    free(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
    s->cap = cap;
    return 0;
}

/* Entry for token, inserted with zero counts when absent; NULL when out of memory. */
static seen_tok *seen_get(xi_sampler *s, int32_t token, int insert) {
    if (s->n_slots) {
        uint32_t mask = (uint32_t)(s->n_slots - 1), h = tok_hash(token) & mask;
        for (; s->slots[h] >= 0; h = (h + 1) & mask)
            if (s->seen[s->slots[h]].token == token) return &s->seen[s->slots[h]];
        if (!insert) return NULL;
        if (s->n < s->cap) {
            s->seen[s->n] = (seen_tok){token, 0, 0};
            s->slots[h] = s->n;
            return &s->seen[s->n++];
        }
    }
    if (!insert || seen_grow(s)) return NULL;
    return seen_get(s, token, 1);
}

static const seen_tok *seen_find(const xi_sampler *s, int32_t token) {
    return seen_get((xi_sampler *)s, token, 0);
}

xi_sampler *xi_sampler_new(const xi_sampling *p, const int32_t *prompt, int n_prompt,
                           int vocab, char *err, size_t errlen) {
    if (vocab <= 0) return xi_errf(err, errlen, "vocab: %d is not positive", vocab), NULL;
    if (!(p->temperature >= 0) || isinf(p->temperature))
        return xi_errf(err, errlen, "temperature: %g must be >= 0", p->temperature), NULL;
    if (!(p->top_p > 0 && p->top_p <= 1))
        return xi_errf(err, errlen, "top_p: %g must be in (0, 1]", p->top_p), NULL;
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return xi_errf(err, errlen, "min_p: %g must be in [0, 1]", p->min_p), NULL;
    if (!(p->repetition_penalty > 0) || isinf(p->repetition_penalty))
        return xi_errf(err, errlen, "repetition_penalty: %g must be > 0",
                       p->repetition_penalty), NULL;
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return xi_errf(err, errlen, "presence_penalty/frequency_penalty: must be finite"), NULL;
    if (p->min_tokens < 0)
        return xi_errf(err, errlen, "min_tokens: %d must be >= 0", p->min_tokens), NULL;
    if (p->n_bias < 0 || p->n_stop_ids < 0 || n_prompt < 0)
        return xi_errf(err, errlen, "sampler: negative array length"), NULL;
    for (int i = 0; i < p->n_bias; i++) {
        if (p->bias[i].token < 0 || p->bias[i].token >= vocab)
            return xi_errf(err, errlen, "logit_bias: token %d out of range [0, %d)",
                           p->bias[i].token, vocab), NULL;
        if (!isfinite(p->bias[i].bias))
            return xi_errf(err, errlen, "logit_bias: token %d has a non-finite bias",
                           p->bias[i].token), NULL;
    }
    if (p->n_allowed < 0) return xi_errf(err, errlen, "allowed_token_ids: negative length"), NULL;
    for (int i = 0; i < p->n_allowed; i++)
        if (p->allowed[i] < 0 || p->allowed[i] >= vocab)
            return xi_errf(err, errlen, "allowed_token_ids: token %d out of range [0, %d)", p->allowed[i], vocab), NULL;
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= vocab)
            return xi_errf(err, errlen, "stop_token_ids: token %d out of range [0, %d)",
                           p->stop_ids[i], vocab), NULL;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= vocab)
            return xi_errf(err, errlen, "prompt: token %d at %d out of range [0, %d)",
                           prompt[i], i, vocab), NULL;

    xi_sampler *s = xi_calloc(1, sizeof *s);
    if (!s) return xi_errf(err, errlen, "sampler: out of memory"), NULL;
    s->p = *p;
    s->vocab = vocab;
    xi_rng_seed(&s->rng, p->seed);
    if (p->n_bias) s->bias = malloc((size_t)p->n_bias * sizeof *s->bias);
    if (p->n_stop_ids) s->stop_ids = malloc((size_t)p->n_stop_ids * sizeof *s->stop_ids);
    if ((p->n_bias && !s->bias) || (p->n_stop_ids && !s->stop_ids)) goto oom;
    if (p->n_bias) memcpy(s->bias, p->bias, (size_t)p->n_bias * sizeof *s->bias);
    if (p->n_stop_ids) memcpy(s->stop_ids, p->stop_ids, (size_t)p->n_stop_ids * sizeof(int32_t));
    s->p.bias = s->bias;
    s->p.stop_ids = s->stop_ids;
    if (p->n_allowed) {
        if (!(s->allowed = malloc((size_t)p->n_allowed * sizeof *s->allowed))) goto oom;
        memcpy(s->allowed, p->allowed, (size_t)p->n_allowed * sizeof *s->allowed);
        qsort(s->allowed, (size_t)p->n_allowed, sizeof *s->allowed, cmp_i32);
        int n = 0;
        for (int i = 0; i < p->n_allowed; i++)
            if (!n || s->allowed[n - 1] != s->allowed[i]) s->allowed[n++] = s->allowed[i];
        s->p.allowed = s->allowed;
        s->p.n_allowed = n;
    }
    /* Only the repetition penalty reads the prompt set; skip it otherwise. */
    if (p->repetition_penalty != 1.0f) {
        for (int i = 0; i < n_prompt; i++) {
            seen_tok *e = seen_get(s, prompt[i], 1);
            if (!e) goto oom;
            e->in_prompt = 1;
        }
    }
    return s;
oom:
    xi_sampler_free(s);
    return xi_errf(err, errlen, "sampler: out of memory"), NULL;
}

void xi_sampler_free(xi_sampler *s) {
    if (!s) return;
    free(s->slots);
    free(s->seen);
    free(s->stop_ids);
    free(s->allowed);
    free(s->bias);
    free(s);
}

int xi_sampler_accept(xi_sampler *s, int32_t token) {
    s->n_generated++;
    if (token < 0 || token >= s->vocab) return 0;
    seen_tok *e = seen_get(s, token, 1);
    if (!e) return -1;
    e->count++;
    return 0;
}

int xi_sampler_n_generated(const xi_sampler *s) { return s->n_generated; }

int xi_sampler_count(const xi_sampler *s, int32_t token) {
    const seen_tok *e = seen_find(s, token);
    return e ? e->count : 0;
}

/* ==== penalties, bias, min_tokens ======================================================= */

void xi_sampler_apply_penalties(const xi_sampler *s, float *row, int vocab) {
    const xi_sampling *p = &s->p;
    /* vLLM v1 runs min_tokens and logit_bias (its non-argmax-invariant processors) before
     * the penalties, so a penalty scales a biased logit. */
    /* allowed_token_ids: every other token is out (one pass over the ascending list) */
    for (int i = 0, k = 0; p->n_allowed && i < vocab; i++) {
        if (k < p->n_allowed && p->allowed[k] == i) k++;
        else row[i] = -INFINITY;
    }
    if (s->n_generated < p->min_tokens)
        for (int i = 0; i < p->n_stop_ids; i++)
            if (p->stop_ids[i] < vocab) row[p->stop_ids[i]] = -INFINITY;
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias[i].token < vocab) row[p->bias[i].token] += p->bias[i].bias;
    float rep = p->repetition_penalty;
    for (int i = 0; i < s->n; i++) {
        const seen_tok *e = &s->seen[i];
        if (e->token >= vocab) continue;
        float x = row[e->token];
        if (rep != 1.0f && (e->in_prompt || e->count > 0)) x = x > 0 ? x / rep : x * rep;
        if (e->count > 0) {
            x -= p->frequency_penalty * (float)e->count;
            x -= p->presence_penalty;
        }
        row[e->token] = x;
    }
}

/* ==== truncation and the draw =========================================================== */

/* Truncation selects by value without sorting the row: a histogram over the top 12 bits of
 * an order-preserving key finds the bucket holding the boundary in one pass, and only the
 * tokens at or above that bucket are gathered and ordered. */
#define HIST_SHIFT 20
#define N_HIST (1 << (32 - HIST_SHIFT))

int xi_sample_scratch_init(xi_sample_scratch *sc, int vocab, char *err, size_t errlen) {
    memset(sc, 0, sizeof *sc);
    if (vocab <= 0) return xi_errf(err, errlen, "sample scratch: vocab %d is not positive", vocab);
    sc->vocab = vocab;
    sc->row = malloc((size_t)vocab * sizeof *sc->row);
    sc->cand = malloc((size_t)vocab * sizeof *sc->cand);
    sc->tmp = malloc((size_t)vocab * sizeof *sc->tmp);
    sc->hist = malloc(N_HIST * sizeof *sc->hist);
    sc->mass = malloc(N_HIST * sizeof *sc->mass);
    if (!sc->row || !sc->cand || !sc->tmp || !sc->hist || !sc->mass) {
        xi_sample_scratch_free(sc);
        return xi_errf(err, errlen, "sample scratch: out of memory for vocab %d", vocab);
    }
    return 0;
}

void xi_sample_scratch_free(xi_sample_scratch *sc) {
    free(sc->row);
    free(sc->cand);
    free(sc->tmp);
    free(sc->hist);
    free(sc->mass);
    memset(sc, 0, sizeof *sc);
}

/* Greedy: the largest value, lowest id on a tie; NaN never wins. -1 when every value is
 * -inf or NaN. */
static int32_t argmax(const float *x, int n) {
    int32_t best = -1;
    float bv = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > bv) bv = x[i], best = i;
    return best;
}

/* Order-preserving float → uint32 (larger float, larger key); NaN is never passed. */
static inline uint32_t fkey(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

/* k-th largest (1-based) of a[0..n) by quickselect; permutes a. Median-of-three pivots and a
 * three-way split keep logit values (no adversary, many ties) linear. */
static float kth_largest(float *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        float x = a[lo], y = a[mid], z = a[hi];
        float piv = (x > y) ? ((y > z) ? y : (x > z ? z : x)) : ((x > z) ? x : (y > z ? z : y));
        /* descending: [lo, lt) > piv, [lt, i) == piv, (gt, hi] < piv */
        int lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            if (a[i] > piv) {
                float t = a[lt]; a[lt] = a[i]; a[i] = t;
                lt++, i++;
            } else if (a[i] < piv) {
                float t = a[gt]; a[gt] = a[i]; a[i] = t;
                gt--;
            } else {
                i++;
            }
        }
        if (want < lt) hi = lt - 1;
        else if (want > gt) lo = gt + 1;
        else return piv;
    }
    return a[want];
}

/* The k-th largest of x [n] (k < n; x has no NaN). */
static float top_k_value(const float *x, int n, int k, xi_sample_scratch *sc) {
    uint32_t *h = sc->hist;
    memset(h, 0, N_HIST * sizeof *h);
    for (int i = 0; i < n; i++) h[fkey(x[i]) >> HIST_SHIFT]++;
    int b = N_HIST - 1;
    for (uint32_t acc = 0; b > 0 && (acc += h[b]) < (uint32_t)k; b--) {}
    int g = 0;
    for (int i = 0; i < n; i++)
        if ((int)(fkey(x[i]) >> HIST_SHIFT) >= b) sc->tmp[g++] = x[i];
    return kth_largest(sc->tmp, g, k);
}

static int cand_desc(const void *pa, const void *pb) {
    const xi_sample_cand *a = pa, *b = pb;
    if (a->v != b->v) return a->v > b->v ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Top-p over weights w [n] (≥ 0, total z): gathers into sc->cand the smallest prefix in
 * descending order (ties by lowest id) whose mass reaches p · z. Returns its length. */
static int top_p_gather(const float *w, int n, double z, double p, xi_sample_scratch *sc) {
    double target = p * z, *mass = sc->mass;
    memset(mass, 0, N_HIST * sizeof *mass);
    for (int i = 0; i < n; i++)
        if (w[i] > 0) mass[fkey(w[i]) >> HIST_SHIFT] += w[i];
    int b = N_HIST - 1;
    for (double acc = 0; b > 0 && (acc += mass[b]) < target; b--) {}
    xi_sample_cand *c = sc->cand;
    int g = 0;
    for (int i = 0; i < n; i++)
        if (w[i] > 0 && (int)(fkey(w[i]) >> HIST_SHIFT) >= b) c[g++] = (xi_sample_cand){w[i], i};
    qsort(c, (size_t)g, sizeof *c, cand_desc);
    double cum = 0;
    for (int i = 0; i < g; i++)
        if ((cum += c[i].v) >= target) return i + 1;
    return g;
}

int32_t xi_sampler_sample(xi_sampler *s, const float *logits, xi_sample_scratch *sc) {
    return xi_sampler_sample_masked(s, logits, NULL, sc);
}

int32_t xi_sampler_sample_masked(xi_sampler *s, const float *logits, const uint8_t *allow,
                                 xi_sample_scratch *sc) {
    const xi_sampling *p = &s->p;
    int V = XI_MIN(s->vocab, sc->vocab);
    float *x = sc->row;
    memcpy(x, logits, (size_t)V * sizeof *x);
    if (allow)
        for (int i = 0; i < V; i++)
            if (!allow[i]) x[i] = -INFINITY;
    xi_sampler_apply_penalties(s, x, V);
    int32_t top = argmax(x, V);
    if (top < 0 || p->temperature < XI_SAMPLE_GREEDY_EPS) return top;

    float inv_t = 1.0f / p->temperature;
    float m = x[top] * inv_t;
    if (isinf(m)) return top; /* a +inf logit (bias) takes all the mass */
    for (int i = 0; i < V; i++) x[i] = isnan(x[i]) ? -INFINITY : x[i] * inv_t;
    /* Min-p's p_i ≥ min_p · p_max is v_i ≥ v_max + ln(min_p); top-k is v_i ≥ k-th value:
     * both are one threshold in logit space, applied before the softmax. */
    float lo = p->min_p > 0 ? m + logf(p->min_p) : -INFINITY;
    if (p->top_k > 0 && p->top_k < V) lo = fmaxf(lo, top_k_value(x, V, p->top_k, sc));
    /* x becomes the unnormalised probability exp(v - m): the only exp pass. */
    double z = 0;
    for (int i = 0; i < V; i++) {
        float w = x[i] >= lo && x[i] > -INFINITY ? expf(x[i] - m) : 0.0f;
        x[i] = w;
        z += w;
    }
    /* Inverse CDF with the request's own stream, over the top-p prefix or the whole row. */
    if (p->top_p < 1.0f) {
        int n = top_p_gather(x, V, z, p->top_p, sc);
        const xi_sample_cand *c = sc->cand;
        double zp = 0, cum = 0;
        for (int i = 0; i < n; i++) zp += c[i].v;
        double u = xi_rng_uniform(&s->rng) * zp;
        for (int i = 0; i < n; i++)
            if (u < (cum += c[i].v)) return c[i].id;
        return c[n - 1].id; /* u landed on rounding slack at the very top */
    }
    double u = xi_rng_uniform(&s->rng) * z, cum = 0;
    int32_t last = top;
    for (int i = 0; i < V; i++) {
        if (x[i] <= 0) continue;
        last = i;
        if (u < (cum += x[i])) return i;
    }
    return last;
}

/* ==== logprobs ========================================================================== */

int xi_sample_logprobs(const float *logits, int vocab, int32_t token, int n_top,
                       xi_token_logprob *out, xi_top_logprob *top) {
    if (token < 0 || token >= vocab || n_top < 0 || n_top > XI_SAMPLE_MAX_TOP_LOGPROBS ||
        n_top > vocab)
        return -1;
    float m = -INFINITY;
    for (int i = 0; i < vocab; i++)
        if (logits[i] > m) m = logits[i];
    double z = 0;
    for (int i = 0; i < vocab; i++) z += exp((double)logits[i] - m);
    double lse = m + log(z);
    float tv = logits[token];
    int rank = 0;
    for (int i = 0; i < vocab; i++) rank += logits[i] >= tv;
    out->token = token;
    out->logprob = (float)(tv - lse);
    out->rank = rank;
    out->n_top = n_top;
    out->top = top;
    /* Best n_top by insertion into a sorted list of at most 20: one pass, no sort of the row.
     * Strict > keeps the lowest id first among ties. */
    int have = 0;
    for (int i = 0; i < vocab && n_top > 0; i++) {
        float v = logits[i];
        if (have == n_top && !(v > top[have - 1].logprob)) continue;
        int j = have < n_top ? have++ : have - 1;
        while (j > 0 && v > top[j - 1].logprob) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (xi_top_logprob){i, v};
    }
    for (int i = 0; i < have; i++) top[i].logprob = (float)(top[i].logprob - lse);
    return 0;
}

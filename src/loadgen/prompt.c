/* loadgen/prompt: the deterministic workload, prompts and arrival times. A benchmark is only
 * comparable across servers and runs if every run sends the same text at the same moments, so
 * both come from a seeded generator of our own (splitmix64: fixed output on every platform,
 * unlike rand()); prompts draw from a fixed word list. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

/* Frequent English words that the Qwen2.5 (byte-level BPE) and Llama-2 (SentencePiece)
 * vocabularies each hold as one token with a leading space, so N words make N tokens there
 * (tests/test_loadgen.c checks both); large vocabularies of the same kinds behave alike. */
static const char *const words[] = {
    "the", "of", "and", "to", "in", "is", "was", "for", "that", "with", "on", "as", "are",
    "by", "at", "from", "his", "her", "this", "but", "not", "have", "they", "you", "one",
    "all", "were", "which", "can", "more", "time", "people", "year", "new", "first", "good",
    "water", "day", "work", "life", "world", "house", "city", "school", "family", "state",
    "country", "place", "part", "point", "hand", "home", "room", "night", "money", "book",
    "name", "story", "music", "game", "food", "car", "road", "river", "tree", "light", "voice",
    "table", "door", "window", "paper", "market", "church", "garden", "field", "army", "war",
    "power", "king", "center", "office", "party", "team", "group", "company",
    "system", "program", "question", "government", "number", "line", "body", "side", "head",
    "eye", "face", "fact", "case", "week", "month", "morning", "history", "business", "service",
    "small", "large", "great", "little", "old", "young", "long", "high", "big", "black",
    "white", "red", "green", "blue", "open", "free", "full", "early", "late", "real", "best",
    "right", "left", "strong", "clear", "simple", "local", "public", "social", "human",
    "make", "take", "give", "find", "tell", "ask", "feel", "leave", "call", "keep", "bring",
    "begin", "show", "hear", "play", "run", "move", "live", "believe", "write", "read", "learn",
    "change", "follow", "stop", "speak", "walk", "win", "build", "stay", "fall", "reach",
    "send", "rise", "hold", "turn", "start", "help", "look", "come", "went", "said", "made",
    "found", "told", "became", "felt", "kept", "never", "always", "often", "again",
    "still", "here", "there", "where", "when", "then", "now", "very", "just", "also", "only",
    "well", "even", "back", "over", "under", "after", "before", "about", "between", "during",
    "without", "around", "through", "into", "across", "against", "along", "behind", "near",
    "art", "science", "nature", "animal", "bird", "fish", "horse", "dog", "stone",
    "wood", "fire", "snow", "rain", "wind", "sun", "moon", "star", "sea", "island", "mountain",
    "valley", "village", "bridge", "station", "train", "ship", "plane", "letter", "word",
    "song", "picture", "film", "chair", "bed", "kitchen", "bread", "milk", "tea",
};

size_t xi_loadgen_word_count(void) { return XI_ARRAY_LEN(words); }

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One generator state per (seed, stream, index): mixing the three through splitmix64 keeps
 * neighbouring indices unrelated without any global state, so prompts can be made in any
 * order and from any thread. */
static uint64_t rng_state(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t s = seed;
    uint64_t a = splitmix64(&s);
    s = a ^ (stream * 0xd1342543de82ef95ull);
    uint64_t b = splitmix64(&s);
    s = b ^ (index * 0xa0761d6478bd642full);
    return splitmix64(&s);
}

/* Uniform in [0, n) without modulo bias worth caring about: n is tiny next to 2^64. */
static uint64_t below(uint64_t *s, uint64_t n) {
    return (uint64_t)(((unsigned __int128)splitmix64(s) * n) >> 64);
}

int xi_loadgen_words(xi_buf *out, uint64_t seed, uint64_t stream, uint64_t index, int n_words) {
    uint64_t s = rng_state(seed, stream, index);
    for (int i = 0; i < n_words; i++) {
        const char *w = words[below(&s, XI_ARRAY_LEN(words))];
        /* A leading space on every word, the first included: the token boundaries then do not
         * depend on where the word sits, and a prefix joins a suffix without merging words. */
        if (xi_buf_append(out, " ", 1) || xi_buf_append(out, w, strlen(w))) return -1;
    }
    if (!out->data && xi_buf_append(out, "", 0)) return -1;
    return 0;
}

/* Streams keep the parts independent: the prefix uses stream 0 (identical for every level and
 * request), unique parts use 1 + level, lengths use a separate tag. Levels get their own
 * prompts so that a prefix cache warmed by one level cannot answer a later level's whole
 * prompt; only the intended shared prefix is reused. */
#define STREAM_PREFIX 0
#define STREAM_LENGTH 0x4c454e47ull

char *xi_loadgen_prompt(uint64_t seed, int level, int index, int prefix_words, int prompt_words) {
    xi_buf b = {0};
    if (xi_loadgen_words(&b, seed, STREAM_PREFIX, 0, prefix_words) ||
        xi_loadgen_words(&b, seed, 1 + (uint64_t)level, (uint64_t)index, prompt_words)) {
        xi_buf_free(&b);
        return NULL;
    }
    return b.data;
}

int xi_loadgen_prompt_len(uint64_t seed, int level, int index, int lo, int hi) {
    if (hi <= lo) return lo;
    uint64_t s = rng_state(seed, STREAM_LENGTH + (uint64_t)level, (uint64_t)index);
    return lo + (int)below(&s, (uint64_t)(hi - lo + 1));
}

/* ---- arrival times ----------------------------------------------------------------------- */

#define STREAM_ARRIVAL 0x41525256ull

/* Uniform in (0, 1): 53 random bits, never 0, so logarithms stay finite. */
static double unit_open(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) * 0x1p-53; }

static double std_normal(uint64_t *s) { /* Box-Muller, one of the pair */
    const double u = unit_open(s), v = unit_open(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(shape k, scale 1) by Marsaglia and Tsang's squeeze; k < 1 through Gamma(k + 1)
 * times U^(1/k). */
static double gamma1(uint64_t *s, double k) {
    if (k < 1.0) return gamma1(s, k + 1.0) * pow(unit_open(s), 1.0 / k);
    const double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        const double z = std_normal(s), v0 = 1.0 + c * z;
        if (v0 <= 0.0) continue;
        const double v = v0 * v0 * v0, u = unit_open(s);
        if (log(u) < 0.5 * z * z + d - d * v + d * log(v)) return d * v;
    }
}

void xi_loadgen_arrivals(uint64_t seed, int level, int n, double rate, double burstiness,
                         double *t) {
    uint64_t s = rng_state(seed, STREAM_ARRIVAL + (uint64_t)level, 0);
    double at = 0.0;
    for (int i = 0; i < n; i++) {
        t[i] = at; /* the first request goes at once, as in vLLM's benchmark */
        if (!isfinite(rate)) continue;
        at += gamma1(&s, burstiness) / (rate * burstiness);
    }
}

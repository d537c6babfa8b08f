/* loadgen/prompt: deterministic prompts. A benchmark is only comparable across servers and
 * runs if every run sends the same text, so prompts come from a seeded generator of our own
 * (splitmix64: fixed output on every platform, unlike rand()) over a fixed word list. */
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

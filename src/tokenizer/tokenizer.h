/* tokenizer: Hugging Face tokenizer.json (byte-level BPE as in GPT-2 / Qwen2 / Llama-3, and
 * SentencePiece-style BPE with byte fallback as in Llama-2), or a GPT-2 style folder with
 * vocab.json + merges.txt.
 *
 * Thread-safety: a loaded tokenizer is immutable; every function taking a const xi_tokenizer
 * may be called from many threads at once (regex match data and BPE work space are per call).
 * An xi_detok belongs to one thread at a time. */
#ifndef XI_TOKENIZER_H
#define XI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct xi_tokenizer xi_tokenizer;

/* dir holds tokenizer.json (+ tokenizer_config.json), or vocab.json + merges.txt. */
xi_tokenizer *xi_tokenizer_load(const char *dir, char *err, size_t errlen);
void xi_tokenizer_free(xi_tokenizer *t);

/* Highest id + 1, added tokens included. */
int xi_tokenizer_vocab_size(const xi_tokenizer *t);

/* Text to ids. Returns the count (>= 0) and a malloc'ed *ids (free it), or -1 with err
 * (invalid UTF-8 input names the byte offset). add_special: prepend BOS etc. per the
 * tokenizer's post-processor, else tokenizer_config.json add_bos_token (never both; for the
 * Llama and Gemma tokenizer classes add_bos_token / add_eos_token win, as in transformers).
 * parse_special: text that spells a special added token becomes that token; non-special
 * added tokens are always matched, as in Hugging Face and llama.cpp. */
int xi_tokenizer_encode(const xi_tokenizer *t, const char *text, size_t len, int add_special,
                        int parse_special, int32_t **ids, char *err, size_t errlen);
/* The same, but it may stop once more than max_ids ids are certain: a count <= max_ids is the
 * exact encoding; a count > max_ids only says "more than max_ids" (*ids is then a prefix of
 * the encoding, or NULL when the length of the text alone decided it). */
int xi_tokenizer_encode_limit(const xi_tokenizer *t, const char *text, size_t len, int add_special,
                              int parse_special, int max_ids, int32_t **ids, char *err, size_t errlen);

/* Ids to malloc'ed NUL-terminated text (invalid UTF-8 byte runs become U+FFFD); NULL with err
 * for an id out of range. skip_special drops special tokens. *out_len may be NULL. */
char *xi_tokenizer_decode(const xi_tokenizer *t, const int32_t *ids, int n, int skip_special,
                          size_t *out_len, char *err, size_t errlen);

int32_t xi_tokenizer_bos_id(const xi_tokenizer *t); /* -1 when none */
int32_t xi_tokenizer_eos_id(const xi_tokenizer *t); /* -1 when none */
/* Id of a vocabulary or added token spelled exactly as stored ("Ġthe", "<|im_end|>"), or -1. */
int32_t xi_tokenizer_token_id(const xi_tokenizer *t, const char *token);
/* Raw vocabulary string of an id (byte-level / ▁ form), NULL when out of range or a hole. */
const char *xi_tokenizer_token(const xi_tokenizer *t, int32_t id);
int xi_tokenizer_is_special(const xi_tokenizer *t, int32_t id);
/* tokenizer_config.json chat_template (a string, or the "default" entry of a list), or NULL. */
/* The raw bytes token id adds to decoded text, appended to out (no leading-space strip; a
 * byte-fallback token is its one byte). -1 on OOM. */
int xi_token_bytes(const xi_tokenizer *t, int32_t id, xi_buf *out);
const char *xi_tokenizer_chat_template(const xi_tokenizer *t);
/* bos_token / eos_token strings of tokenizer_config.json, "" when absent. */
const char *xi_tokenizer_bos_token(const xi_tokenizer *t);
const char *xi_tokenizer_eos_token(const xi_tokenizer *t);

/* Incremental detokenizer for streaming. The concatenation of every delta (and of the final
 * xi_detok_flush) equals xi_tokenizer_decode() of all pushed ids. It plays the role of vLLM's
 * prefix/read offsets without re-decoding windows: decoding is a pure byte concatenation (plus the
 * SentencePiece leading-space strip, which only touches the first byte of the whole text), so the
 * state is just the bytes of a UTF-8 character not yet complete. A character split across byte
 * tokens is emitted once its last byte arrives; a byte run that can never complete is emitted as
 * U+FFFD as soon as that is certain. */
typedef struct xi_detok {
    const xi_tokenizer *tok; /* borrowed */
    int skip_special;
    int at_start; /* no byte produced yet: the leading-space strip is still due */
    int n_pending;
    unsigned char pending[4]; /* [n_pending] bytes of an incomplete UTF-8 character */
} xi_detok;
void xi_detok_init(xi_detok *d, const xi_tokenizer *t, int skip_special);
/* Appends the text that became final to *out; returns bytes appended or -1 (bad id or OOM). */
int xi_detok_push(xi_detok *d, int32_t id, xi_buf *out);
/* At the end of a sequence: bytes of a character that never completed become U+FFFD, as in
 * decode(). Returns bytes appended (0 when nothing was pending) or -1. Streaming servers may
 * skip it (vLLM drops such bytes). */
int xi_detok_flush(xi_detok *d, xi_buf *out);
/* Tell the detokenizer what text precedes the ids it will see (the prompt), so that the
 * first generated token keeps its word-initial space, as vLLM's incremental detokenizer
 * does: decode(prompt + generated) - decode(prompt). Nothing is emitted. */
void xi_detok_prime(xi_detok *d, const int32_t *prompt, int n);
void xi_detok_free(xi_detok *d);

#ifdef XI_TOKENIZER_INTERNAL
/* ---- Shared by the files of src/tokenizer only. ---- */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* String -> id hash map over borrowed strings (open addressing, power-of-two slots). */
typedef struct xi_strmap {
    uint32_t *slots; /* [cap] id + 1, 0 = empty; owned */
    uint32_t cap;
    char *const *keys;        /* borrowed: keys[id] */
    const uint32_t *key_lens; /* borrowed: key_lens[id] */
} xi_strmap;

/* (left id, right id) -> merge rank and merged id. */
typedef struct xi_merge_slot {
    uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t id;
} xi_merge_slot;

typedef struct xi_added_token {
    char *content; /* owned */
    uint32_t len;
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word;
} xi_added_token;

enum { XI_NORM_UNICODE, XI_NORM_LOWERCASE, XI_NORM_PREPEND, XI_NORM_REPLACE };
typedef struct xi_norm_step {
    int kind;
    int utf8proc_options; /* Unicode: NFC, NFD, NFKC or NFKD as utf8proc_map options */
    char *a, *b;          /* Prepend: a = text; Replace: a = pattern, b = content; owned */
} xi_norm_step;

enum { XI_PRE_SPLIT, XI_PRE_BYTELEVEL, XI_PRE_METASPACE };
enum {
    XI_SPLIT_ISOLATED,
    XI_SPLIT_REMOVED,
    XI_SPLIT_MERGED_PREV,
    XI_SPLIT_MERGED_NEXT,
    XI_SPLIT_CONTIGUOUS
};
typedef struct xi_pre_step {
    int kind;
    pcre2_code *re; /* Split, ByteLevel with use_regex; owned */
    int behavior;   /* XI_SPLIT_* */
    int invert;
    int add_prefix_space; /* ByteLevel */
    int prepend;          /* Metaspace: 0 never, 1 always, 2 first */
    int split;            /* Metaspace */
} xi_pre_step;

struct xi_tokenizer {
    int n_vocab;           /* highest id + 1 */
    char **tokens;         /* [n_vocab] NUL-terminated strings, NULL for holes; owned */
    uint32_t *token_lens;  /* [n_vocab] */
    uint8_t *special;      /* [n_vocab] 1 for special added tokens */
    uint8_t *added;        /* [n_vocab] 1 for added tokens (decoded verbatim) */
    xi_strmap vocab;       /* tokens -> id */
    xi_merge_slot *merges; /* [merge_cap] owned */
    uint32_t merge_cap;
    xi_added_token *added_list; /* [n_added] owned */
    int n_added;
    int32_t *added_first; /* [257]: added_list is sorted by first byte then length desc;
                             entries of first byte c are [added_first[c], added_first[c+1]) */

    xi_norm_step norm[8];
    int n_norm;
    xi_pre_step pre[8];
    int n_pre;

    int byte_level;        /* model strings are GPT-2 bytes_to_unicode text */
    int byte_fallback;     /* unknown characters become <0xNN> tokens */
    int32_t byte_ids[256]; /* <0xNN> ids, -1 when absent */
    int32_t unk_id;
    int fuse_unk;
    int ignore_merges;       /* a word already in the vocabulary is not merged */
    int strip_leading_space; /* decoder removes one leading space (SentencePiece) */
    int decode_metaspace;    /* decoder turns U+2581 into a space */

    int32_t prefix_ids[4]; /* ids the post-processor puts before the text */
    int n_prefix;
    int32_t suffix_ids[4];
    int n_suffix;
    int32_t bos_id, eos_id;
    char *bos_token, *eos_token; /* owned, "" when absent */
    char *chat_template;         /* owned or NULL */
};

/* tokenizer.c: a tokenizer from an in-memory tokenizer.json root and tokenizer_config.json
 * object (cfg may be NULL), as tokenizer_gguf.c builds them from GGUF metadata. */
struct json_t;
xi_tokenizer *xi_tokenizer_from_json(const struct json_t *root, const struct json_t *cfg,
                                     char *err, size_t errlen);

/* vocab.c */
int xi_strmap_init(xi_strmap *m, char *const *keys, const uint32_t *lens, int n);
int32_t xi_strmap_get(const xi_strmap *m, const char *s, size_t len);
void xi_strmap_free(xi_strmap *m);
int xi_merges_init(xi_tokenizer *t, uint32_t n);
int xi_merges_add(xi_tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t id);
const xi_merge_slot *xi_merges_get(const xi_tokenizer *t, int32_t left, int32_t right);

/* pretok.c: GPT-2 bytes_to_unicode. */
void xi_byte_level_init(void);
/* UTF-8 of the code point byte b maps to: out gets 1-2 bytes; returns the count. */
int xi_byte_level_encode(unsigned char b, char out[2]);
/* Byte a code point maps back to, or -1 when it is not in the table. */
int xi_byte_level_decode(uint32_t cp);
/* Per-call regex state (match data, JIT stack), created on first use by xi_pretok_run and
 * reused across the segments of one encode call. Zero-initialise; free with _free. */
typedef struct xi_regex_ws {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
} xi_regex_ws;
void xi_regex_ws_free(xi_regex_ws *w);
/* Normalise then pre-tokenise text[0..len) into words stored back to back in words->data;
 * word i spans [i ? ends[i-1] : 0, ends[i]) (*ends malloc'ed, [*n_words]). at_start: text
 * begins the input (not after an added token), for Metaspace's prepend_scheme "first". */
int xi_pretok_run(const xi_tokenizer *t, const char *text, size_t len, int at_start,
                  xi_regex_ws *ws, xi_buf *words, size_t **ends, int *n_words, char *err,
                  size_t errlen);
/* literal: the pattern is plain text (Split with a String pattern). */
pcre2_code *xi_regex_compile(const char *pattern, int literal, char *err, size_t errlen);

/* bpe.c: ids of one pre-tokenised word appended to *ids (grows *cap). */
int xi_bpe_word(const xi_tokenizer *t, const char *word, size_t len, int32_t **ids, int *n,
                int *cap);

/* Length of the longest prefix of a UTF-8 continuation that could still complete: returns how
 * many trailing bytes of s[0..len) form a valid but incomplete character (0 when none). */
int xi_utf8_incomplete_tail(const unsigned char *s, size_t len);
/* Offset of the first invalid or truncated byte of s[0..len), or -1 when all is valid. */
long xi_utf8_first_invalid(const unsigned char *s, size_t len);
/* Append s[0..len) to out with invalid UTF-8 replaced by U+FFFD. */
int xi_utf8_append_lossy(xi_buf *out, const unsigned char *s, size_t len);
#endif

#endif

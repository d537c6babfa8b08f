/* tokenizer/tokenizer_gguf: GGUF tokenizer metadata turned into the tokenizer.json and
 * tokenizer_config.json a Hugging Face conversion of the same model would have, then loaded by
 * the one tokenizer.json path, so encode and decode are the code every folder model uses.
 *
 * SentencePiece ("llama"): GGUF stores pieces with scores, no merges. SentencePiece's BPE
 * merges the adjacent pair whose concatenation is the highest-scoring piece, leftmost first;
 * BPE with merges ranked by that piece's score does the same, so the merges are made from the
 * scores (every split of a piece into two pieces, ranked by the piece's score, as
 * transformers' converter does). Pieces of equal score are ranked by id. */
#define XI_TOKENIZER_INTERNAL
#include "tokenizer/tokenizer_gguf.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's token types. */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static const char qwen2_re[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                               "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char llama3_re[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
                                "|\\s+(?!\\S)|\\s+";

typedef struct gg_vocab {
    int n;
    char **tok;        /* [n] NUL-terminated copies; owned */
    uint32_t *len;     /* [n] */
    int32_t *type;     /* [n] token types (TT_NORMAL when the file has none) */
    float *score;      /* [n] or NULL */
} gg_vocab;

static void vocab_free(gg_vocab *v) {
    for (int i = 0; v->tok && i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->len);
    free(v->type);
    free(v->score);
}

static const xi_gguf_kv *arr_kv(const xi_gguf *g, const char *key, int str, uint64_t n,
                                char *err, size_t errlen) {
    const xi_gguf_kv *kv = xi_gguf_find_kv(g, key);
    if (!kv) return NULL;
    int ok = kv->type == XI_GGUF_ARR && (str ? kv->arr_type == XI_GGUF_STR
                                             : kv->arr_type != XI_GGUF_STR);
    if (!ok || (n && kv->n != n)) {
        xi_errf(err, errlen, "key %s: expected an array of %llu %s", key, (unsigned long long)n,
                str ? "strings" : "numbers");
        return NULL;
    }
    return kv;
}

static int read_vocab(const xi_gguf *g, gg_vocab *v, char *err, size_t errlen) {
    const xi_gguf_kv *toks = arr_kv(g, "tokenizer.ggml.tokens", 1, 0, err, errlen);
    if (!toks) return err[0] ? -1 : xi_errf(err, errlen, "no tokenizer.ggml.tokens");
    if (toks->n == 0 || toks->n >= (1u << 24))
        return xi_errf(err, errlen, "key tokenizer.ggml.tokens: %llu tokens",
                       (unsigned long long)toks->n);
    v->n = (int)toks->n;
    v->tok = xi_calloc((size_t)v->n, sizeof *v->tok);
    v->len = xi_calloc((size_t)v->n, sizeof *v->len);
    v->type = xi_calloc((size_t)v->n, sizeof *v->type);
    if (!v->tok || !v->len || !v->type) return xi_errf(err, errlen, "out of memory");
    err[0] = 0;
    const xi_gguf_kv *types = arr_kv(g, "tokenizer.ggml.token_type", 0, toks->n, err, errlen);
    const xi_gguf_kv *scores = arr_kv(g, "tokenizer.ggml.scores", 0, toks->n, err, errlen);
    if (err[0]) return -1;
    if (scores && !(v->score = malloc((size_t)v->n * sizeof *v->score)))
        return xi_errf(err, errlen, "out of memory");
    for (int i = 0; i < v->n; i++) {
        uint64_t len;
        const char *s = xi_gguf_arr_str(toks, (uint64_t)i, &len);
        if (len > 65535 || memchr(s, 0, (size_t)len))
            return xi_errf(err, errlen, "key tokenizer.ggml.tokens: token %d is not text", i);
        if (!(v->tok[i] = xi_strndup(s, (size_t)len))) return xi_errf(err, errlen, "out of memory");
        v->len[i] = (uint32_t)len;
        v->type[i] = types ? (int32_t)xi_gguf_arr_i64(types, (uint64_t)i) : TT_NORMAL;
        if (v->score) v->score[i] = (float)xi_gguf_arr_f64(scores, (uint64_t)i);
    }
    return 0;
}

/* ---- JSON building (jansson's *_new return NULL on OOM; set_new steals and tolerates it) ---- */

static int jset(json_t *o, const char *k, json_t *v) { return json_object_set_new(o, k, v); }

static json_t *vocab_json(const gg_vocab *v) {
    json_t *o = json_object();
    for (int i = 0; o && i < v->n; i++)
        if (json_object_setn_new_nocheck(o, v->tok[i], v->len[i], json_integer(i))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* Control, unknown and user-defined pieces are added tokens (user-defined ones not special):
 * matched whole in the text before the model splits it, as llama.cpp does. */
static json_t *added_json(const gg_vocab *v) {
    json_t *a = json_array();
    for (int i = 0; a && i < v->n; i++) {
        int t = v->type[i];
        if ((t != TT_CONTROL && t != TT_UNKNOWN && t != TT_USER_DEFINED) || !v->len[i]) continue;
        json_t *e = json_pack("{s:i, s:s%, s:b}", "id", i, "content", v->tok[i],
                              (size_t)v->len[i], "special", t != TT_USER_DEFINED);
        if (json_array_append_new(a, e)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* ---- SentencePiece: merges from scores ---- */

typedef struct ranked {
    float score;
    int id;
} ranked;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static json_t *spm_merges(const gg_vocab *v, char *err, size_t errlen) {
    xi_strmap map;
    ranked *order = malloc((size_t)v->n * sizeof *order);
    json_t *merges = json_array();
    if (!order || !merges || xi_strmap_init(&map, v->tok, v->len, v->n)) {
        free(order);
        json_decref(merges);
        xi_errf(err, errlen, "out of memory");
        return NULL;
    }
    int n = 0;
    for (int i = 0; i < v->n; i++)
        if (v->type[i] == TT_NORMAL || v->type[i] == TT_USER_DEFINED)
            order[n++] = (ranked){v->score ? v->score[i] : -(float)i, i};
    qsort(order, (size_t)n, sizeof *order, cmp_ranked);
    for (int r = 0; r < n && merges; r++) {
        const char *s = v->tok[order[r].id];
        uint32_t len = v->len[order[r].id];
        for (uint32_t p = 1; p < len; p++) {
            if (((unsigned char)s[p] & 0xC0) == 0x80) continue; /* split at characters only */
            if (xi_strmap_get(&map, s, p) < 0 || xi_strmap_get(&map, s + p, len - p) < 0) continue;
            json_t *pair = json_pack("[s%, s%]", s, (size_t)p, s + p, (size_t)(len - p));
            if (json_array_append_new(merges, pair)) {
                json_decref(merges);
                merges = NULL;
                break;
            }
        }
    }
    xi_strmap_free(&map);
    free(order);
    if (!merges) xi_errf(err, errlen, "out of memory");
    return merges;
}

/* ---- the two models ---- */

static json_t *pretok_json(const char *pre, char *err, size_t errlen) {
    static const struct {
        const char *name;
        const char *re; /* NULL: GPT-2's ByteLevel regex */
    } pres[] = {
        {"default", NULL},  {"gpt2", NULL},      {"gpt-2", NULL},   {"qwen2", qwen2_re},
        {"deepseek-r1-qwen", qwen2_re},          {"llama3", llama3_re},
        {"llama-bpe", llama3_re}, {"llama-v3", llama3_re},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(pres); i++) {
        if (strcmp(pre, pres[i].name)) continue;
        if (!pres[i].re)
            return json_pack("{s:s, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                             "use_regex", 1);
        return json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type",
                         "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
                         pres[i].re, "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
                         "add_prefix_space", 0, "use_regex", 0);
    }
    xi_errf(err, errlen, "key tokenizer.ggml.pre: pre-tokenizer '%s' is not supported (qwen2, "
            "llama-bpe / llama3, gpt-2 / default are)", pre);
    return NULL;
}

static int build_gpt2(const xi_gguf *g, json_t *root, json_t *model,
                      char *err, size_t errlen) {
    const xi_gguf_kv *mk = arr_kv(g, "tokenizer.ggml.merges", 1, 0, err, errlen);
    if (!mk) return err[0] ? -1 : xi_errf(err, errlen, "gpt2 tokenizer without tokenizer.ggml.merges");
    json_t *merges = json_array();
    for (uint64_t i = 0; merges && i < mk->n; i++) {
        uint64_t len;
        const char *s = xi_gguf_arr_str(mk, i, &len);
        if (json_array_append_new(merges, json_stringn_nocheck(s, (size_t)len))) {
            json_decref(merges);
            merges = NULL;
        }
    }
    const char *pre = xi_gguf_get_str(g, "tokenizer.ggml.pre");
    json_t *pt = pretok_json(pre ? pre : "default", err, errlen);
    int is_qwen = pre && strstr(pre, "qwen");
    if (!merges || !pt) {
        json_decref(merges);
        json_decref(pt);
        return err[0] ? -1 : xi_errf(err, errlen, "out of memory");
    }
    jset(model, "merges", merges);
    jset(model, "byte_fallback", json_false());
    jset(root, "pre_tokenizer", pt);
    /* Qwen's tokenizer.json normalises to NFC; llama.cpp does not, transformers does. */
    if (is_qwen) jset(root, "normalizer", json_pack("{s:s}", "type", "NFC"));
    jset(root, "decoder", json_pack("{s:s}", "type", "ByteLevel"));
    return 0;
}

static int build_llama(const xi_gguf *g, const gg_vocab *v, json_t *root, json_t *model,
                       char *err, size_t errlen) {
    json_t *merges = spm_merges(v, err, errlen);
    if (!merges) return -1;
    int space = 1;
    xi_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &space);
    int64_t unk = -1;
    if (xi_gguf_get_i64(g, "tokenizer.ggml.unknown_token_id", &unk) || unk < 0 || unk >= v->n)
        for (int i = 0; i < v->n && unk < 0; i++)
            if (v->type[i] == TT_UNKNOWN) unk = i;
    jset(model, "merges", merges);
    jset(model, "byte_fallback", json_true());
    jset(model, "fuse_unk", json_true());
    if (unk >= 0) jset(model, "unk_token", json_stringn_nocheck(v->tok[unk], v->len[unk]));
    json_t *replace = json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ",
                                "content", "\xe2\x96\x81");
    json_t *norm = space ? json_pack("{s:s, s:[{s:s, s:s}, o]}", "type", "Sequence", "normalizers",
                                     "type", "Prepend", "prepend", "\xe2\x96\x81", replace)
                         : replace;
    jset(root, "normalizer", norm);
    jset(root, "decoder",
         json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}", "type",
                   "Sequence", "decoders", "type", "Replace", "pattern", "String", "\xe2\x96\x81",
                   "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip",
                   "content", " ", "start", space, "stop", 0));
    return 0;
}

/* tokenizer_config.json's part: special token strings, add_bos/add_eos, chat template. */
static json_t *config_json(const xi_gguf *g, const gg_vocab *v, int add_bos_default) {
    json_t *cfg = json_object();
    static const char *const ids[2][2] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
                                          {"tokenizer.ggml.eos_token_id", "eos_token"}};
    for (int k = 0; cfg && k < 2; k++) {
        int64_t id;
        if (!xi_gguf_get_i64(g, ids[k][0], &id) && id >= 0 && id < v->n)
            jset(cfg, ids[k][1], json_stringn_nocheck(v->tok[id], v->len[id]));
    }
    int add_bos = add_bos_default, add_eos = 0;
    xi_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos);
    xi_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos);
    jset(cfg, "add_bos_token", json_boolean(add_bos));
    jset(cfg, "add_eos_token", json_boolean(add_eos));
    const char *tmpl = xi_gguf_get_str(g, "tokenizer.chat_template");
    if (tmpl) jset(cfg, "chat_template", json_string_nocheck(tmpl));
    return cfg;
}

xi_tokenizer *xi_tokenizer_load_gguf(const xi_gguf *g, char *err, size_t errlen) {
    const char *kind = xi_gguf_get_str(g, "tokenizer.ggml.model");
    if (!kind) {
        xi_errf(err, errlen, "GGUF tokenizer: no tokenizer.ggml.model");
        return NULL;
    }
    int spm = !strcmp(kind, "llama");
    if (!spm && strcmp(kind, "gpt2")) {
        xi_errf(err, errlen, "GGUF tokenizer: tokenizer.ggml.model '%s' is not supported (gpt2 "
                "and llama are)", kind);
        return NULL;
    }
    gg_vocab v = {0};
    xi_tokenizer *t = NULL;
    json_t *root = json_object(), *model = json_object(), *cfg = NULL;
    err[0] = 0;
    if (!root || !model || read_vocab(g, &v, err, errlen)) goto out;
    jset(model, "type", json_string("BPE"));
    jset(model, "vocab", vocab_json(&v));
    jset(root, "added_tokens", added_json(&v));
    if (!json_object_get(model, "vocab") || !json_object_get(root, "added_tokens")) {
        xi_errf(err, errlen, "out of memory");
        goto out;
    }
    if (spm ? build_llama(g, &v, root, model, err, errlen)
            : build_gpt2(g, root, model, err, errlen))
        goto out;
    jset(root, "model", model);
    model = NULL;
    if (!(cfg = config_json(g, &v, spm))) {
        xi_errf(err, errlen, "out of memory");
        goto out;
    }
    t = xi_tokenizer_from_json(root, cfg, err, errlen);
out:
    if (!t) xi_err_prefix(err, errlen, "GGUF tokenizer (%s)", kind);
    json_decref(model);
    json_decref(root);
    json_decref(cfg);
    vocab_free(&v);
    return t;
}

xi_tokenizer *xi_tokenizer_load_model(const char *path, char *err, size_t errlen) {
    if (!xi_gguf_is_file(path)) return xi_tokenizer_load(path, err, errlen);
    xi_gguf *g = xi_gguf_open(path, err, errlen);
    xi_tokenizer *t = g ? xi_tokenizer_load_gguf(g, err, errlen) : NULL;
    if (g && !t) xi_err_prefix(err, errlen, "%s", path);
    xi_gguf_close(g);
    return t;
}

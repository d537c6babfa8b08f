/* tokenizer: loading tokenizer.json / tokenizer_config.json (or vocab.json + merges.txt),
 * encode (added tokens, then normalise, pre-tokenise, BPE) and decode. */
#define XI_TOKENIZER_INTERNAL
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* GPT-2's pre-tokenizer regex, used by ByteLevel with use_regex and by vocab.json folders. */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Qwen2's, for a Qwen2Tokenizer folder without tokenizer.json. */
static const char qwen2_regex[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                                  "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                  "|\\p{N}"
                                  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                                  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ---- JSON helpers ---- */

static json_t *load_json(const char *dir, const char *name, int required, char *err,
                         size_t errlen) {
    char *path = xi_path_join(dir, name);
    if (!path) {
        xi_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (!required && !xi_file_exists(path)) {
        free(path);
        return NULL;
    }
    /* One read and json_loadb: json_load_file reads with getc, several times slower on the
     * multi-megabyte vocabularies. */
    size_t len;
    char *text = xi_read_file(path, &len, err, errlen);
    json_t *j = NULL;
    if (text) {
        json_error_t je;
        j = json_loadb(text, len, JSON_ALLOW_NUL, &je);
        if (!j)
            xi_errf(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
        free(text);
    }
    free(path);
    return j;
}

static const char *jstr(const json_t *o, const char *key) {
    return json_string_value(json_object_get(o, key));
}

static int jbool(const json_t *o, const char *key, int def) {
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* bos_token / eos_token are a string or an AddedToken object {"content": ...}. */
static const char *token_field(const json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

/* ---- vocabulary ---- */

static int grow_vocab(xi_tokenizer *t, int n) {
    if (n <= t->n_vocab) return 0;
    char **tok = realloc(t->tokens, (size_t)n * sizeof *tok);
    if (tok) t->tokens = tok;
    uint32_t *lens = realloc(t->token_lens, (size_t)n * sizeof *lens);
    if (lens) t->token_lens = lens;
    uint8_t *sp = realloc(t->special, (size_t)n);
    if (sp) t->special = sp;
    uint8_t *ad = realloc(t->added, (size_t)n);
    if (ad) t->added = ad;
    if (!tok || !lens || !sp || !ad) return -1;
    for (int i = t->n_vocab; i < n; i++) {
        t->tokens[i] = NULL;
        t->token_lens[i] = 0;
        t->special[i] = t->added[i] = 0;
    }
    t->n_vocab = n;
    return 0;
}

static int set_token(xi_tokenizer *t, json_int_t id, const char *s, size_t len, char *err,
                     size_t errlen) {
    if (id < 0 || id >= (1 << 24))
        return xi_errf(err, errlen, "token '%s': id %lld out of range", s, (long long)id);
    if (grow_vocab(t, (int)id + 1)) return xi_errf(err, errlen, "out of memory");
    if (t->tokens[id]) return 0; /* the first spelling of an id wins */
    t->tokens[id] = xi_strndup(s, len);
    if (!t->tokens[id]) return xi_errf(err, errlen, "out of memory");
    t->token_lens[id] = (uint32_t)len;
    return 0;
}

static int load_vocab(xi_tokenizer *t, const json_t *vocab, const char *where, char *err,
                      size_t errlen) {
    if (!json_is_object(vocab)) return xi_errf(err, errlen, "%s: vocab is not an object", where);
    /* Size the arrays once: ids are usually dense. */
    if (grow_vocab(t, (int)json_object_size(vocab))) return xi_errf(err, errlen, "out of memory");
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach((json_t *)vocab, key, klen, v) {
        if (!json_is_integer(v))
            return xi_errf(err, errlen, "%s: vocab entry '%s' has no integer id", where, key);
        if (set_token(t, json_integer_value(v), key, klen, err, errlen)) return -1;
    }
    return 0;
}

static int add_added_token(xi_tokenizer *t, json_int_t id, const char *content, int special,
                           int lstrip, int rstrip, int single_word, char *err, size_t errlen) {
    if (!content || !*content)
        return xi_errf(err, errlen, "added token %lld has no content", (long long)id);
    if (set_token(t, id, content, strlen(content), err, errlen)) return -1;
    for (int i = 0; i < t->n_added; i++)
        if (t->added_list[i].id == id) return 0;
    xi_added_token *a = realloc(t->added_list, (size_t)(t->n_added + 1) * sizeof *a);
    if (!a) return xi_errf(err, errlen, "out of memory");
    t->added_list = a;
    xi_added_token *n = &a[t->n_added];
    n->content = xi_strdup(content);
    if (!n->content) return xi_errf(err, errlen, "out of memory");
    t->n_added++;
    n->len = (uint32_t)strlen(content);
    n->id = (int32_t)id;
    n->special = (uint8_t)special;
    n->lstrip = (uint8_t)lstrip;
    n->rstrip = (uint8_t)rstrip;
    n->single_word = (uint8_t)single_word;
    return 0;
}

static int cmp_added(const void *pa, const void *pb) {
    const xi_added_token *a = pa, *b = pb;
    unsigned char ca = (unsigned char)a->content[0], cb = (unsigned char)b->content[0];
    if (ca != cb) return ca < cb ? -1 : 1;
    return a->len != b->len ? (a->len > b->len ? -1 : 1) : 0;
}

/* Lookup tables that need the whole vocabulary: string map, byte tokens, added-token index. */
static int finish_vocab(xi_tokenizer *t, char *err, size_t errlen) {
    for (int i = 0; i < t->n_added; i++) {
        int32_t id = t->added_list[i].id;
        t->added[id] = 1;
        t->special[id] = t->added_list[i].special;
    }
    if (xi_strmap_init(&t->vocab, t->tokens, t->token_lens, t->n_vocab))
        return xi_errf(err, errlen, "out of memory");
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = xi_strmap_get(&t->vocab, name, 6);
    }
    if (t->n_added) qsort(t->added_list, (size_t)t->n_added, sizeof *t->added_list, cmp_added);
    t->added_first = malloc(257 * sizeof *t->added_first);
    if (!t->added_first) return xi_errf(err, errlen, "out of memory");
    int k = 0;
    for (int c = 0; c < 257; c++) {
        while (k < t->n_added && (unsigned char)t->added_list[k].content[0] < c) k++;
        t->added_first[c] = k;
    }
    return 0;
}

static int add_merge(xi_tokenizer *t, const char *a, size_t al, const char *b, size_t bl,
                     int32_t rank, char *err, size_t errlen) {
    int32_t ia = xi_strmap_get(&t->vocab, a, al), ib = xi_strmap_get(&t->vocab, b, bl);
    char small[256]; /* merges number in the 100 000s: no allocation for the usual short ones */
    char *ab = al + bl <= sizeof small ? small : malloc(al + bl);
    if (!ab) return xi_errf(err, errlen, "out of memory");
    memcpy(ab, a, al);
    memcpy(ab + al, b, bl);
    int32_t iab = xi_strmap_get(&t->vocab, ab, al + bl);
    if (ab != small) free(ab);
    if (ia < 0 || ib < 0 || iab < 0)
        return xi_errf(err, errlen, "merge %d '%.*s %.*s': token not in the vocabulary", (int)rank,
                       (int)al, a, (int)bl, b);
    if (xi_merges_add(t, ia, ib, rank, iab)) return xi_errf(err, errlen, "out of memory");
    return 0;
}

static int load_merges_json(xi_tokenizer *t, const json_t *merges, char *err, size_t errlen) {
    if (!merges) return 0;
    if (!json_is_array(merges)) return xi_errf(err, errlen, "model.merges is not an array");
    if (xi_merges_init(t, (uint32_t)json_array_size(merges)))
        return xi_errf(err, errlen, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(m)) {
            /* "a b": the pieces never contain a space in this form. */
            const char *s = json_string_value(m);
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return xi_errf(err, errlen, "model.merges[%zu] '%s' is not two tokens", i, s);
            a = s;
            al = (size_t)(sp - s);
            b = sp + 1;
            bl = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            al = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            bl = json_string_length(json_array_get(m, 1));
        } else {
            return xi_errf(err, errlen, "model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]",
                           i);
        }
        if (add_merge(t, a, al, b, bl, (int32_t)i, err, errlen)) return -1;
    }
    return 0;
}

/* ---- pipeline description ---- */

static int add_norm(xi_tokenizer *t, const json_t *n, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) return xi_errf(err, errlen, "normalizer without a type");
    if (!strcmp(type, "Sequence")) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(n, "normalizers"), i,
                           c) if (add_norm(t, c, err, errlen)) return -1;
        return 0;
    }
    if (t->n_norm == (int)XI_ARRAY_LEN(t->norm))
        return xi_errf(err, errlen, "too many normalizers");
    xi_norm_step *s = &t->norm[t->n_norm];
    static const struct {
        const char *name;
        int options;
    } forms[] = {
        {"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
        {"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
        {"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
        {"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT},
    };
    for (size_t k = 0; k < XI_ARRAY_LEN(forms); k++)
        if (!strcmp(type, forms[k].name)) {
            s->kind = XI_NORM_UNICODE;
            s->utf8proc_options = forms[k].options;
            t->n_norm++;
            return 0;
        }
    if (!strcmp(type, "Lowercase")) {
        s->kind = XI_NORM_LOWERCASE;
    } else if (!strcmp(type, "Prepend")) {
        s->kind = XI_NORM_PREPEND;
        if (!jstr(n, "prepend"))
            return xi_errf(err, errlen, "Prepend normalizer without 'prepend'");
        s->a = xi_strdup(jstr(n, "prepend"));
    } else if (!strcmp(type, "Replace")) {
        s->kind = XI_NORM_REPLACE;
        const char *pat = jstr(json_object_get(n, "pattern"), "String");
        if (!pat || !jstr(n, "content"))
            return xi_errf(err, errlen, "Replace normalizer: only a String pattern is supported");
        s->a = xi_strdup(pat);
        s->b = xi_strdup(jstr(n, "content"));
    } else {
        return xi_errf(err, errlen, "normalizer '%s' is not supported", type);
    }
    t->n_norm++;
    return 0;
}

static int split_behavior(const char *b) {
    if (!b || !strcmp(b, "Isolated")) return XI_SPLIT_ISOLATED;
    if (!strcmp(b, "Removed")) return XI_SPLIT_REMOVED;
    if (!strcmp(b, "MergedWithPrevious")) return XI_SPLIT_MERGED_PREV;
    if (!strcmp(b, "MergedWithNext")) return XI_SPLIT_MERGED_NEXT;
    if (!strcmp(b, "Contiguous")) return XI_SPLIT_CONTIGUOUS;
    return -1;
}

static int add_pre(xi_tokenizer *t, const json_t *p, char *err, size_t errlen) {
    if (!p || json_is_null(p)) return 0;
    const char *type = jstr(p, "type");
    if (!type) return xi_errf(err, errlen, "pre_tokenizer without a type");
    if (!strcmp(type, "Sequence")) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(p, "pretokenizers"), i,
                           c) if (add_pre(t, c, err, errlen)) return -1;
        return 0;
    }
    if (t->n_pre == (int)XI_ARRAY_LEN(t->pre))
        return xi_errf(err, errlen, "too many pre_tokenizers");
    xi_pre_step *s = &t->pre[t->n_pre];
    memset(s, 0, sizeof *s);
    if (!strcmp(type, "Split")) {
        s->kind = XI_PRE_SPLIT;
        json_t *pat = json_object_get(p, "pattern");
        const char *re = jstr(pat, "Regex"), *lit = jstr(pat, "String");
        if (!re && !lit) return xi_errf(err, errlen, "Split pre_tokenizer without a pattern");
        s->behavior = split_behavior(jstr(p, "behavior"));
        if (s->behavior < 0)
            return xi_errf(err, errlen, "Split behavior '%s' is not supported",
                           jstr(p, "behavior"));
        s->invert = jbool(p, "invert", 0);
        s->re = xi_regex_compile(re ? re : lit, !re, err, errlen);
        if (!s->re) return -1;
    } else if (!strcmp(type, "Digits") || !strcmp(type, "Punctuation") ||
               !strcmp(type, "Whitespace") || !strcmp(type, "WhitespaceSplit")) {
        /* The character-class pre-tokenizers are Splits by a fixed regex. */
        s->kind = XI_PRE_SPLIT;
        const char *re;
        if (type[0] == 'D') {
            re = "\\p{N}";
            s->behavior =
                jbool(p, "individual_digits", 0) ? XI_SPLIT_ISOLATED : XI_SPLIT_CONTIGUOUS;
        } else if (type[0] == 'P') {
            re = "[\\p{P}!-/:-@\\[-`{-~]"; /* Unicode punctuation or any ASCII punctuation */
            s->behavior = split_behavior(jstr(p, "behavior"));
            if (s->behavior < 0)
                return xi_errf(err, errlen, "Punctuation behavior '%s' is not supported",
                               jstr(p, "behavior"));
        } else if (!strcmp(type, "Whitespace")) {
            re = "\\w+|[^\\w\\s]+"; /* keep words and symbol runs, drop the rest */
            s->behavior = XI_SPLIT_REMOVED;
            s->invert = 1;
        } else {
            re = "\\s+";
            s->behavior = XI_SPLIT_REMOVED;
        }
        if (!(s->re = xi_regex_compile(re, 0, err, errlen))) return -1;
    } else if (!strcmp(type, "ByteLevel")) {
        s->kind = XI_PRE_BYTELEVEL;
        s->add_prefix_space = jbool(p, "add_prefix_space", 0);
        if (jbool(p, "use_regex", 1) && !(s->re = xi_regex_compile(gpt2_regex, 0, err, errlen)))
            return -1;
        t->byte_level = 1;
    } else if (!strcmp(type, "Metaspace")) {
        s->kind = XI_PRE_METASPACE;
        const char *scheme = jstr(p, "prepend_scheme");
        s->prepend = scheme ? (!strcmp(scheme, "always")  ? 1
                               : !strcmp(scheme, "first") ? 2
                                                          : 0)
                            : jbool(p, "add_prefix_space", 1);
        s->split = jbool(p, "split", 1);
        const char *rep = jstr(p, "replacement");
        if (rep && strcmp(rep, "\xe2\x96\x81"))
            return xi_errf(err, errlen, "Metaspace replacement '%s' is not supported", rep);
    } else {
        return xi_errf(err, errlen, "pre_tokenizer '%s' is not supported", type);
    }
    t->n_pre++;
    return 0;
}

static int read_decoder(xi_tokenizer *t, const json_t *d, char *err, size_t errlen) {
    if (!d || json_is_null(d)) return 0;
    const char *type = jstr(d, "type");
    if (!type) return xi_errf(err, errlen, "decoder without a type");
    if (!strcmp(type, "Sequence")) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(d, "decoders"), i,
                           c) if (read_decoder(t, c, err, errlen)) return -1;
    } else if (!strcmp(type, "ByteLevel")) {
        t->byte_level = 1;
    } else if (!strcmp(type, "Replace")) {
        const char *pat = jstr(json_object_get(d, "pattern"), "String"), *c = jstr(d, "content");
        if (!pat || !c || strcmp(pat, "\xe2\x96\x81") || strcmp(c, " "))
            return xi_errf(err, errlen, "decoder Replace: only U+2581 -> ' ' is supported");
        t->decode_metaspace = 1;
    } else if (!strcmp(type, "Strip")) {
        const char *c = jstr(d, "content");
        json_int_t start = json_integer_value(json_object_get(d, "start"));
        if (!c || strcmp(c, " ") || start > 1 || json_integer_value(json_object_get(d, "stop")))
            return xi_errf(err, errlen, "decoder Strip: only one leading space is supported");
        t->strip_leading_space = start == 1;
    } else if (!strcmp(type, "Metaspace")) {
        const char *scheme = jstr(d, "prepend_scheme");
        t->decode_metaspace = 1;
        t->strip_leading_space =
            scheme ? strcmp(scheme, "never") != 0 : jbool(d, "add_prefix_space", 1);
    } else if (strcmp(type, "ByteFallback") && strcmp(type, "Fuse")) {
        return xi_errf(err, errlen, "decoder '%s' is not supported", type);
    }
    return 0;
}

/* TemplateProcessing's "single" template: special tokens before $A are the prefix (BOS),
 * after it the suffix. Returns 1 when a template was found. */
static int read_post(xi_tokenizer *t, const json_t *p, char *err, size_t errlen) {
    if (!p || json_is_null(p)) return 0;
    const char *type = jstr(p, "type");
    if (type && !strcmp(type, "Sequence")) {
        size_t i;
        json_t *c;
        int found = 0;
        json_array_foreach(json_object_get(p, "processors"), i, c) {
            int r = read_post(t, c, err, errlen);
            if (r < 0) return -1;
            found |= r;
        }
        return found;
    }
    if (!type || strcmp(type, "TemplateProcessing")) return 0;
    json_t *specials = json_object_get(p, "special_tokens");
    int after = 0;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(p, "single"), i, item) {
        if (json_object_get(item, "Sequence")) {
            after = 1;
            continue;
        }
        const char *name = jstr(json_object_get(item, "SpecialToken"), "id");
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (!name || !json_is_array(ids))
            return xi_errf(err, errlen, "post_processor: special token '%s' has no ids",
                           name ? name : "?");
        size_t k;
        json_t *id;
        json_array_foreach(ids, k, id) {
            int32_t *dst = after ? t->suffix_ids : t->prefix_ids;
            int *n = after ? &t->n_suffix : &t->n_prefix;
            if (*n == 4) return xi_errf(err, errlen, "post_processor: too many special tokens");
            if (!json_is_integer(id))
                return xi_errf(err, errlen, "post_processor: special token '%s' has an id that "
                               "is not an integer", name);
            dst[(*n)++] = (int32_t)json_integer_value(id);
        }
    }
    return 1;
}

/* ---- tokenizer_config.json ---- */

static int read_config(xi_tokenizer *t, const json_t *cfg, int have_template, char *err,
                       size_t errlen) {
    const char *bos = cfg ? token_field(cfg, "bos_token") : NULL;
    const char *eos = cfg ? token_field(cfg, "eos_token") : NULL;
    t->bos_token = xi_strdup(bos ? bos : "");
    t->eos_token = xi_strdup(eos ? eos : "");
    if (!t->bos_token || !t->eos_token) return xi_errf(err, errlen, "out of memory");
    t->bos_id = bos ? xi_strmap_get(&t->vocab, bos, strlen(bos)) : -1;
    t->eos_id = eos ? xi_strmap_get(&t->vocab, eos, strlen(eos)) : -1;
    if (t->bos_id < 0 && t->n_prefix > 0) t->bos_id = t->prefix_ids[0];
    /* A post-processor template already decides BOS; add_bos_token only when there is none,
     * so BOS is never added twice. The exception is transformers' Llama and Gemma tokenizer
     * classes, which rebuild the template from add_bos_token / add_eos_token at load. */
    const char *cls = cfg ? jstr(cfg, "tokenizer_class") : NULL;
    int rebuild = cls && (!strncmp(cls, "LlamaTokenizer", 14) ||
                          !strncmp(cls, "CodeLlamaTokenizer", 18) ||
                          !strncmp(cls, "GemmaTokenizer", 14));
    if (rebuild) t->n_prefix = t->n_suffix = 0;
    if ((!have_template || rebuild) && cfg) {
        if (jbool(cfg, "add_bos_token", rebuild) && t->bos_id >= 0)
            t->prefix_ids[t->n_prefix++] = t->bos_id;
        if (jbool(cfg, "add_eos_token", 0) && t->eos_id >= 0)
            t->suffix_ids[t->n_suffix++] = t->eos_id;
    }
    json_t *ct = cfg ? json_object_get(cfg, "chat_template") : NULL;
    if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_t *found = NULL;
        json_array_foreach(ct, i, e) if (jstr(e, "name") && !strcmp(jstr(e, "name"), "default"))
            found = e;
        ct = json_object_get(found, "template");
    }
    if (json_is_string(ct) && !(t->chat_template = xi_strdup(json_string_value(ct))))
        return xi_errf(err, errlen, "out of memory");
    return 0;
}

/* added_tokens_decoder {"id": {"content", "special", ...}} of tokenizer_config.json. */
static int read_config_added(xi_tokenizer *t, const json_t *cfg, char *err, size_t errlen) {
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(cfg, "added_tokens_decoder"), key, v) {
        if (add_added_token(t, strtoll(key, NULL, 10), jstr(v, "content"), jbool(v, "special", 0),
                            jbool(v, "lstrip", 0), jbool(v, "rstrip", 0),
                            jbool(v, "single_word", 0), err, errlen))
            return -1;
    }
    return 0;
}

/* ---- load ---- */

static int load_tokenizer_json(xi_tokenizer *t, const json_t *root, const json_t *cfg, char *err,
                               size_t errlen) {
    const json_t *model = json_object_get(root, "model");
    const char *type = jstr(model, "type");
    if (!model || (type && strcmp(type, "BPE")) || (!type && !json_object_get(model, "merges")))
        return xi_errf(err, errlen, "tokenizer.json: model type '%s' is not supported (BPE only)",
                       type ? type : "?");
    const char *cs = jstr(model, "continuing_subword_prefix"),
               *ew = jstr(model, "end_of_word_suffix");
    if ((cs && *cs) || (ew && *ew))
        return xi_errf(err, errlen, "tokenizer.json: BPE subword prefix/suffix is not supported");
    if (load_vocab(t, json_object_get(model, "vocab"), "tokenizer.json model", err, errlen))
        return -1;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(root, "added_tokens"), i, a) {
        if (add_added_token(t, json_integer_value(json_object_get(a, "id")), jstr(a, "content"),
                            jbool(a, "special", 0), jbool(a, "lstrip", 0), jbool(a, "rstrip", 0),
                            jbool(a, "single_word", 0), err, errlen))
            return xi_err_prefix(err, errlen, "tokenizer.json added_tokens[%zu]", i);
    }
    if (finish_vocab(t, err, errlen)) return -1;
    if (load_merges_json(t, json_object_get(model, "merges"), err, errlen))
        return xi_err_prefix(err, errlen, "tokenizer.json");
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    t->fuse_unk = jbool(model, "fuse_unk", 0);
    t->ignore_merges = jbool(model, "ignore_merges", 0);
    const char *unk = jstr(model, "unk_token");
    t->unk_id = unk ? xi_strmap_get(&t->vocab, unk, strlen(unk)) : -1;
    if (add_norm(t, json_object_get(root, "normalizer"), err, errlen) ||
        add_pre(t, json_object_get(root, "pre_tokenizer"), err, errlen) ||
        read_decoder(t, json_object_get(root, "decoder"), err, errlen))
        return xi_err_prefix(err, errlen, "tokenizer.json");
    int have_template = read_post(t, json_object_get(root, "post_processor"), err, errlen);
    if (have_template < 0) return xi_err_prefix(err, errlen, "tokenizer.json");
    /* Ids below n_vocab may still be holes (no token), which encode would emit and decode
     * then reject: the post-processor must name real tokens. */
    for (int k = 0; k < t->n_prefix + t->n_suffix; k++) {
        int32_t id = k < t->n_prefix ? t->prefix_ids[k] : t->suffix_ids[k - t->n_prefix];
        if (id < 0 || id >= t->n_vocab || !t->tokens[id])
            return xi_errf(err, errlen, "tokenizer.json post_processor: id %d is not a token of "
                           "the vocabulary", id);
    }
    return read_config(t, cfg, have_template, err, errlen);
}

/* GPT-2 style folder: vocab.json + merges.txt (+ added_tokens.json, tokenizer_config.json). */
static int load_vocab_merges(xi_tokenizer *t, const char *dir, const json_t *cfg, char *err,
                             size_t errlen) {
    json_t *vocab = load_json(dir, "vocab.json", 1, err, errlen);
    if (!vocab) return -1;
    int rc = load_vocab(t, vocab, "vocab.json", err, errlen);
    json_decref(vocab);
    if (rc) return -1;
    if (cfg && read_config_added(t, cfg, err, errlen))
        return xi_err_prefix(err, errlen, "tokenizer_config.json");
    char jerr[512] = "";
    json_t *extra = load_json(dir, "added_tokens.json", 0, jerr, sizeof jerr);
    if (jerr[0]) return xi_errf(err, errlen, "%s", jerr);
    const char *key;
    json_t *v;
    json_object_foreach(extra, key, v) {
        if (add_added_token(t, json_integer_value(v), key, 1, 0, 0, 0, err, errlen)) {
            json_decref(extra);
            return xi_err_prefix(err, errlen, "added_tokens.json");
        }
    }
    json_decref(extra);
    if (finish_vocab(t, err, errlen)) return -1;

    char *path = xi_path_join(dir, "merges.txt");
    size_t len;
    char *text = path ? xi_read_file(path, &len, err, errlen) : NULL;
    free(path);
    if (!text) return -1;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    rc = xi_merges_init(t, (uint32_t)lines) ? xi_errf(err, errlen, "out of memory") : 0;
    int32_t rank = 0;
    for (char *line = text; !rc && line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        char *end = nl ? nl : text + len;
        if (end > line && end[-1] == '\r') end--;
        char *sp = memchr(line, ' ', (size_t)(end - line));
        if (end > line && !(line == text && !strncmp(line, "#version", 8))) {
            if (!sp)
                rc = xi_errf(err, errlen, "merges.txt line %d is not two tokens", rank + 1);
            else
                rc = add_merge(t, line, (size_t)(sp - line), sp + 1, (size_t)(end - sp - 1), rank++,
                               err, errlen);
        }
        line = nl ? nl + 1 : text + len;
    }
    free(text);
    if (rc) return xi_err_prefix(err, errlen, "merges.txt");

    t->byte_level = 1;
    const char *cls = cfg ? jstr(cfg, "tokenizer_class") : NULL;
    xi_pre_step *s = &t->pre[t->n_pre++];
    if (cls && !strncmp(cls, "Qwen2", 5)) {
        t->norm[t->n_norm].kind = XI_NORM_UNICODE;
        t->norm[t->n_norm++].utf8proc_options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
        s->kind = XI_PRE_SPLIT;
        s->behavior = XI_SPLIT_ISOLATED;
        if (!(s->re = xi_regex_compile(qwen2_regex, 0, err, errlen))) return -1;
        s = &t->pre[t->n_pre++];
        s->kind = XI_PRE_BYTELEVEL;
    } else {
        s->kind = XI_PRE_BYTELEVEL;
        s->add_prefix_space = cfg ? jbool(cfg, "add_prefix_space", 0) : 0;
        if (!(s->re = xi_regex_compile(gpt2_regex, 0, err, errlen))) return -1;
    }
    return read_config(t, cfg, 0, err, errlen);
}

static xi_tokenizer *tok_new(char *err, size_t errlen) {
    xi_tokenizer *t = xi_calloc(1, sizeof *t);
    if (!t) {
        xi_errf(err, errlen, "out of memory");
        return NULL;
    }
    xi_byte_level_init();
    t->unk_id = t->bos_id = t->eos_id = -1;
    return t;
}

xi_tokenizer *xi_tokenizer_load(const char *dir, char *err, size_t errlen) {
    xi_tokenizer *t = tok_new(err, errlen);
    if (!t) return NULL;
    char cfg_err[512] = "";
    json_t *cfg = load_json(dir, "tokenizer_config.json", 0, cfg_err, sizeof cfg_err);
    int rc;
    if (cfg_err[0]) {
        rc = xi_errf(err, errlen, "%s", cfg_err);
    } else {
        char *tj = xi_path_join(dir, "tokenizer.json");
        int have_tj = tj && xi_file_exists(tj);
        free(tj);
        json_t *root = have_tj ? load_json(dir, "tokenizer.json", 1, err, errlen) : NULL;
        if (have_tj) {
            rc = root ? load_tokenizer_json(t, root, cfg, err, errlen) : -1;
        } else {
            char *vj = xi_path_join(dir, "vocab.json");
            int have_vj = vj && xi_file_exists(vj);
            free(vj);
            rc = have_vj ? load_vocab_merges(t, dir, cfg, err, errlen)
                         : xi_errf(err, errlen, "%s: no tokenizer.json or vocab.json + merges.txt",
                                   dir);
        }
        json_decref(root);
    }
    json_decref(cfg);
    if (rc) {
        xi_tokenizer_free(t);
        return NULL;
    }
    return t;
}

xi_tokenizer *xi_tokenizer_from_json(const json_t *root, const json_t *cfg, char *err,
                                     size_t errlen) {
    xi_tokenizer *t = tok_new(err, errlen);
    if (t && load_tokenizer_json(t, root, cfg, err, errlen)) {
        xi_tokenizer_free(t);
        return NULL;
    }
    return t;
}

void xi_tokenizer_free(xi_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_vocab; i++) free(t->tokens[i]);
    free(t->tokens);
    free(t->token_lens);
    free(t->special);
    free(t->added);
    xi_strmap_free(&t->vocab);
    free(t->merges);
    for (int i = 0; i < t->n_added; i++) free(t->added_list[i].content);
    free(t->added_list);
    free(t->added_first);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    for (int i = 0; i < t->n_pre; i++) pcre2_code_free(t->pre[i].re);
    free(t->bos_token);
    free(t->eos_token);
    free(t->chat_template);
    free(t);
}

/* ---- encode ---- */

typedef struct {
    int32_t *ids; /* [n] grows to cap; owned until handed to the caller */
    int n, cap;
} id_list;

static int ids_push(id_list *l, int32_t id, char *err, size_t errlen) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 64;
        int32_t *p = realloc(l->ids, (size_t)nc * sizeof *p);
        if (!p) return xi_errf(err, errlen, "out of memory");
        l->ids = p;
        l->cap = nc;
    }
    l->ids[l->n++] = id;
    return 0;
}

/* Stops between words once out holds more than max_ids ids (the caller only needs to know). */
static int encode_plain(const xi_tokenizer *t, const char *text, size_t len, int at_start,
                        xi_regex_ws *ws, id_list *out, int max_ids, char *err, size_t errlen) {
    if (!len) return 0;
    xi_buf words = {0};
    size_t *ends = NULL;
    int n = 0;
    if (xi_pretok_run(t, text, len, at_start, ws, &words, &ends, &n, err, errlen)) return -1;
    int rc = 0;
    for (int i = 0; i < n && !rc && out->n <= max_ids; i++) {
        size_t start = i ? ends[i - 1] : 0;
        if (xi_bpe_word(t, words.data + start, ends[i] - start, &out->ids, &out->n, &out->cap))
            rc = xi_errf(err, errlen, "out of memory");
    }
    xi_buf_free(&words);
    free(ends);
    return rc;
}

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_word(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c >= 0x80;
}

/* Longest added token starting at text[i], honouring single_word, or NULL. */
static const xi_added_token *match_added(const xi_tokenizer *t, const char *text, size_t len,
                                         size_t i, int parse_special) {
    unsigned char c = (unsigned char)text[i];
    for (int k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
        const xi_added_token *a = &t->added_list[k];
        if (a->special && !parse_special) continue;
        if (a->len > len - i || memcmp(text + i, a->content, a->len)) continue;
        if (a->single_word && ((i > 0 && is_word((unsigned char)text[i - 1])) ||
                               (i + a->len < len && is_word((unsigned char)text[i + a->len]))))
            continue;
        return a;
    }
    return NULL;
}

int xi_tokenizer_encode(const xi_tokenizer *t, const char *text, size_t len, int add_special,
                        int parse_special, int32_t **ids, char *err, size_t errlen) {
    return xi_tokenizer_encode_limit(t, text, len, add_special, parse_special, INT_MAX - 1, ids, err, errlen);
}

/* A text of len bytes has more than max_ids tokens for certain when even the longest token
 * could not cover it: every token's vocabulary string is at least as long as the bytes it
 * stands for (byte-level, metaspace and <0xNN> forms only grow), and the normalisers shrink
 * text by a bounded factor (NFC composes at most 3 bytes into 1, lowercase maps the 3-byte
 * Kelvin sign to 'k'). Pipelines that may drop text (Replace with a shorter string, Split
 * with behaviour removed) get no bound. */
static int surely_over(const xi_tokenizer *t, size_t len, int max_ids) {
    if (len / 16 <= (size_t)max_ids) return 0; /* cheap enough to tokenize and count */
    double shrink = 1;
    for (int i = 0; i < t->n_norm; i++) {
        const xi_norm_step *n = &t->norm[i];
        if (n->kind == XI_NORM_UNICODE || n->kind == XI_NORM_LOWERCASE) shrink *= 3;
        else if (n->kind == XI_NORM_REPLACE && strlen(n->b) < strlen(n->a)) return 0;
    }
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre[i].kind == XI_PRE_SPLIT && t->pre[i].behavior == XI_SPLIT_REMOVED) return 0;
    uint32_t longest = 1;
    for (int i = 0; i < t->n_vocab; i++)
        if (t->tokens[i] && t->token_lens[i] > longest) longest = t->token_lens[i];
    return (double)len > ((double)max_ids + 1) * longest * shrink;
}

int xi_tokenizer_encode_limit(const xi_tokenizer *t, const char *text, size_t len, int add_special,
                              int parse_special, int max_ids, int32_t **ids, char *err, size_t errlen) {
    *ids = NULL;
    if (surely_over(t, len, max_ids)) return max_ids + 1;
    long bad = xi_utf8_first_invalid((const unsigned char *)text, len);
    if (bad >= 0)
        return xi_errf(err, errlen, "input text is not valid UTF-8 at byte %ld (0x%02x)", bad,
                       (unsigned char)text[bad]);
    id_list out = {0};
    xi_regex_ws ws = {0};
    int rc = 0;
    for (int k = 0; add_special && k < t->n_prefix && !rc; k++)
        rc = ids_push(&out, t->prefix_ids[k], err, errlen);
    /* Added tokens split the text first; the plain runs between them go through the pipeline. */
    size_t seg = 0;
    for (size_t i = 0; i < len && !rc && out.n <= max_ids;) {
        const xi_added_token *a = t->n_added ? match_added(t, text, len, i, parse_special) : NULL;
        if (!a) {
            i++;
            continue;
        }
        size_t seg_end = i;
        if (a->lstrip)
            while (seg_end > seg && is_space((unsigned char)text[seg_end - 1])) seg_end--;
        rc = encode_plain(t, text + seg, seg_end - seg, seg == 0, &ws, &out, max_ids, err, errlen);
        if (!rc) rc = ids_push(&out, a->id, err, errlen);
        i += a->len;
        if (a->rstrip)
            while (i < len && is_space((unsigned char)text[i])) i++;
        seg = i;
    }
    if (!rc && seg < len && out.n <= max_ids)
        rc = encode_plain(t, text + seg, len - seg, seg == 0, &ws, &out, max_ids, err, errlen);
    for (int k = 0; add_special && k < t->n_suffix && !rc; k++)
        rc = ids_push(&out, t->suffix_ids[k], err, errlen);
    xi_regex_ws_free(&ws);
    if (rc) {
        free(out.ids);
        return -1;
    }
    if (!out.ids && !(out.ids = malloc(sizeof *out.ids)))
        return xi_errf(err, errlen, "out of memory");
    *ids = out.ids;
    return out.n;
}

/* ---- decode ---- */

char *xi_tokenizer_decode(const xi_tokenizer *t, const int32_t *ids, int n, int skip_special,
                          size_t *out_len, char *err, size_t errlen) {
    xi_buf raw = {0}, out = {0};
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab || !t->tokens[id]) {
            xi_buf_free(&raw);
            xi_errf(err, errlen, "token id %d at position %d is out of range (vocabulary %d)", id,
                    i, t->n_vocab);
            return NULL;
        }
        if (skip_special && t->special[id]) continue;
        if (xi_token_bytes(t, id, &raw)) goto oom;
    }
    size_t off = t->strip_leading_space && raw.len && raw.data[0] == ' ';
    /* raw.data stays NULL when no id produced a byte (none given, or all skipped special
     * tokens), and NULL + 0 is undefined behaviour: point at an empty string instead. */
    const unsigned char *bytes = (const unsigned char *)(raw.data ? raw.data : "");
    if (xi_utf8_append_lossy(&out, bytes + off, raw.len - off)) goto oom;
    xi_buf_free(&raw);
    if (out_len) *out_len = out.len;
    return out.data;
oom:
    xi_buf_free(&raw);
    xi_buf_free(&out);
    xi_errf(err, errlen, "out of memory");
    return NULL;
}

/* ---- accessors ---- */

int xi_tokenizer_vocab_size(const xi_tokenizer *t) { return t->n_vocab; }
int32_t xi_tokenizer_bos_id(const xi_tokenizer *t) { return t->bos_id; }
int32_t xi_tokenizer_eos_id(const xi_tokenizer *t) { return t->eos_id; }
const char *xi_tokenizer_chat_template(const xi_tokenizer *t) { return t->chat_template; }
const char *xi_tokenizer_bos_token(const xi_tokenizer *t) { return t->bos_token; }
const char *xi_tokenizer_eos_token(const xi_tokenizer *t) { return t->eos_token; }

int32_t xi_tokenizer_token_id(const xi_tokenizer *t, const char *token) {
    return token ? xi_strmap_get(&t->vocab, token, strlen(token)) : -1;
}

const char *xi_tokenizer_token(const xi_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->tokens[id] : NULL;
}

int xi_tokenizer_is_special(const xi_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->special[id];
}

/* server/config_file: a --config YAML file to `xinfer serve` tokens, as vLLM's
 * FlexibleArgumentParser reads it: each key a flag, file first, so flags on the command
 * line override it. Parsed by libyaml into a document tree; every error names the file. */
#include "server/config_file.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct {
    const char *path;
    yaml_document_t *doc;
    char **out;                     /* [max_out] tokens, pointing into buf */
    int n_out, max_out;
    char *buf;                      /* [bufsize] token text */
    size_t used, bufsize;
    char *err;
    size_t errlen;
} reader;

static int fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader *r, const char *fmt, ...) {
    if (!r->err || !r->errlen) return -1;
    int n = snprintf(r->err, r->errlen, "--config %s: ", r->path);
    if (n < 0 || (size_t)n >= r->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int emit(reader *r, const char *s, size_t n) {
    if (r->n_out >= r->max_out || r->used + n + 1 > r->bufsize)
        return fail(r, "too many flags or values (at most %d tokens, %zu bytes)", r->max_out,
                    r->bufsize);
    char *t = r->buf + r->used;
    memcpy(t, s, n);
    t[n] = 0;
    r->used += n + 1;
    r->out[r->n_out++] = t;
    return 0;
}

static int emit_flag(reader *r, const char *flag) { return emit(r, flag, strlen(flag)); }

static const char *text(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }
static int line(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

/* YAML 1.1's plain scalars that mean true, false and null. */
static int is_word(const yaml_node_t *n, const char *const *words) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    for (int i = 0; words[i]; i++)
        if (!strcmp(text(n), words[i])) return 1;
    return 0;
}
static const char *const trues[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", NULL};
static const char *const falses[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", NULL};
static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};

/* A YAML value as JSON, for flags whose value is a JSON object: plain scalars that read as
 * numbers, booleans or null become those, everything else a string. */
static json_t *to_json(reader *r, yaml_node_t *n) {
    if (n->type == YAML_MAPPING_NODE) {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
            json_t *v = to_json(r, yaml_document_get_node(r->doc, p->value));
            if (!k || k->type != YAML_SCALAR_NODE || !v || json_object_set_new(o, text(k), v)) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array();
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
            json_t *v = to_json(r, yaml_document_get_node(r->doc, *i));
            if (!v || json_array_append_new(a, v)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    if (is_word(n, trues)) return json_true();
    if (is_word(n, falses)) return json_false();
    if (is_word(n, nulls)) return json_null();
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        char *end;
        errno = 0;
        long long i = strtoll(text(n), &end, 10);
        if (!*end && !errno) return json_integer(i);
        double d = strtod(text(n), &end);
        if (!*end && !errno) return json_real(d);
    }
    return json_stringn(text(n), n->data.scalar.length);
}

static int scalar_value(reader *r, const char *key, yaml_node_t *v) {
    if (v->type != YAML_SCALAR_NODE)
        return fail(r, "line %d: %s: expected a single value, got a %s", line(v), key,
                    v->type == YAML_MAPPING_NODE ? "mapping" : "list");
    if (is_word(v, nulls)) return fail(r, "line %d: %s: no value", line(v), key);
    return emit(r, text(v), v->data.scalar.length);
}

/* One key and its value. */
static int entry(reader *r, xi_cfg_kind (*kind)(const char *), yaml_node_t *k, yaml_node_t *v) {
    const char *key = text(k);
    char flag[96], no_flag[100];
    snprintf(flag, sizeof flag, "--%s", key);
    for (char *c = flag + 2; *c; c++)
        if (*c == '_') *c = '-';
    const xi_cfg_kind kd = kind(flag);
    switch (kd) {
    case XI_CFG_UNKNOWN: return 1; /* the caller collects them */
    case XI_CFG_BOOL:
        if (is_word(v, trues)) return emit_flag(r, flag);
        if (!is_word(v, falses))
            return fail(r, "line %d: %s: expected true or false", line(v), key);
        /* false: the --no- form where the flag has one, else the default stays */
        snprintf(no_flag, sizeof no_flag, "--no-%s", flag + 2);
        return kind(no_flag) == XI_CFG_BOOL ? emit_flag(r, no_flag) : 0;
    case XI_CFG_VALUE:
        if (v->type == YAML_MAPPING_NODE) {
            json_t *j = to_json(r, v);
            char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
            json_decref(j);
            if (!s) return fail(r, "line %d: %s: cannot convert this mapping to JSON", line(v), key);
            const int rc = emit_flag(r, flag) || emit(r, s, strlen(s)) ? -1 : 0;
            free(s);
            return rc;
        }
        return emit_flag(r, flag) || scalar_value(r, key, v) ? -1 : 0;
    case XI_CFG_LIST:
    case XI_CFG_REPEAT:
        if (v->type != YAML_SEQUENCE_NODE) return emit_flag(r, flag) || scalar_value(r, key, v) ? -1 : 0;
        if (v->data.sequence.items.start == v->data.sequence.items.top)
            return fail(r, "line %d: %s: empty list", line(v), key);
        for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
            if ((kd == XI_CFG_REPEAT || i == v->data.sequence.items.start) && emit_flag(r, flag))
                return -1;
            if (scalar_value(r, key, yaml_document_get_node(r->doc, *i))) return -1;
        }
        return 0;
    }
    return fail(r, "%s: unhandled flag kind", key);
}

static int read_mapping(reader *r, xi_cfg_kind (*kind)(const char *)) {
    yaml_node_t *root = yaml_document_get_root_node(r->doc);
    if (!root) return 0; /* an empty file sets nothing */
    if (root->type != YAML_MAPPING_NODE)
        return fail(r, "expected a mapping of flag names to values (e.g. `port: 8000`)");
    char unknown[512] = "";
    int n_unknown = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE)
            return fail(r, "line %d: keys must be flag names", k ? line(k) : 0);
        for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < p; q++)
            if (!strcmp(text(yaml_document_get_node(r->doc, q->key)), text(k)))
                return fail(r, "line %d: %s is given twice", line(k), text(k));
        if (!strcmp(text(k), "config"))
            return fail(r, "line %d: config: a config file cannot name another", line(k));
        const int rc = entry(r, kind, k, v);
        if (rc < 0) return -1;
        if (rc > 0) {
            const size_t u = strlen(unknown);
            snprintf(unknown + u, sizeof unknown - u, "%s'%s' (line %d)", n_unknown ? ", " : "",
                     text(k), line(k));
            n_unknown++;
        }
    }
    if (n_unknown)
        return fail(r, "unknown key%s %s; keys are `xinfer serve` flag names without the leading --",
                    n_unknown > 1 ? "s" : "", unknown);
    return 0;
}

int xi_config_file_tokens(const char *path, xi_cfg_kind (*kind)(const char *flag), char **out,
                          int max_out, char *buf, size_t bufsize, char *err, size_t errlen) {
    reader r = {.path = path, .out = out, .max_out = max_out, .buf = buf, .bufsize = bufsize,
                .err = err, .errlen = errlen};
    FILE *f = fopen(path, "rb");
    if (!f) return fail(&r, "%s", strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return fail(&r, "out of memory");
    }
    yaml_parser_set_input_file(&parser, f);
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = fail(&r, "line %d, column %d: %s%s%s", (int)parser.problem_mark.line + 1,
                  (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "malformed YAML",
                  parser.context ? " " : "", parser.context ? parser.context : "");
    } else {
        r.doc = &doc;
        rc = read_mapping(&r, kind);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    fclose(f);
    return rc < 0 ? -1 : r.n_out;
}

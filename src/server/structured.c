/* server/structured: structured-output request fields (see structured.h). */
#include "server/structured.h"

#include <stdlib.h>
#include <string.h>

/* the one field that asked for structured output, and its guide */
typedef struct want {
    const char *param;
    xi_guide_kind kind;
    json_t *src;        /* borrowed */
} want;

static int take(want *w, const char *param, xi_guide_kind kind, json_t *src, xi_oai_error *e) {
    if (w->param)
        return xi_oai_fail(e, 400, param, "only one kind of structured output may be given ('%s' and '%s')",
                           w->param, param);
    *w = (want){param, kind, src};
    return 0;
}

/* a schema given as an object, or as a string holding one (guided_json accepts both) */
static int schema_arg(json_t *v, const char *param, xi_oai_error *e) {
    if (json_is_object(v) || json_is_boolean(v)) return 0;
    if (json_is_string(v)) {
        json_t *j = json_loads(json_string_value(v), 0, NULL);
        const int ok = json_is_object(j);
        json_decref(j);
        if (ok) return 0;
    }
    return xi_oai_fail(e, 400, param, "'%s' must be a JSON Schema (an object, or a string holding one)", param);
}

static int set_guide(xi_oai_request *r, const char *param, xi_guide_kind kind, json_t *src, xi_oai_error *e) {
    free(r->guide_src);
    r->guide_src = NULL;
    if (json_is_string(src) && kind != XI_GUIDE_CHOICE) r->guide_src = strdup(json_string_value(src));
    else if (src) r->guide_src = json_dumps(src, JSON_COMPACT | JSON_ENCODE_ANY);
    else r->guide_src = strdup("");
    if (!r->guide_src) return xi_oai_fail(e, 500, NULL, "out of memory");
    r->params.guide = kind;
    r->params.guide_src = r->guide_src;
    r->params.guide_param = param;
    return 0;
}

static int choice_arg(json_t *v, const char *param, xi_oai_error *e) {
    size_t i;
    json_t *s;
    if (!json_is_array(v) || !json_array_size(v))
        return xi_oai_fail(e, 400, param, "'%s' must be a non-empty array of strings", param);
    json_array_foreach(v, i, s) if (!json_is_string(s))
        return xi_oai_fail(e, 400, param, "'%s' must be a non-empty array of strings", param);
    return 0;
}

static int string_arg(json_t *v, const char *param, xi_oai_error *e) {
    return json_is_string(v) && json_string_length(v) ? 0
         : xi_oai_fail(e, 400, param, "'%s' must be a non-empty string", param);
}

/* kind from a field's value: the json/regex/choice/grammar families share their checks */
static int one(want *w, const char *param, xi_guide_kind kind, json_t *v, xi_oai_error *e) {
    if (!v || json_is_null(v)) return 0;
    int rc = kind == XI_GUIDE_JSON_SCHEMA ? schema_arg(v, param, e)
           : kind == XI_GUIDE_CHOICE ? choice_arg(v, param, e)
           : string_arg(v, param, e);
    return rc ? -1 : take(w, param, kind, v, e);
}

static int response_format(want *w, json_t *rf, xi_oai_error *e) {
    json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
    if (!json_is_string(t)) return xi_oai_fail(e, 400, "response_format", "'response_format' must be {\"type\": ...}");
    const char *type = json_string_value(t);
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) return take(w, "response_format", XI_GUIDE_JSON_OBJECT, NULL, e);
    if (strcmp(type, "json_schema"))
        return xi_oai_fail(e, 400, "response_format",
                           "response_format type '%s' is not supported (\"text\", \"json_object\" and \"json_schema\" are)", type);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return xi_oai_fail(e, 400, "response_format", "response_format json_schema needs {\"json_schema\": {\"name\", \"schema\"}}");
    json_t *strict = json_object_get(js, "strict"), *schema = json_object_get(js, "schema");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return xi_oai_fail(e, 400, "response_format", "response_format.json_schema.strict must be a boolean");
    /* no schema: any JSON value (vLLM does the same); strict or not, the schema is enforced */
    if (!schema) schema = json_true();
    else json_incref(schema);
    int rc = schema_arg(schema, "response_format", e) ? -1 : take(w, "response_format", XI_GUIDE_JSON_SCHEMA, schema, e);
    /* keep the schema alive until set_guide copied it: the body still holds it unless defaulted */
    json_decref(schema);
    return rc;
}

int xi_structured_parse(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    want w = {0};
    json_t *rf = json_object_get(body, "response_format");
    if (rf && !json_is_null(rf) && response_format(&w, rf, e)) return -1;
    json_t *so = json_object_get(body, "structured_outputs");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return xi_oai_fail(e, 400, "structured_outputs", "'structured_outputs' must be an object");
        static const struct { const char *key; xi_guide_kind kind; } keys[] = {
            {"json", XI_GUIDE_JSON_SCHEMA}, {"regex", XI_GUIDE_REGEX}, {"choice", XI_GUIDE_CHOICE},
            {"grammar", XI_GUIDE_GRAMMAR}};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (one(&w, "structured_outputs", keys[k].kind, json_object_get(so, keys[k].key), e)) return -1;
        json_t *jo = json_object_get(so, "json_object");
        if (json_is_true(jo) && take(&w, "structured_outputs", XI_GUIDE_JSON_OBJECT, NULL, e)) return -1;
        const char *key;
        json_t *v;
        json_object_foreach(so, key, v) {
            static const char *const known[] = {"json", "regex", "choice", "grammar", "json_object",
                                                "disable_fallback", "disable_any_whitespace",
                                                "disable_additional_properties", "whitespace_pattern",
                                                "structural_tag"};
            size_t i = 0;
            while (i < sizeof known / sizeof known[0] && strcmp(key, known[i])) i++;
            if (i == sizeof known / sizeof known[0] || (!json_is_null(v) && !json_is_false(v) && i >= 6))
                return xi_oai_fail(e, 400, "structured_outputs", "structured_outputs.%s is not supported", key);
        }
    }
    if (one(&w, "guided_json", XI_GUIDE_JSON_SCHEMA, json_object_get(body, "guided_json"), e) ||
        one(&w, "guided_regex", XI_GUIDE_REGEX, json_object_get(body, "guided_regex"), e) ||
        one(&w, "guided_choice", XI_GUIDE_CHOICE, json_object_get(body, "guided_choice"), e) ||
        one(&w, "guided_grammar", XI_GUIDE_GRAMMAR, json_object_get(body, "guided_grammar"), e))
        return -1;
    if (!w.param) return 0;
    /* json_object keeps the engine's json_object flag as before */
    if (w.kind == XI_GUIDE_JSON_OBJECT) r->params.json_object = 1;
    return set_guide(r, w.param, w.kind, w.src, e);
}

/* ---- forced tool calls ---- */

static json_t *tool_named(json_t *tools, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *n = json_object_get(json_object_get(t, "function"), "name");
        if (json_is_string(n) && !strcmp(json_string_value(n), name)) return t;
    }
    return NULL;
}

static json_t *params_of(json_t *tool) {
    json_t *p = json_object_get(json_object_get(tool, "function"), "parameters");
    return json_is_object(p) ? json_deep_copy(p) : json_pack("{s:s, s:{}}", "type", "object", "properties");
}

/* vLLM's schema for "required": [{"name": one of the tools, "parameters": its schema}, ...],
 * the tools' $defs gathered at the root where their #/$defs references find them */
static json_t *required_schema(json_t *tools, xi_oai_error *e) {
    json_t *any = json_array(), *defs = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *name = json_object_get(json_object_get(t, "function"), "name");
        if (!json_is_string(name)) {
            json_decref(any);
            json_decref(defs);
            return xi_oai_fail(e, 400, "tools", "tools[%zu].function.name must be a string", i), NULL;
        }
        json_t *p = params_of(t), *d = json_object_get(p, "$defs");
        const char *k;
        json_t *v;
        json_object_foreach(d, k, v) {
            json_t *old = json_object_get(defs, k);
            if (old && !json_equal(old, v)) {
                json_decref(p);
                json_decref(any);
                json_decref(defs);
                return xi_oai_fail(e, 400, "tools", "tools define $defs/%s differently", k), NULL;
            }
            json_object_set(defs, k, v);
        }
        json_object_del(p, "$defs");
        json_array_append_new(any, json_pack("{s:{s:{s:[O]}, s:o}, s:[s,s]}", "properties", "name", "enum", name,
                                             "parameters", p, "required", "name", "parameters"));
    }
    json_t *s = json_pack("{s:s, s:i, s:{s:o}}", "type", "array", "minItems", 1, "items", "anyOf", any);
    if (json_object_size(defs)) json_object_set(s, "$defs", defs);
    json_decref(defs);
    return s;
}

int xi_structured_tool_choice(xi_oai_request *r, json_t *c, xi_oai_error *e) {
    if (r->params.guide)
        return xi_oai_fail(e, 400, "tool_choice", "tool_choice \"required\" or a named function cannot be combined with '%s'",
                           r->params.guide_param);
    json_t *tools = json_loads(r->tools_json ? r->tools_json : "[]", 0, NULL);
    json_t *schema = NULL;
    if (json_is_string(c)) {
        r->tool_choice = XI_TOOL_CHOICE_REQUIRED;
        schema = required_schema(tools, e);
    } else {
        json_t *fn = json_object_get(c, "function");
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name)) {
            json_decref(tools);
            return xi_oai_fail(e, 400, "tool_choice", "a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        json_t *tool = tool_named(tools, json_string_value(name));
        if (!tool) {
            json_decref(tools);
            return xi_oai_fail(e, 400, "tool_choice", "Tool '%s' has not been passed in `tools`.", json_string_value(name));
        }
        r->tool_choice = XI_TOOL_CHOICE_NAMED;
        r->forced_tool = strdup(json_string_value(name));
        schema = params_of(tool);
        if (!r->forced_tool) schema = (json_decref(schema), NULL), xi_oai_fail(e, 500, NULL, "out of memory");
    }
    json_decref(tools);
    if (!schema) return -1;
    int rc = set_guide(r, "tool_choice", XI_GUIDE_JSON_SCHEMA, schema, e);
    json_decref(schema);
    return rc;
}

json_t *xi_structured_tool_calls(const xi_oai_request *r, const char *text, size_t len) {
    json_t *out = json_loadb(text, len, 0, NULL);
    json_t *calls = json_array();
    if (r->tool_choice == XI_TOOL_CHOICE_NAMED && json_is_object(out)) {
        json_array_append_new(calls, json_pack("{s:s, s:{s:s, s:s%}}", "type", "function", "function", "name",
                                               r->forced_tool, "arguments", text, len));
    } else if (r->tool_choice == XI_TOOL_CHOICE_REQUIRED && json_is_array(out)) {
        size_t i;
        json_t *call;
        json_array_foreach(out, i, call) {
            json_t *name = json_object_get(call, "name");
            char *args = json_dumps(json_object_get(call, "parameters"), JSON_COMPACT | JSON_ENCODE_ANY);
            if (json_is_string(name) && args)
                json_array_append_new(calls, json_pack("{s:s, s:{s:O, s:s}}", "type", "function", "function",
                                                       "name", name, "arguments", args));
            free(args);
        }
    }
    json_decref(out);
    if (!json_array_size(calls)) {
        json_decref(calls);
        return NULL;
    }
    return calls;
}

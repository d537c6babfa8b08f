/* hub/gguf_files: GGUF files by name. A hub repo of GGUF quantizations (ORG/NAME-GGUF:TAG
 * picks the file or split parts of that quantization, as llama.cpp's -hf does), and a model
 * already pulled by Ollama (ollama:NAME[:TAG] → its manifest's model blob, used in place). */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/hub_internal.h"

/* ---- quantization tags ---------------------------------------------------------------- */

static int ends_with_ci(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

int xi_hub_is_gguf_path(const char *path) { return ends_with_ci(path, ".gguf"); }

/* The tag as a whole word of the path: not preceded by a letter or digit, not followed by a
 * letter, digit or '_' (so Q4_K does not match Q4_K_M, nor Q4_NL IQ4_NL). */
static int has_tag(const char *path, const char *tag) {
    size_t n = strlen(tag);
    for (const char *p = path; *p; p++) {
        if (strncasecmp(p, tag, n)) continue;
        int before = p == path || !isalnum((unsigned char)p[-1]);
        int after = !isalnum((unsigned char)p[n]) && p[n] != '_';
        if (before && after) return 1;
    }
    return 0;
}

/* Length of path without a split suffix "-00001-of-00003.gguf" (or ".gguf"). */
static size_t stem_len(const char *path) {
    size_t n = strlen(path);
    const char *tail = "-00000-of-00000.gguf";
    size_t tl = strlen(tail);
    if (n >= tl) {
        const char *s = path + n - tl;
        int split = 1;
        for (size_t i = 0; i < tl && split; i++)
            split = tail[i] == '0' ? isdigit((unsigned char)s[i]) != 0 : tolower(s[i]) == tail[i];
        if (split) return n - tl;
    }
    return n - 5;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int xi_hub_gguf_pick(const char *const *paths, int n, const char *tag, int *chosen,
                     char *err, size_t errlen) {
    /* Candidates in name order, so "the first GGUF" and the split parts are well defined. */
    const char **c = malloc((size_t)(n > 0 ? n : 1) * sizeof *c);
    if (!c) return xi_errf(err, errlen, "out of memory");
    int nc = 0;
    for (int i = 0; i < n; i++)
        if (xi_hub_is_gguf_path(paths[i]) && !strstr(paths[i], "mmproj")) c[nc++] = paths[i];
    qsort(c, (size_t)nc, sizeof *c, cmp_str);
    const char *first = NULL;
    const char *want = tag && *tag ? tag : "Q4_K_M";
    for (int i = 0; i < nc && !first; i++)
        if (has_tag(c[i], want)) first = c[i];
    if (!first && !(tag && *tag) && nc) first = c[0];
    if (!first) {
        xi_buf have = {0};
        for (int i = 0; i < nc; i++) xi_buf_printf(&have, "%s%s", i ? ", " : "", c[i]);
        int rc = nc ? xi_errf(err, errlen, "no GGUF file of quantization '%s' (there are: %s)",
                              want, have.data)
                    : xi_errf(err, errlen, "no GGUF files");
        xi_buf_free(&have);
        free(c);
        return rc;
    }
    size_t sl = stem_len(first);
    int k = 0;
    for (int i = 0; i < nc; i++)
        if (stem_len(c[i]) == sl && !strncmp(c[i], first, sl))
            for (int j = 0; j < n; j++)
                if (paths[j] == c[i]) chosen[k++] = j;
    free(c);
    return k;
}

/* ---- Ollama's store --------------------------------------------------------------------- */

/* Manifests live at MODELS/manifests/HOST/NAMESPACE/MODEL/TAG; "qwen3:8b" is
 * registry.ollama.ai/library/qwen3/8b. Blobs are MODELS/blobs/sha256-HEX. */
char *xi_hub_ollama_resolve(const char *name, char *err, size_t errlen) {
    const char *spec = !strncmp(name, "ollama:", 7) ? name + 7 : name;
    char model[512], tag[128] = "latest";
    const char *colon = strrchr(spec, ':');
    size_t ml = colon ? (size_t)(colon - spec) : strlen(spec);
    if (!ml || ml >= sizeof model || (colon && (!colon[1] || strlen(colon + 1) >= sizeof tag))) {
        xi_errf(err, errlen, "%s: expected ollama:NAME[:TAG]", name);
        return NULL;
    }
    memcpy(model, spec, ml);
    model[ml] = 0;
    if (colon) snprintf(tag, sizeof tag, "%s", colon + 1);
    if (strstr(model, "..") || strstr(tag, "..") || strchr(tag, '/') || model[0] == '/') {
        xi_errf(err, errlen, "%s: bad model name", name);
        return NULL;
    }
    int slashes = 0;
    for (const char *p = model; *p; p++) slashes += *p == '/';
    xi_buf root = {0}, path = {0};
    const char *env = getenv("OLLAMA_MODELS");
    if (env && *env) xi_buf_printf(&root, "%s", env);
    else xi_buf_printf(&root, "%s/.ollama/models", getenv("HOME") ? getenv("HOME") : ".");
    xi_buf_printf(&path, "%s/manifests/%s%s%s/%s", root.data,
                  slashes == 2 ? "" : "registry.ollama.ai/", slashes == 0 ? "library/" : "",
                  model, tag);
    char *out = NULL;
    size_t len;
    char rerr[512];
    char *text = xi_read_file(path.data, &len, rerr, sizeof rerr);
    json_t *j = NULL;
    if (!text) {
        xi_errf(err, errlen, "%s: no Ollama manifest %s (OLLAMA_MODELS=%s; run `ollama pull "
                "%s:%s` first)", name, path.data, root.data, model, tag);
        goto done;
    }
    j = json_loadb(text, len, 0, NULL);
    json_t *layer;
    size_t i;
    const char *digest = NULL;
    json_array_foreach(json_object_get(j, "layers"), i, layer) {
        const char *mt = json_string_value(json_object_get(layer, "mediaType"));
        if (mt && !strcmp(mt, "application/vnd.ollama.image.model"))
            digest = json_string_value(json_object_get(layer, "digest"));
    }
    if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 71 ||
        strspn(digest + 7, "0123456789abcdef") != 64) {
        xi_errf(err, errlen, "%s: manifest %s has no model layer with a sha256 digest", name,
                path.data);
        goto done;
    }
    path.len = 0;
    xi_buf_printf(&path, "%s/blobs/sha256-%s", root.data, digest + 7);
    FILE *f = fopen(path.data, "rb");
    char magic[4] = {0};
    int ok = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f) fclose(f);
    if (!ok) {
        xi_errf(err, errlen, "%s: the model blob %s is %s", name, path.data,
                f ? "not a GGUF file" : "missing");
        goto done;
    }
    out = xi_strdup(path.data);
done:
    json_decref(j);
    free(text);
    xi_buf_free(&root);
    xi_buf_free(&path);
    return out;
}

/* hub: ORG/NAME[@REVISION] → a snapshot folder in the hub cache.
 *
 * Online: list the revision's files with the hub's API (Hugging Face
 * GET /api/models/ORG/NAME/revision/REV?blobs=true, ModelScope
 * GET /api/v1/models/ORG/NAME/repo/files?Revision=REV&Recursive=true), keep what inference
 * needs, and fetch each file that the snapshot lacks (HF /ORG/NAME/resolve/COMMIT/FILE,
 * which redirects weights to a blob CDN; ModelScope /api/v1/models/ORG/NAME/repo?Revision=
 * REV&FilePath=FILE). Offline (HF_HUB_OFFLINE=1, or the hub unreachable with a cached copy):
 * refs/REV names the commit and the snapshot is used as it is. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub_internal.h"

typedef struct hub_file {
    char *path;                 /* in the repo ("model-00001-of-00002.safetensors"), owned */
    int64_t size;               /* bytes, -1 unknown */
    char *sha256;               /* LFS oid / ModelScope Sha256 (owned), or NULL */
    char *blob_id;              /* the blob's name: sha256, or the hub's git blob id (owned) */
} hub_file;

typedef struct hub_ctx {
    xi_hub_source source;
    char endpoint[1024];
    const char *token;
    const char *token_env;      /* "HF_TOKEN" / "MODELSCOPE_API_TOKEN", for messages */
    char *token_owned;          /* read from $HF_HOME/token */
    char *root;                 /* cache root, owned */
    char *repo_dir;             /* root/models--ORG--NAME, owned */
    char repo[256];             /* ORG/NAME */
    char rev[256];
    char commit[256];
    int offline, progress, verify, retries, quiet;
    hub_file *files;            /* [n_files] owned */
    int n_files;
    char tag[64];               /* ORG/NAME:TAG, a GGUF quantization; "" when none */
    hub_file *ggufs;            /* [n_ggufs] *.gguf files listed, owned until picked */
    int n_ggufs;
    char gguf_first[1024];      /* the picked GGUF file (first part) in the repo, or "" */
    xi_buf skipped;             /* names of files left out, for the no-weights message */
} hub_ctx;

void xi_hub_options_default(xi_hub_options *o) {
    memset(o, 0, sizeof *o);
    o->offline = -1;
    o->progress = -1;
    o->retries = -1;
}

void xi_hub_result_free(xi_hub_result *r) {
    if (!r) return;
    free(r->path);
    free(r->gguf);
    r->path = r->gguf = NULL;
}

/* ---- names and options -------------------------------------------------------------- */

static int name_char(int c) { return isalnum(c) || c == '-' || c == '_' || c == '.'; }

int xi_hub_is_repo_name(const char *s) {
    if (!s) return 0;
    const char *slash = strchr(s, '/'), *at = strchr(s, '@');
    const char *end = at ? at : s + strlen(s), *colon = memchr(s, ':', (size_t)(end - s));
    if (colon && (!slash || colon + 1 == end || colon < slash)) return 0;
    if (colon) end = colon;
    if (!slash || slash > end || slash == s || slash + 1 == end) return 0;
    for (const char *p = s; p < (at ? at : s + strlen(s)); p++)
        if (p != slash && p != colon && !name_char((unsigned char)*p)) return 0;
    /* Neither part may be "." or "..", nor start with one: that is a relative path. */
    if (s[0] == '.' || slash[1] == '.') return 0;
    if (at) {
        if (!at[1]) return 0;
        for (const char *p = at + 1; *p; p++)
            if (!name_char((unsigned char)*p) && *p != '/') return 0;
        if (strstr(at, "..")) return 0;
    }
    return 1;
}

static int env_true(const char *name) {
    const char *v = getenv(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "on"));
}

static char *read_token_file(void) {
    const char *p = getenv("HF_TOKEN_PATH");
    char buf[4096];
    if (!p || !*p) {
        const char *home = getenv("HF_HOME");
        if (home && *home) snprintf(buf, sizeof buf, "%s/token", home);
        else snprintf(buf, sizeof buf, "%s/.cache/huggingface/token",
                      getenv("HOME") ? getenv("HOME") : ".");
        p = buf;
    }
    char *t = xi_read_file(p, NULL, NULL, 0);
    if (t) t[strcspn(t, " \r\n")] = 0;
    if (t && !*t) {
        free(t);
        t = NULL;
    }
    return t;
}

static int ctx_init(hub_ctx *c, const char *name, const xi_hub_options *o, char *err,
                    size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!xi_hub_is_repo_name(name))
        return xi_errf(err, errlen, "'%s' is neither a model folder nor a hub name ORG/NAME"
                       "[@REVISION]", name);
    const char *at = strchr(name, '@');
    size_t n = at ? (size_t)(at - name) : strlen(name);
    const char *colon = memchr(name, ':', n);
    if (colon) {
        size_t tl = n - (size_t)(colon - name) - 1;
        if (tl >= sizeof c->tag) return xi_errf(err, errlen, "%s: tag too long", name);
        memcpy(c->tag, colon + 1, tl);
        c->tag[tl] = 0;
        n = (size_t)(colon - name);
    }
    if (n >= sizeof c->repo) return xi_errf(err, errlen, "%s: name too long", name);
    memcpy(c->repo, name, n);
    c->repo[n] = 0;

    c->source = o->source;
    if (c->source == XI_HUB_SOURCE_AUTO) {
        const char *s = getenv("XINFER_SOURCE");
        if (s && (!strcasecmp(s, "modelscope") || !strcasecmp(s, "ms")))
            c->source = XI_HUB_SOURCE_MODELSCOPE;
        else if (s && *s && strcasecmp(s, "huggingface") && strcasecmp(s, "hf"))
            return xi_errf(err, errlen, "XINFER_SOURCE=%s: expected huggingface or modelscope", s);
        else if (!s && env_true("VLLM_USE_MODELSCOPE"))
            c->source = XI_HUB_SOURCE_MODELSCOPE;
        else
            c->source = XI_HUB_SOURCE_HF;
    }
    int ms = c->source == XI_HUB_SOURCE_MODELSCOPE;
    const char *rev = o->revision ? o->revision : at ? at + 1 : ms ? "master" : "main";
    if (!*rev || strlen(rev) >= sizeof c->rev || strstr(rev, ".."))
        return xi_errf(err, errlen, "%s: bad revision '%s'", name, rev);
    snprintf(c->rev, sizeof c->rev, "%s", rev);

    const char *ep = o->endpoint;
    if (!ep || !*ep) ep = getenv(ms ? "MODELSCOPE_ENDPOINT" : "HF_ENDPOINT");
    if (!ep || !*ep) ep = ms ? "https://www.modelscope.cn" : "https://huggingface.co";
    snprintf(c->endpoint, sizeof c->endpoint, "%s", ep);
    for (size_t k = strlen(c->endpoint); k > 0 && c->endpoint[k - 1] == '/'; k--)
        c->endpoint[k - 1] = 0;

    c->token_env = ms ? "MODELSCOPE_API_TOKEN" : "HF_TOKEN";
    c->token = o->token;
    if (!c->token || !*c->token) c->token = getenv(c->token_env);
    if ((!c->token || !*c->token) && !ms) c->token = getenv("HUGGING_FACE_HUB_TOKEN");
    if ((!c->token || !*c->token) && !ms) c->token = c->token_owned = read_token_file();

    c->offline = o->offline >= 0 ? o->offline
                                 : env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE");
    c->progress = o->progress >= 0 ? o->progress : isatty(2);
    c->verify = o->verify;
    c->retries = o->retries;
    c->quiet = o->quiet;
    c->root = xi_hub_cache_root(o);
    c->repo_dir = c->root ? xi_hub_repo_dir(c->root, c->repo) : NULL;
    if (!c->repo_dir) return xi_errf(err, errlen, "out of memory");
    return 0;
}

static void files_free(hub_file *f, int n) {
    for (int i = 0; i < n; i++) {
        free(f[i].path);
        free(f[i].sha256);
        free(f[i].blob_id);
    }
    free(f);
}

static void ctx_free(hub_ctx *c) {
    files_free(c->files, c->n_files);
    files_free(c->ggufs, c->n_ggufs);
    free(c->root);
    free(c->repo_dir);
    free(c->token_owned);
    xi_buf_free(&c->skipped);
}

/* ---- which files inference needs ---------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Top-level files only: subfolders hold other formats (onnx/, gguf quant levels) or
 * training leftovers. */
static int wanted(const char *path) {
    static const char *const names[] = {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
        "tokenizer.model", "chat_template.json", "chat_template.jinja", "quantize_config.json",
        "README.md", "LICENSE", "LICENSE.txt",
    };
    if (strchr(path, '/')) return 0;
    for (size_t i = 0; i < XI_ARRAY_LEN(names); i++)
        if (!strcmp(path, names[i])) return 1;
    return ends_with(path, ".safetensors") || ends_with(path, ".safetensors.index.json");
}

static int is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* A blob id becomes a file name in blobs/: the hub must not be able to name a path. */
static int safe_blob_name(const char *s) {
    if (!s || !*s || *s == '.' || strlen(s) > 128) return 0;
    for (; *s; s++)
        if (!name_char((unsigned char)*s)) return 0;
    return 1;
}

static int add_file(hub_ctx *c, const char *path, int64_t size, const char *sha256,
                    const char *blob_id) {
    int gguf = xi_hub_is_gguf_path(path); /* kept aside: only the picked quantization is pulled */
    if (!gguf && !wanted(path)) {
        xi_buf_printf(&c->skipped, "%s%s", c->skipped.len ? ", " : "", path);
        return 0;
    }
    hub_file **list = gguf ? &c->ggufs : &c->files;
    int *n = gguf ? &c->n_ggufs : &c->n_files;
    hub_file *f = realloc(*list, (size_t)(*n + 1) * sizeof *f);
    if (!f) return -1;
    *list = f;
    f = &f[(*n)++];
    f->path = xi_strdup(path);
    f->size = size;
    f->sha256 = sha256 && is_hex(sha256, 64) ? xi_strdup(sha256) : NULL;
    f->blob_id = f->sha256 ? xi_strdup(f->sha256) : safe_blob_name(blob_id) ? xi_strdup(blob_id) : NULL;
    return f->path ? 0 : -1;
}

/* ---- listing a revision ------------------------------------------------------------- */

/* Hub errors get one line that says what to do; -2 marks "unreachable" so the caller can
 * fall back to the cache. */
static int list_error(hub_ctx *c, const xi_http_resp *r, const char *url, char *err,
                      size_t errlen) {
    if (r->fail == XI_HTTP_UNREACHABLE) {
        xi_errf(err, errlen, "cannot reach %s (%s): no network? Set %s to a reachable mirror, "
                "or HF_HUB_OFFLINE=1 to use the cache only", c->endpoint, r->fail_msg,
                c->source == XI_HUB_SOURCE_MODELSCOPE ? "MODELSCOPE_ENDPOINT" : "HF_ENDPOINT");
        return -2;
    }
    if (r->fail != XI_HTTP_OK) return xi_errf(err, errlen, "%s: %s", url, r->fail_msg);
    const char *code = r->error_code;
    int have_token = c->token && *c->token;
    if (!strcmp(code, "GatedRepo"))
        return xi_errf(err, errlen, "%s is gated (HTTP %ld): accept its terms on %s/%s and set "
                       "%s to an access token of that account%s", c->repo, r->status,
                       c->endpoint, c->repo, c->token_env,
                       have_token ? " (the token given has no access)" : "");
    if (!strcmp(code, "RevisionNotFound"))
        return xi_errf(err, errlen, "%s has no revision '%s' (HTTP %ld)", c->repo, c->rev,
                       r->status);
    if (!strcmp(code, "RepoNotFound") || r->status == 404)
        return xi_errf(err, errlen, "%s: no such model on %s (HTTP %ld); if it is private or "
                       "gated, set %s", c->repo, c->endpoint, r->status, c->token_env);
    if (r->status == 401 || r->status == 403)
        return xi_errf(err, errlen, "%s: not authorised (HTTP %ld): set %s to a token with "
                       "access%s", c->repo, r->status, c->token_env,
                       have_token ? " (the token given was refused)" : "");
    return xi_errf(err, errlen, "%s: %s answered HTTP %ld for %s", c->repo, c->endpoint,
                   r->status, url);
}

static json_t *get_json(hub_ctx *c, const char *url, char *err, size_t errlen, int *rc) {
    xi_buf body = {0};
    xi_http_resp r;
    xi_http_req q = {.url = url, .token = c->token, .follow = 1, .body = &body};
    json_t *j = NULL;
    *rc = -1;
    if (xi_http_do(&q, &r) || r.status != 200) {
        *rc = list_error(c, &r, url, err, errlen);
    } else {
        json_error_t je;
        j = json_loadb(body.data ? body.data : "", body.len, 0, &je);
        if (!j) xi_errf(err, errlen, "%s: the listing is not JSON (%s)", url, je.text);
        else *rc = 0;
    }
    xi_buf_free(&body);
    return j;
}

static int list_hf(hub_ctx *c, char *err, size_t errlen) {
    char *rev = xi_http_escape(c->rev, 0);
    xi_buf url = {0};
    xi_buf_printf(&url, "%s/api/models/%s/revision/%s?blobs=true", c->endpoint, c->repo, rev);
    free(rev);
    int rc;
    json_t *j = get_json(c, url.data, err, errlen, &rc);
    if (!j) goto done;
    rc = -1;
    const char *sha = json_string_value(json_object_get(j, "sha"));
    json_t *sib = json_object_get(j, "siblings");
    if (!sha || !json_is_array(sib)) {
        xi_errf(err, errlen, "%s: the listing has no \"sha\" or \"siblings\"", url.data);
        goto done;
    }
    snprintf(c->commit, sizeof c->commit, "%s", sha);
    size_t i;
    json_t *s;
    json_array_foreach(sib, i, s) {
        const char *path = json_string_value(json_object_get(s, "rfilename"));
        if (!path) continue;
        json_t *lfs = json_object_get(s, "lfs"), *size = json_object_get(s, "size");
        const char *sha256 = json_string_value(json_object_get(lfs, "sha256"));
        const char *blob_id = json_string_value(json_object_get(s, "blobId"));
        int64_t sz = json_is_integer(size) ? json_integer_value(size) : -1;
        if (json_is_integer(json_object_get(lfs, "size")))
            sz = json_integer_value(json_object_get(lfs, "size"));
        if (add_file(c, path, sz, sha256, blob_id)) {
            xi_errf(err, errlen, "out of memory");
            goto done;
        }
    }
    rc = 0;
done:
    json_decref(j);
    xi_buf_free(&url);
    return rc;
}

static int list_ms(hub_ctx *c, char *err, size_t errlen) {
    char *rev = xi_http_escape(c->rev, 0);
    xi_buf url = {0};
    xi_buf_printf(&url, "%s/api/v1/models/%s/repo/files?Revision=%s&Recursive=true", c->endpoint,
                  c->repo, rev);
    free(rev);
    int rc;
    json_t *j = get_json(c, url.data, err, errlen, &rc);
    if (!j) goto done;
    rc = -1;
    json_t *code = json_object_get(j, "Code");
    json_t *files = json_object_get(json_object_get(j, "Data"), "Files");
    if ((json_is_integer(code) && json_integer_value(code) != 200) || !json_is_array(files)) {
        const char *msg = json_string_value(json_object_get(j, "Message"));
        xi_errf(err, errlen, "%s: ModelScope says: %s", c->repo, msg ? msg : "no file list");
        goto done;
    }
    size_t i;
    json_t *f;
    /* Each file carries the commit it was last changed in; the snapshot is named by the
     * newest one only when the API says which, so use the revision unless all agree. */
    const char *commit = NULL;
    int agree = 1;
    json_array_foreach(files, i, f) {
        const char *type = json_string_value(json_object_get(f, "Type"));
        const char *path = json_string_value(json_object_get(f, "Path"));
        if (!path || (type && strcmp(type, "blob"))) continue;
        const char *frev = json_string_value(json_object_get(f, "Revision"));
        if (frev && (!commit || !strcmp(commit, frev))) commit = frev;
        else agree = 0;
        json_t *size = json_object_get(f, "Size");
        if (add_file(c, path, json_is_integer(size) ? json_integer_value(size) : -1,
                     json_string_value(json_object_get(f, "Sha256")), NULL)) {
            xi_errf(err, errlen, "out of memory");
            goto done;
        }
    }
    snprintf(c->commit, sizeof c->commit, "%s",
             agree && safe_blob_name(commit) ? commit : c->rev);
    rc = 0;
done:
    json_decref(j);
    xi_buf_free(&url);
    return rc;
}

/* ---- downloading -------------------------------------------------------------------- */

static char *file_url(hub_ctx *c, const hub_file *f) {
    xi_buf u = {0};
    if (c->source == XI_HUB_SOURCE_MODELSCOPE) {
        char *rev = xi_http_escape(c->rev, 0), *path = xi_http_escape(f->path, 0);
        xi_buf_printf(&u, "%s/api/v1/models/%s/repo?Revision=%s&FilePath=%s", c->endpoint,
                      c->repo, rev, path);
        free(rev);
        free(path);
    } else {
        char *path = xi_http_escape(f->path, 1);
        xi_buf_printf(&u, "%s/%s/resolve/%s/%s", c->endpoint, c->repo, c->commit, path);
        free(path);
    }
    return u.data;
}

/* A listing without blob metadata (some mirrors): ask the resolve URL, as huggingface_hub
 * does, for the etag and size, without following the redirect to the CDN. */
static int head_metadata(hub_ctx *c, hub_file *f, const char *url, char *err, size_t errlen) {
    xi_http_resp r;
    xi_http_req q = {.url = url, .token = c->token, .head = 1};
    xi_buf moved = {0};
    int rc = xi_http_do(&q, &r);
    /* A renamed repo answers with a relative redirect to its new name: follow those only
     * (an absolute one goes to the blob CDN and is what the metadata is about). */
    for (int hop = 0; !rc && hop < 5 && r.status >= 301 && r.status <= 308 && r.location[0] == '/';
         hop++) {
        moved.len = 0;
        xi_buf_printf(&moved, "%s%s", c->endpoint, r.location);
        q.url = moved.data;
        rc = xi_http_do(&q, &r);
    }
    xi_buf_free(&moved);
    if (!rc && r.status == 404 && !strcmp(r.error_code, "EntryNotFound"))
        return xi_errf(err, errlen, "%s@%s lists %s but the hub has no such file (HTTP 404)",
                       c->repo, c->rev, f->path);
    if (r.fail != XI_HTTP_OK || r.status >= 400) return list_error(c, &r, url, err, errlen);
    const char *etag = r.linked_etag[0] ? r.linked_etag : r.etag;
    if (!safe_blob_name(etag))
        return xi_errf(err, errlen, "%s: the hub sent no usable ETag for %s", c->repo, f->path);
    if (f->size < 0) f->size = r.linked_size >= 0 ? r.linked_size : r.content_length;
    if (r.linked_etag[0] && is_hex(r.linked_etag, 64)) f->sha256 = xi_strdup(r.linked_etag);
    f->blob_id = xi_strdup(etag);
    return f->blob_id ? 0 : xi_errf(err, errlen, "out of memory");
}

/* Make snapshots/COMMIT/FILE present and whole. */
static int ensure_file(hub_ctx *c, hub_file *f, xi_hub_result *res, char *err, size_t errlen) {
    xi_buf snap = {0}, blob = {0};
    char *url = NULL;
    int rc = -1;
    struct stat st;
    xi_buf_printf(&snap, "%s/snapshots/%s/%s", c->repo_dir, c->commit, f->path);
    if (!stat(snap.data, &st)) {
        /* A link to another blob than the listing names is stale (a revision like
         * ModelScope's "master" moved), not corrupt: link it anew. */
        char target[512];
        ssize_t n = readlink(snap.data, target, sizeof target - 1);
        if (n > 0 && f->blob_id) {
            target[n] = 0;
            const char *base = strrchr(target, '/');
            if (strcmp(base ? base + 1 : target, f->blob_id)) {
                unlink(snap.data);
                goto fetch;
            }
        }
        int ok = f->size < 0 || st.st_size == f->size;
        if (ok && c->verify && f->sha256) {
            ok = xi_hub_blob_ok(snap.data, f->sha256, -1, err, errlen);
            if (ok < 0) goto done;
        }
        if (ok) {
            rc = 0;
            goto done;
        }
        /* Corrupt: drop the blob the link points at (its name promised other bytes). */
        char *real = realpath(snap.data, NULL);
        if (!c->quiet)
            XI_WARN("%s: cached copy is corrupt (%s mismatch), downloading it again", f->path,
                    f->size >= 0 && st.st_size != f->size ? "size" : "sha256");
        if (real) unlink(real);
        free(real);
        unlink(snap.data);
    }
fetch:
    url = file_url(c, f);
    if (!url) {
        xi_errf(err, errlen, "out of memory");
        goto done;
    }
    if (!f->blob_id && head_metadata(c, f, url, err, errlen)) goto done;
    if (c->source == XI_HUB_SOURCE_MODELSCOPE && !f->blob_id) {
        xi_errf(err, errlen, "%s: ModelScope lists %s without a Sha256", c->repo, f->path);
        goto done;
    }
    xi_buf_printf(&blob, "%s/blobs/%s", c->repo_dir, f->blob_id);
    int have = !stat(blob.data, &st) && (f->size < 0 || st.st_size == f->size);
    if (have && c->verify && f->sha256) {
        have = xi_hub_blob_ok(blob.data, f->sha256, -1, err, errlen);
        if (have < 0) goto done;
        if (!have) unlink(blob.data);
    }
    if (!have) {
        xi_hub_fetch fe = {.url = url, .token = c->token, .token_env = c->token_env,
                           .blob_path = blob.data, .display = f->path, .sha256 = f->sha256,
                           .size = f->size, .retries = c->retries, .progress = c->progress,
                           .quiet = c->quiet};
        int frc = xi_hub_fetch_file(&fe, err, errlen);
        res->bytes_downloaded += fe.bytes_received;
        if (frc) goto done;
        res->n_downloaded++;
    }
    rc = xi_hub_snapshot_link(c->repo_dir, c->commit, f->path, f->blob_id, err, errlen);
done:
    free(url);
    xi_buf_free(&snap);
    xi_buf_free(&blob);
    return rc;
}

/* ---- the cache alone ---------------------------------------------------------------- */

/* Check one cached snapshot entry: its blob exists and, with verify, a blob named by a
 * sha256 still hashes to it. 1 good, 0 bad (err says why), -1 error. */
static int cached_entry_ok(hub_ctx *c, const char *path, const char *name, char *err,
                           size_t errlen) {
    struct stat st;
    if (stat(path, &st)) {
        xi_errf(err, errlen, "%s: cached %s points at a missing blob; run `xinfer pull %s` "
                "with network", c->repo, name, c->repo);
        return 0;
    }
    if (!c->verify) return 1;
    char *real = realpath(path, NULL);
    const char *base = real ? strrchr(real, '/') + 1 : "";
    int good = is_hex(base, 64) ? xi_hub_blob_ok(path, base, -1, err, errlen) : 1;
    if (good == 0)
        xi_errf(err, errlen, "%s: cached %s is corrupt (sha256 mismatch); run `xinfer pull %s` "
                "with network to download it again", c->repo, name, c->repo);
    free(real);
    return good;
}

/* Resolve from the cache: refs/REV → snapshot, which must hold config.json and weights. */
static int resolve_cached(hub_ctx *c, xi_hub_result *res, const char *why, char *err,
                          size_t errlen) {
    if (xi_hub_cached_commit(c->repo_dir, c->rev, c->commit, sizeof c->commit))
        return xi_errf(err, errlen, "%s@%s is not in the cache %s%s", c->repo, c->rev, c->root,
                       why);
    xi_buf dir = {0};
    xi_buf_printf(&dir, "%s/snapshots/%s", c->repo_dir, c->commit);
    int n = 0, n_weights = 0, has_cfg = 0, rc = -1, n_gguf = 0;
    char **ggufs = NULL;
    DIR *d = opendir(dir.data);
    if (!d) {
        xi_errf(err, errlen, "%s: %s: %s", c->repo, dir.data, strerror(errno));
        goto done;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path = xi_path_join(dir.data, e->d_name);
        int ok = path ? cached_entry_ok(c, path, e->d_name, err, errlen) : -1;
        free(path);
        if (ok != 1) goto done;
        n++;
        n_weights += ends_with(e->d_name, ".safetensors");
        has_cfg |= !strcmp(e->d_name, "config.json");
        if (xi_hub_is_gguf_path(e->d_name)) {
            char **g = realloc(ggufs, (size_t)(n_gguf + 1) * sizeof *g);
            if (!g || !(g[n_gguf] = xi_strdup(e->d_name))) {
                if (g) ggufs = g;
                xi_errf(err, errlen, "out of memory");
                goto done;
            }
            ggufs = g;
            n_gguf++;
        }
    }
    if ((c->tag[0] || !n_weights) && n_gguf) {
        /* A GGUF snapshot holds what earlier pulls picked: pick the tag among them. */
        int *chosen = xi_calloc((size_t)n_gguf, sizeof *chosen);
        int k = chosen ? xi_hub_gguf_pick((const char *const *)ggufs, n_gguf, c->tag, chosen,
                                          err, errlen) : -1;
        if (k > 0) res->gguf = xi_path_join(dir.data, ggufs[chosen[0]]);
        free(chosen);
        if (k <= 0) {
            xi_err_prefix(err, errlen, "%s: the cached snapshot %s%s", c->repo, dir.data, why);
            goto done;
        }
        has_cfg = n_weights = 1;
    }
    if (!has_cfg || !n_weights) {
        xi_errf(err, errlen, "%s: the cached snapshot %s is incomplete (no %s)%s", c->repo,
                dir.data, !has_cfg ? "config.json" : "*.safetensors", why);
        goto done;
    }
    res->path = xi_strdup(dir.data);
    res->n_files = n;
    res->from_cache_offline = 1;
    snprintf(res->commit, sizeof res->commit, "%s", c->commit);
    rc = res->path ? 0 : xi_errf(err, errlen, "out of memory");
done:
    if (d) closedir(d);
    for (int i = 0; i < n_gguf; i++) free(ggufs[i]);
    free(ggufs);
    xi_buf_free(&dir);
    return rc;
}

/* ---- GGUF repos ---------------------------------------------------------------------- */

static int count_safetensors(const hub_file *f, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += ends_with(f[i].path, ".safetensors");
    return k;
}

/* With a tag, or without safetensors: pull the picked GGUF file(s) instead of safetensors.
 * Returns 1 when GGUF was picked, 0 when the repo is a safetensors one, -1 on error. */
static int pick_gguf(hub_ctx *c, char *err, size_t errlen) {
    if (!c->tag[0] && (count_safetensors(c->files, c->n_files) || !c->n_ggufs)) return 0;
    const char **paths = xi_calloc((size_t)c->n_ggufs + 1, sizeof *paths);
    int *chosen = xi_calloc((size_t)c->n_ggufs + 1, sizeof *chosen);
    int k = paths && chosen ? 0 : xi_errf(err, errlen, "out of memory");
    for (int i = 0; i < c->n_ggufs && !k; i++) paths[i] = c->ggufs[i].path;
    if (!k) k = xi_hub_gguf_pick(paths, c->n_ggufs, c->tag, chosen, err, errlen);
    free(paths);
    if (k < 0) {
        free(chosen);
        return xi_err_prefix(err, errlen, "%s@%s", c->repo, c->rev);
    }
    /* The safetensors weights stay behind; config and tokenizer files come along. */
    int w = 0;
    for (int i = 0; i < c->n_files; i++) {
        if (ends_with(c->files[i].path, ".safetensors") ||
            ends_with(c->files[i].path, ".safetensors.index.json")) {
            free(c->files[i].path);
            free(c->files[i].sha256);
            free(c->files[i].blob_id);
        } else {
            c->files[w++] = c->files[i];
        }
    }
    c->n_files = w;
    hub_file *f = realloc(c->files, (size_t)(c->n_files + k) * sizeof *f);
    if (!f) {
        free(chosen);
        return xi_errf(err, errlen, "out of memory");
    }
    c->files = f;
    for (int i = 0; i < k; i++) {
        c->files[c->n_files++] = c->ggufs[chosen[i]];
        c->ggufs[chosen[i]] = (hub_file){0};
    }
    snprintf(c->gguf_first, sizeof c->gguf_first, "%s", c->files[c->n_files - k].path);
    free(chosen);
    return 1;
}

/* ---- entry points ------------------------------------------------------------------- */

static int pull(hub_ctx *c, xi_hub_result *res, char *err, size_t errlen) {
    if (c->offline)
        return resolve_cached(c, res, " (offline: HF_HUB_OFFLINE=1 forbids downloading it)",
                              err, errlen);
    int rc = c->source == XI_HUB_SOURCE_MODELSCOPE ? list_ms(c, err, errlen)
                                                   : list_hf(c, err, errlen);
    if (rc == -2) {
        /* No network: a cached copy still serves, as huggingface_hub does. */
        char why[1024];
        snprintf(why, sizeof why, "; %s", err);
        if (resolve_cached(c, res, why, err, errlen)) return -1;
        if (!c->quiet) XI_WARN("%s: hub unreachable, using the cached snapshot %s", c->repo,
                               res->commit);
        return 0;
    }
    if (rc || pick_gguf(c, err, errlen) < 0) return -1;
    int n_weights = count_safetensors(c->files, c->n_files) + !!c->gguf_first[0];
    if (!n_weights)
        return xi_errf(err, errlen, "%s@%s has no safetensors weights and no GGUF file (it "
                       "has: %s)", c->repo, c->rev,
                       c->skipped.len ? c->skipped.data : "no other files");
    if (!is_hex(c->commit, strlen(c->commit)) && c->source == XI_HUB_SOURCE_HF)
        return xi_errf(err, errlen, "%s: the hub gave a bad commit '%s'", c->repo, c->commit);
    xi_buf sub = {0};
    int bad = 0;
    static const char *const dirs[] = {"blobs", "snapshots", "refs"};
    for (size_t i = 0; i < XI_ARRAY_LEN(dirs) && !bad; i++) {
        xi_buf_printf(&sub, "%s/%s", c->repo_dir, dirs[i]);
        bad = xi_hub_mkdirs(sub.data, err, errlen);
        sub.len = 0;
    }
    xi_buf_free(&sub);
    if (bad) return -1;
    for (int i = 0; i < c->n_files; i++)
        if (ensure_file(c, &c->files[i], res, err, errlen)) return -1;
    if (strcmp(c->rev, c->commit) && xi_hub_ref_write(c->repo_dir, c->rev, c->commit, err, errlen))
        return -1;
    xi_buf dir = {0};
    xi_buf_printf(&dir, "%s/snapshots/%s", c->repo_dir, c->commit);
    res->path = dir.data;
    if (c->gguf_first[0] && dir.data && !(res->gguf = xi_path_join(dir.data, c->gguf_first)))
        return xi_errf(err, errlen, "out of memory");
    res->n_files = c->n_files;
    snprintf(res->commit, sizeof res->commit, "%s", c->commit);
    return res->path ? 0 : xi_errf(err, errlen, "out of memory");
}

int xi_hub_pull(const char *name, const xi_hub_options *o, xi_hub_result *r, char *err,
                size_t errlen) {
    xi_hub_options def;
    if (!o) {
        xi_hub_options_default(&def);
        o = &def;
    }
    xi_hub_result local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    hub_ctx c;
    int rc = ctx_init(&c, name, o, err, errlen);
    if (!rc) rc = pull(&c, r, err, errlen);
    ctx_free(&c);
    if (rc) xi_hub_result_free(r);
    if (r == &local) xi_hub_result_free(r);
    return rc ? -1 : 0;
}

char *xi_hub_resolve(const char *name_or_dir, const xi_hub_options *o, char *err, size_t errlen) {
    if (!name_or_dir || !*name_or_dir) {
        xi_errf(err, errlen, "no model given");
        return NULL;
    }
    if (xi_dir_exists(name_or_dir)) return xi_strdup(name_or_dir);
    if (xi_hub_is_gguf_path(name_or_dir) && xi_file_exists(name_or_dir))
        return xi_strdup(name_or_dir);
    if (!strncmp(name_or_dir, "ollama:", 7)) return xi_hub_ollama_resolve(name_or_dir, err, errlen);
    if (!xi_hub_is_repo_name(name_or_dir)) {
        xi_errf(err, errlen, "%s: no such model folder or GGUF file (and not a hub name "
                "ORG/NAME)", name_or_dir);
        return NULL;
    }
    xi_hub_result r;
    if (xi_hub_pull(name_or_dir, o, &r, err, errlen)) return NULL;
    if (!r.gguf) return r.path;
    free(r.path);
    return r.gguf;
}

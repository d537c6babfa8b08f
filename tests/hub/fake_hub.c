/* The fake hub of fake_hub.h: libmicrohttpd on loopback, one internal thread.
 * The tests drive the real client (libcurl) against it, so every URL, header, redirect and
 * Range answer here has to look like the real hubs'. */
#include <arpa/inet.h>
#include <dirent.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "fake_hub.h"
#include "hub/hub.h"

#define MAX_FILES 16

typedef struct served_file {
    char name[256];
    char *data;                 /* [size] owned */
    size_t size;
    char sha256[65];
    char blob_id[41];           /* stands in for the git blob id of a non-LFS file */
    int lfs;                    /* *.safetensors: redirected to /cdn, X-Linked-* headers */
    int downloads;
    long last_range;
    long cut_after;             /* -1: no fault */
    int corrupt;
} served_file;

struct fake_hub {
    struct MHD_Daemon *d;
    char url[64];
    char commit[41], ms_commit[41];
    served_file files[MAX_FILES];
    int n_files;
    int no_blobs;
    int heads, requests;
    xi_buf seen;                /* "PATH?arg=value&...\n" per request */
    pthread_mutex_t mu;
};

/* ---- data --------------------------------------------------------------------------- */

static void hex40(const char *tag, const char *data, size_t n, char out[41]) {
    uint64_t a = xi_hash64(data, n), b = xi_hash64(tag, strlen(tag)) ^ a * 0x9e3779b97f4a7c15ull;
    snprintf(out, 41, "%016llx%016llx%08x", (unsigned long long)a, (unsigned long long)b,
             (unsigned)(a >> 7));
}

static served_file *find_file(fake_hub *h, const char *name) {
    for (int i = 0; i < h->n_files; i++)
        if (!strcmp(h->files[i].name, name)) return &h->files[i];
    return NULL;
}

static served_file *find_sha(fake_hub *h, const char *sha) {
    for (int i = 0; i < h->n_files; i++)
        if (!strcmp(h->files[i].sha256, sha)) return &h->files[i];
    return NULL;
}

/* ---- responses ---------------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *body,
                                 const char *error_code) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (error_code) MHD_add_response_header(r, "X-Error-Code", error_code);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    enum MHD_Result ret = send_text(c, 200, s, NULL);
    free(s);
    return ret;
}

typedef struct body_reader {
    const char *data;
    size_t pos, end;
    long cut_at;                /* absolute offset where the connection drops, -1 none */
    long flip_at;               /* absolute offset of a flipped byte, -1 none */
} body_reader;

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max) {
    body_reader *b = cls;
    size_t at = b->pos + (size_t)pos;
    if (b->cut_at >= 0 && at >= (size_t)b->cut_at) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = XI_MIN(max, b->end - at);
    if (b->cut_at >= 0) n = XI_MIN(n, (size_t)b->cut_at - at);
    if (n == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    memcpy(buf, b->data + at, n);
    if (b->flip_at >= 0 && (size_t)b->flip_at >= at && (size_t)b->flip_at < at + n)
        buf[b->flip_at - at] ^= 0x5a;
    return (ssize_t)n;
}

/* The bytes of f, honouring "Range: bytes=N-" and the one-shot faults. */
static enum MHD_Result send_file(fake_hub *h, struct MHD_Connection *c, served_file *f,
                                 int head, const char *extra_etag, const char *commit) {
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    long from = -1;
    if (range && sscanf(range, "bytes=%ld-", &from) != 1) from = -1;
    if (from >= (long)f->size && f->size > 0) return send_text(c, 416, "", NULL);
    body_reader *b = calloc(1, sizeof *b);
    b->data = f->data;
    b->pos = from > 0 ? (size_t)from : 0;
    b->end = f->size;
    b->cut_at = b->flip_at = -1;
    pthread_mutex_lock(&h->mu);
    if (!head) {
        f->downloads++;
        f->last_range = from;
        if (f->cut_after >= 0) b->cut_at = f->cut_after, f->cut_after = -1;
        if (f->corrupt) b->flip_at = (long)f->size / 2, f->corrupt = 0;
    }
    pthread_mutex_unlock(&h->mu);
    struct MHD_Response *r = head ? MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT)
                                  : MHD_create_response_from_callback(b->end - b->pos, 64 * 1024,
                                                                      read_body, b, free);
    if (head) free(b);
    char buf[128];
    if (extra_etag) {
        snprintf(buf, sizeof buf, "\"%s\"", extra_etag);
        MHD_add_response_header(r, "ETag", buf);
    }
    if (commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    unsigned code = 200;
    if (from > 0 && !head) {
        snprintf(buf, sizeof buf, "bytes %ld-%zu/%zu", from, f->size - 1, f->size);
        MHD_add_response_header(r, "Content-Range", buf);
        code = 206;
    }
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- routes ------------------------------------------------------------------------- */

typedef struct repo_view {
    int ok;                     /* known repo */
    int gated, bin_only;
} repo_view;

static repo_view repo_of(const char *org_name) {
    repo_view v = {0, 0, 0};
    if (!strcmp(org_name, "xi-test/stories260K")) v.ok = 1;
    else if (!strcmp(org_name, "xi-test/gated")) v.ok = v.gated = 1;
    else if (!strcmp(org_name, "xi-test/bin-only")) v.ok = v.bin_only = 1;
    return v;
}

static int authorised(struct MHD_Connection *c) {
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return a && !strcmp(a, "Bearer hf_secret");
}

/* Split "ORG/NAME/rest" after the prefix; repo gets "ORG/NAME", returns rest (or ""). */
static const char *split_repo(const char *path, char *repo, size_t n) {
    const char *s1 = strchr(path, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    size_t len = s2 ? (size_t)(s2 - path) : strlen(path);
    snprintf(repo, n, "%.*s", (int)len, path);
    return s2 ? s2 + 1 : "";
}

static enum MHD_Result hf_listing(fake_hub *h, struct MHD_Connection *c, repo_view v,
                                  const char *rev) {
    if (strcmp(rev, "main") && strcmp(rev, h->commit))
        return send_text(c, 404, "{\"error\":\"Invalid rev id\"}", "RevisionNotFound");
    int blobs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "blobs") && !h->no_blobs;
    json_t *sib = json_array();
    if (v.bin_only) {
        json_array_append_new(sib, json_pack("{s:s}", "rfilename", "config.json"));
        json_array_append_new(sib, json_pack("{s:s}", "rfilename", "pytorch_model.bin"));
    } else {
        for (int i = 0; i < h->n_files; i++) {
            served_file *f = &h->files[i];
            json_t *e = json_pack("{s:s}", "rfilename", f->name);
            if (blobs) {
                json_object_set_new(e, "size", json_integer((json_int_t)f->size));
                json_object_set_new(e, "blobId", json_string(f->blob_id));
                if (f->lfs)
                    json_object_set_new(e, "lfs", json_pack("{s:s,s:I,s:i}", "sha256", f->sha256,
                                                            "size", (json_int_t)f->size,
                                                            "pointerSize", 134));
            }
            json_array_append_new(sib, e);
        }
        /* Listed, never needed: a subfolder and git metadata. */
        json_array_append_new(sib, json_pack("{s:s}", "rfilename", "onnx/model.onnx"));
        json_array_append_new(sib, json_pack("{s:s}", "rfilename", ".gitattributes"));
    }
    return send_json(c, json_pack("{s:s,s:s,s:o,s:b}", "id", "x", "sha", h->commit, "siblings",
                                  sib, "private", 0));
}

static enum MHD_Result hf_resolve(fake_hub *h, struct MHD_Connection *c, const char *rest,
                                  int head) {
    const char *slash = strchr(rest, '/');
    if (!slash) return send_text(c, 404, "{}", "EntryNotFound");
    char rev[64];
    snprintf(rev, sizeof rev, "%.*s", (int)(slash - rest), rest);
    if (strcmp(rev, "main") && strcmp(rev, h->commit))
        return send_text(c, 404, "{}", "RevisionNotFound");
    served_file *f = find_file(h, slash + 1);
    if (!f) return send_text(c, 404, "{}", "EntryNotFound");
    /* Small files come straight from the hub with their git blob id as ETag. */
    if (!f->lfs) return send_file(h, c, f, head, f->blob_id, h->commit);
    char loc[256], size[32], etag[80];
    snprintf(loc, sizeof loc, "%s/cdn/%s", h->url, f->sha256);
    snprintf(size, sizeof size, "%zu", f->size);
    snprintf(etag, sizeof etag, "\"%s\"", f->sha256);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "X-Repo-Commit", h->commit);
    MHD_add_response_header(r, "ETag", etag);
    MHD_add_response_header(r, "X-Linked-Etag", etag);
    MHD_add_response_header(r, "X-Linked-Size", size);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_FOUND, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result ms_route(fake_hub *h, struct MHD_Connection *c, repo_view v,
                                const char *rest) {
    const char *rev = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "Revision");
    if (!rev || strcmp(rev, "master"))
        return send_text(c, 404, "{\"Code\":10010205,\"Message\":\"revision not found\"}", NULL);
    if (!strcmp(rest, "repo/files")) {
        json_t *files = json_array();
        json_array_append_new(files, json_pack("{s:s,s:s,s:s,s:i}", "Name", "onnx", "Path", "onnx",
                                               "Type", "tree", "Size", 0));
        for (int i = 0; i < h->n_files && !v.bin_only; i++) {
            served_file *f = &h->files[i];
            json_array_append_new(files, json_pack("{s:s,s:s,s:s,s:I,s:s,s:s,s:b}", "Name",
                                                   f->name, "Path", f->name, "Type", "blob",
                                                   "Size", (json_int_t)f->size, "Sha256", f->sha256,
                                                   "Revision", h->ms_commit, "IsLFS", f->lfs));
        }
        return send_json(c, json_pack("{s:i,s:{s:o},s:s,s:b}", "Code", 200, "Data", "Files", files,
                                      "Message", "success", "Success", 1));
    }
    if (!strcmp(rest, "repo")) {
        const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "FilePath");
        served_file *f = path ? find_file(h, path) : NULL;
        if (!f) return send_text(c, 404, "{\"Code\":404,\"Message\":\"file not found\"}", NULL);
        return send_file(h, c, f, 0, NULL, NULL);
    }
    return send_text(c, 404, "{}", NULL);
}

static enum MHD_Result record_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
    (void)kind;
    xi_buf_printf(cls, "&%s=%s", key, value ? value : "");
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state) {
    (void)version, (void)upload, (void)upload_size, (void)state;
    fake_hub *h = cls;
    int head = !strcmp(method, "HEAD");
    pthread_mutex_lock(&h->mu);
    h->requests++;
    h->heads += head;
    xi_buf_printf(&h->seen, "%s?", url);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, record_arg, &h->seen);
    xi_buf_printf(&h->seen, "&\n");
    pthread_mutex_unlock(&h->mu);

    char repo[160];
    if (!strncmp(url, "/cdn/", 5)) {
        served_file *f = find_sha(h, url + 5);
        return f ? send_file(h, c, f, head, f->sha256, NULL) : send_text(c, 404, "{}", NULL);
    }
    if (!strncmp(url, "/api/v1/models/", 15)) {
        const char *rest = split_repo(url + 15, repo, sizeof repo);
        repo_view v = repo_of(repo);
        if (!v.ok) return send_text(c, 404, "{\"Code\":10010205,\"Message\":\"model not found\"}", NULL);
        if (v.gated && !authorised(c))
            return send_text(c, 401, "{\"Code\":401,\"Message\":\"login required\"}", NULL);
        return ms_route(h, c, v, rest);
    }
    int api = !strncmp(url, "/api/models/", 12);
    const char *rest = split_repo(url + (api ? 12 : 1), repo, sizeof repo);
    if (!strcmp(repo, "xi-test/renamed")) {
        /* Hugging Face keeps old names of a renamed repo alive as relative redirects. */
        char loc[1024];
        snprintf(loc, sizeof loc, "%sxi-test/stories260K/%s", api ? "/api/models/" : "/", rest);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Location", loc);
        enum MHD_Result ret = MHD_queue_response(c, 307, r);
        MHD_destroy_response(r);
        return ret;
    }
    repo_view v = repo_of(repo);
    if (!v.ok) return send_text(c, 401, "{\"error\":\"Repository not found\"}", "RepoNotFound");
    if (v.gated && !authorised(c))
        return send_text(c, 401, "{\"error\":\"Access to model is restricted\"}", "GatedRepo");
    if (api && !strncmp(rest, "revision/", 9)) return hf_listing(h, c, v, rest + 9);
    if (!api && !strncmp(rest, "resolve/", 8)) return hf_resolve(h, c, rest + 8, head);
    return send_text(c, 404, "{}", NULL);
}

/* ---- life cycle --------------------------------------------------------------------- */

fake_hub *fake_hub_start(const char *model_dir) {
    fake_hub *h = calloc(1, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    DIR *d = opendir(model_dir);
    struct dirent *e;
    char err[256];
    while (d && (e = readdir(d)) && h->n_files < MAX_FILES) {
        if (e->d_name[0] == '.') continue;
        served_file *f = &h->files[h->n_files];
        char *p = xi_path_join(model_dir, e->d_name);
        f->data = xi_read_file(p, &f->size, err, sizeof err);
        if (f->data && !xi_hub_sha256_file(p, f->sha256, err, sizeof err)) {
            snprintf(f->name, sizeof f->name, "%s", e->d_name);
            hex40("blob", f->data, f->size, f->blob_id);
            size_t n = strlen(f->name);
            f->lfs = n > 12 && !strcmp(f->name + n - 12, ".safetensors");
            f->cut_after = -1;
            f->last_range = -1;
            h->n_files++;
        }
        free(p);
    }
    if (d) closedir(d);
    hex40("commit", "hf", 2, h->commit);
    hex40("commit", "ms", 2, h->ms_commit);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
                            handle, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_END);
    const union MHD_DaemonInfo *info = h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (!h->n_files || !info) {
        fake_hub_stop(h);
        return NULL;
    }
    snprintf(h->url, sizeof h->url, "http://127.0.0.1:%u", (unsigned)info->port);
    return h;
}

void fake_hub_stop(fake_hub *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    for (int i = 0; i < h->n_files; i++) free(h->files[i].data);
    xi_buf_free(&h->seen);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

const char *fake_hub_url(const fake_hub *h) { return h->url; }
const char *fake_hub_commit(const fake_hub *h) { return h->commit; }
const char *fake_hub_ms_commit(const fake_hub *h) { return h->ms_commit; }

const char *fake_hub_sha256(const fake_hub *h, const char *file) {
    served_file *f = find_file((fake_hub *)h, file);
    return f ? f->sha256 : NULL;
}

void fake_hub_cut_once(fake_hub *h, const char *file, long after) {
    pthread_mutex_lock(&h->mu);
    served_file *f = find_file(h, file);
    if (f) f->cut_after = after;
    pthread_mutex_unlock(&h->mu);
}

void fake_hub_corrupt_once(fake_hub *h, const char *file) {
    pthread_mutex_lock(&h->mu);
    served_file *f = find_file(h, file);
    if (f) f->corrupt = 1;
    pthread_mutex_unlock(&h->mu);
}

void fake_hub_listing_without_blobs(fake_hub *h) { h->no_blobs = 1; }

void fake_hub_set_commit(fake_hub *h, const char *commit40) {
    pthread_mutex_lock(&h->mu);
    snprintf(h->commit, sizeof h->commit, "%s", commit40);
    pthread_mutex_unlock(&h->mu);
}

int fake_hub_downloads(fake_hub *h, const char *file) {
    pthread_mutex_lock(&h->mu);
    served_file *f = find_file(h, file);
    int n = f ? f->downloads : -1;
    pthread_mutex_unlock(&h->mu);
    return n;
}

long fake_hub_last_range(fake_hub *h, const char *file) {
    pthread_mutex_lock(&h->mu);
    served_file *f = find_file(h, file);
    long n = f ? f->last_range : -2;
    pthread_mutex_unlock(&h->mu);
    return n;
}

int fake_hub_heads(fake_hub *h) {
    pthread_mutex_lock(&h->mu);
    int n = h->heads;
    pthread_mutex_unlock(&h->mu);
    return n;
}

int fake_hub_requests(fake_hub *h) {
    pthread_mutex_lock(&h->mu);
    int n = h->requests;
    pthread_mutex_unlock(&h->mu);
    return n;
}

int fake_hub_saw(fake_hub *h, const char *prefix, const char *arg, const char *value) {
    char want[256];
    snprintf(want, sizeof want, "&%s=%s&", arg ? arg : "", value ? value : "");
    pthread_mutex_lock(&h->mu);
    int found = 0;
    for (const char *line = h->seen.data; line && *line && !found;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (!strncmp(line, prefix, strlen(prefix))) {
            if (!arg) found = 1;
            else {
                /* Arguments of this line are "&k=v&k=v&": look inside it only. */
                char *l = xi_strndup(line, n);
                char *q = l ? strchr(l, '?') : NULL;
                found = q && strstr(q, want) != NULL;
                free(l);
            }
        }
        line = end ? end + 1 : line + n;
    }
    pthread_mutex_unlock(&h->mu);
    return found;
}

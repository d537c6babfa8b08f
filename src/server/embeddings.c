/* server/embeddings: POST /v1/embeddings for a pooling model, and the detection of one.
 *
 * Each input becomes one pooling request (prefill only, last-token pooling); the engine
 * schedules them with everything else, so a list is batched and shares the prefix cache.
 * The output callback runs on the engine thread and only copies the vector into the job's
 * slot under the job mutex. No HTTP thread waits: until every vector is in, the connection is
 * suspended (as completion.c's plain answers are, first wait deferred), the callback of the last
 * input resumes it, and the watchdog (xi_job_watch) resumes it when the client leaves or the
 * server closes. The job is reference counted (the connection plus one per unfinished request),
 * so a client that leaves early only aborts its requests, and it counts among the server's
 * requests in flight until freed, so a graceful shutdown waits for it. */
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/embeddings.h"
#include "base/base.h"
#include "server/server_internal.h"

#define MAX_INPUTS 2048

typedef struct emb_input {
    emb_job *job;
    int32_t *ids;                    /* [n_ids] owned */
    int n_ids;
    int64_t id;                      /* engine request id, -1 until submitted */
    int done;                        /* mu: its final event arrived */
    xi_finish_reason finish;         /* mu */
    float *vec;                      /* [dim] in job->vecs */
} emb_input;

/* The request as parsed. */
typedef struct emb_req {
    const char *model;               /* borrowed from the body, only while handling */
    int base64, normalize, add_special, dimensions, truncate;
} emb_req;

struct emb_job {
    xi_server *s;
    xi_engine *eng;
    emb_job *prev, *next;            /* server's list of live embedding jobs (s->mu) */
    struct MHD_Connection *conn;
    emb_req req;
    pthread_mutex_t mu;
    int suspended;                   /* mu: the connection waits for the engine or the watchdog */
    int gone;                        /* mu: the client went away while suspended */
    int deferred;                    /* mu: the first wait returned without suspending */
    int http11;                      /* the client speaks HTTP/1.1 (may get a 100 probe) */
    int probed;                      /* mu: the 100 probe was sent */
    int refs;                        /* mu */
    int n_left;                      /* mu: submitted inputs without their final event */
    emb_input *in;                   /* [n_in] */
    int n_in;
    int dim;
    float *vecs;                     /* [n_in][dim] */
};

static void job_free(emb_job *j) {
    xi_server *s = j->s;
    pthread_mutex_lock(&s->mu);
    if (j->prev) j->prev->next = j->next;
    else if (s->embs == j) s->embs = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_jobs--;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < j->n_in; i++) free(j->in[i].ids);
    free(j->in);
    free(j->vecs);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void job_release(emb_job *j) {
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (!left) job_free(j);
}

/* Engine thread: copy the vector, never wait. */
static void on_output(void *user, const xi_output *o) {
    emb_input *in = user;
    emb_job *j = in->job;
    if (o->finish_reason == XI_FINISH_NONE) return;
    if (j->s->metrics) {
        xi_metrics_sample m = {.finish = o->finish_reason, .ttft = -1,
                               .e2e = o->arrival_time > 0 ? xi_wall_time() - o->arrival_time : -1,
                               .queue = o->queue_time, .prefill = o->prefill_time,
                               .prompt_tokens = o->prompt_tokens, .prefilled = o->finish_reason == XI_FINISH_STOP};
        xi_metrics_observe(j->s->metrics, &m);
    }
    pthread_mutex_lock(&j->mu);
    in->finish = o->finish_reason;
    if (o->embedding && o->n_embedding == j->dim)
        memcpy(in->vec, o->embedding, (size_t)j->dim * sizeof *in->vec);
    else if (o->finish_reason == XI_FINISH_STOP)
        in->finish = XI_FINISH_ERROR;
    in->done = 1;
    j->n_left--;
    int left = --j->refs;
    if (j->suspended && j->n_left == 0) {
        j->suspended = 0;
        MHD_resume_connection(j->conn);
    }
    pthread_mutex_unlock(&j->mu);
    if (!left) job_free(j);
}

/* ---- parsing ------------------------------------------------------------------------------ */

static int ids_of(emb_input *in, const json_t *arr, int vocab, xi_oai_error *e) {
    size_t n = json_array_size(arr), k;
    json_t *v;
    if (!n) return xi_oai_fail(e, 400, "input", "input: a list of token ids is empty");
    in->ids = malloc(n * sizeof *in->ids);
    if (!in->ids) return xi_oai_fail(e, 500, NULL, "out of memory");
    json_array_foreach(arr, k, v) {
        json_int_t t = json_integer_value(v);
        if (!json_is_integer(v) || t < 0 || t >= vocab)
            return xi_oai_fail(e, 400, "input", "input: token ids must be integers in [0, %d)", vocab);
        in->ids[k] = (int32_t)t;
    }
    in->n_ids = (int)n;
    return 0;
}

static int text_of(emb_job *j, emb_input *in, const json_t *v, const emb_req *r, xi_oai_error *e) {
    if (!json_string_length(v)) return xi_oai_fail(e, 400, "input", "input: an empty string has no embedding");
    char err[256] = "";
    in->n_ids = xi_engine_tokenize(j->eng, json_string_value(v), r->add_special, &in->ids, err, sizeof err);
    if (in->n_ids < 0) {
        in->n_ids = 0;
        return xi_oai_fail(e, 400, "input", "input: %s", err);
    }
    return 0;
}

/* input: a string, a list of strings, a list of ids, or a list of lists of ids. */
static int parse_inputs(emb_job *j, const json_t *input, const emb_req *r, xi_oai_error *e) {
    const int vocab = j->s->info.vocab_size;
    const int one = json_is_string(input) || (json_is_array(input) && json_is_integer(json_array_get(input, 0)));
    if (!one && !json_is_array(input))
        return xi_oai_fail(e, 400, "input", "input: expected a string, a list of strings, a list of token ids or a list of lists of token ids");
    size_t n = one ? 1 : json_array_size(input);
    if (!n) return xi_oai_fail(e, 400, "input", "input: the list is empty");
    if (n > MAX_INPUTS) return xi_oai_fail(e, 400, "input", "input: %zu inputs, at most %d per request", n, MAX_INPUTS);
    j->in = calloc(n, sizeof *j->in);
    if (!j->in) return xi_oai_fail(e, 500, NULL, "out of memory");
    j->n_in = (int)n;
    for (size_t i = 0; i < n; i++) {
        emb_input *in = &j->in[i];
        in->job = j;
        in->id = -1;
        const json_t *v = one ? input : json_array_get(input, i);
        int rc = json_is_string(v)  ? text_of(j, in, v, r, e)
                 : json_is_array(v) ? ids_of(in, v, vocab, e)
                 : xi_oai_fail(e, 400, "input", "input[%zu]: expected a string or a list of token ids (not mixed)", i);
        if (rc) return -1;
        if (r->truncate > 0 && in->n_ids > r->truncate) { /* keep the last tokens, as vLLM */
            memmove(in->ids, in->ids + in->n_ids - r->truncate, (size_t)r->truncate * sizeof *in->ids);
            in->n_ids = r->truncate;
        }
        const int max_len = j->s->info.max_model_len;
        if (in->n_ids > max_len)
            return xi_oai_fail(e, 400, "input",
                               "This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.",
                               max_len, in->n_ids);
    }
    return 0;
}

static int parse_request(xi_server *s, const json_t *root, emb_req *r, xi_oai_error *e) {
    memset(r, 0, sizeof *r);
    r->normalize = r->add_special = 1;
    if (!json_is_object(root)) return xi_oai_fail(e, 400, NULL, "the body must be a JSON object");
    const json_t *v = json_object_get(root, "model");
    if (v && !json_is_null(v) && !json_is_string(v)) return xi_oai_fail(e, 400, "model", "model: expected a string");
    r->model = json_string_value(v);
    if ((v = json_object_get(root, "encoding_format")) && !json_is_null(v)) {
        const char *f = json_string_value(v);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
            return xi_oai_fail(e, 400, "encoding_format", "encoding_format: expected \"float\" or \"base64\"");
        r->base64 = !strcmp(f, "base64");
    }
    if ((v = json_object_get(root, "dimensions")) && !json_is_null(v)) {
        json_int_t d = json_integer_value(v);
        if (!json_is_integer(v) || d < 1 || d > s->info.hidden_size)
            return xi_oai_fail(e, 400, "dimensions", "dimensions: must be an integer in [1, %d], the model's embedding size",
                               s->info.hidden_size);
        r->dimensions = (int)d;
    }
    if ((v = json_object_get(root, "truncate_prompt_tokens")) && !json_is_null(v)) {
        json_int_t t = json_integer_value(v);
        if (!json_is_integer(v) || t < -1 || t == 0)
            return xi_oai_fail(e, 400, "truncate_prompt_tokens", "truncate_prompt_tokens: expected -1 (max_model_len) or a positive integer");
        r->truncate = t < 0 || t > s->info.max_model_len ? s->info.max_model_len : (int)t;
    }
    static const char *const flags[] = {"normalize", "add_special_tokens"};
    int *dst[] = {&r->normalize, &r->add_special};
    for (int i = 0; i < 2; i++) {
        if (!(v = json_object_get(root, flags[i])) || json_is_null(v)) continue;
        if (!json_is_boolean(v)) return xi_oai_fail(e, 400, flags[i], "%s: expected true or false", flags[i]);
        *dst[i] = json_is_true(v);
    }
    if (!json_object_get(root, "input")) return xi_oai_fail(e, 400, "input", "input: missing");
    return 0;
}

/* ---- answer ------------------------------------------------------------------------------- */

static int submit_all(emb_job *j, const emb_req *r, xi_oai_error *e) {
    for (int i = 0; i < j->n_in; i++) {
        emb_input *in = &j->in[i];
        xi_request_params p;
        xi_request_params_default(&p);
        p.prompt_ids = in->ids;
        p.n_prompt_ids = in->n_ids;
        p.pooling = 1;
        p.normalize = r->normalize;
        p.dimensions = r->dimensions;
        /* the final event may arrive before submit returns: count it in first */
        pthread_mutex_lock(&j->mu);
        j->refs++;
        j->n_left++;
        pthread_mutex_unlock(&j->mu);
        char err[512] = "";
        int64_t id = xi_engine_submit(j->eng, &p, on_output, in, err, sizeof err);
        pthread_mutex_lock(&j->mu);
        if (id >= 0) in->id = id;
        else j->refs--, j->n_left--;
        pthread_mutex_unlock(&j->mu);
        if (id == -2) return xi_oai_fail(e, 503, NULL, "the server is overloaded: the waiting queue is full (--max-queue-len); retry later");
        if (id < 0) return xi_oai_fail(e, 400, "input", "input[%d]: %s", i, err);
    }
    return 0;
}

static void abort_all(emb_job *j) {
    for (int i = 0; i < j->n_in; i++) {
        pthread_mutex_lock(&j->mu);
        int64_t id = j->in[i].done ? -1 : j->in[i].id;
        pthread_mutex_unlock(&j->mu);
        if (id >= 0) xi_engine_abort(j->eng, id);
    }
}

/* OpenAI's base64 form: the float32 values' little-endian bytes. */
static json_t *base64_of(const float *v, int n) {
    const size_t nb = (size_t)n * 4;
    unsigned char *raw = malloc(nb), *enc = malloc(4 * ((nb + 2) / 3) + 1);
    json_t *out = NULL;
    if (raw && enc) {
        for (int i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int b = 0; b < 4; b++) raw[(size_t)i * 4 + (size_t)b] = (unsigned char)(u >> (8 * b));
        }
        int len = EVP_EncodeBlock(enc, raw, (int)nb);
        out = json_stringn((const char *)enc, (size_t)len);
    }
    free(raw);
    free(enc);
    return out;
}

static json_t *body_of(emb_job *j, const emb_req *r) {
    json_t *data = json_array();
    long prompt = 0;
    for (int i = 0; i < j->n_in; i++) {
        const float *v = j->in[i].vec;
        json_t *emb = NULL;
        if (r->base64) {
            emb = base64_of(v, j->dim);
        } else {
            emb = json_array();
            for (int k = 0; k < j->dim; k++) json_array_append_new(emb, json_real(v[k]));
        }
        json_array_append_new(data, json_pack("{s:i, s:s, s:o}", "index", i, "object", "embedding",
                                              "embedding", emb));
        prompt += j->in[i].n_ids;
    }
    char id[40];
    xi_srv_new_id(j->s, "embd", id);
    return json_pack("{s:s, s:s, s:I, s:s, s:o, s:{s:I, s:I, s:i}}", "id", id, "object", "list",
                     "created", (json_int_t)time(NULL), "model", j->s->cfg.served_names[0], "data",
                     data, "usage", "prompt_tokens", (json_int_t)prompt, "total_tokens",
                     (json_int_t)prompt, "completion_tokens", 0);
}

static int served(xi_server *s, const char *name) {
    for (int i = 0; name && i < s->cfg.n_served_names; i++)
        if (!strcmp(name, s->cfg.served_names[i])) return 1;
    return !name;
}

/* Every vector is in: the body, or the error of the first input the engine did not finish. */
static enum MHD_Result answer(emb_job *j) {
    xi_oai_error e;
    for (int i = 0; i < j->n_in; i++)
        if (j->in[i].finish != XI_FINISH_STOP) {
            xi_oai_fail(&e, j->in[i].finish == XI_FINISH_ABORT ? 503 : 500, NULL,
                        "input[%d]: the engine %s the request", i,
                        j->in[i].finish == XI_FINISH_ABORT ? "aborted" : "failed");
            return xi_srv_respond_error(j->conn, &e);
        }
    if (j->s->cfg.log_requests) xi_srv_log("Embeddings request: %d input(s), dimensions=%d", j->n_in, j->dim);
    json_t *out = body_of(j, &j->req);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return xi_srv_respond(j->conn, MHD_HTTP_OK, "application/json", text);
}

enum MHD_Result xi_embeddings_resume(emb_job *j) {
    pthread_mutex_lock(&j->mu);
    const int done = j->n_left == 0, gone = j->gone || atomic_load(&j->s->closing);
    const int parked = !done && !gone;
    /* the first wait returns without suspending, as completion.c's plain answers do, so that
     * a client that half-closed still meets its EOF once resumed */
    const int suspend = parked && j->deferred;
    if (parked) j->deferred = 1;
    if (suspend) j->suspended = 1;
    pthread_mutex_unlock(&j->mu);
    if (suspend) MHD_suspend_connection(j->conn);
    if (parked) return MHD_YES;
    if (!done) {
        abort_all(j);
        return MHD_NO;
    }
    return answer(j);
}

void xi_embeddings_connection_done(emb_job *j, int ok) {
    if (!ok) abort_all(j);
    job_release(j);
}

void xi_embeddings_watch(xi_server *s, int closing) {
    pthread_mutex_lock(&s->mu);
    for (emb_job *j = s->embs; j; j = j->next) {
        pthread_mutex_lock(&j->mu);
        if (j->suspended && (closing || xi_srv_peer_closed(j->conn, 1, j->http11 ? &j->probed : NULL))) {
            j->gone = 1;
            j->suspended = 0;
            MHD_resume_connection(j->conn);
        }
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

enum MHD_Result xi_embeddings_handle(xi_server *s, struct MHD_Connection *c, int http11,
                                     const char *body, size_t len, emb_job **out) {
    *out = NULL;
    xi_oai_error e;
    if (!s->cfg.pooling) {
        xi_oai_fail(&e, 400, NULL, "The model does not support Embeddings API (it is served as a generative model; start it with --runner pooling)");
        return xi_srv_respond_error(c, &e);
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root) {
        xi_oai_fail(&e, 400, NULL, "the body is not valid JSON: %s (line %d)", jerr.text, jerr.line);
        return xi_srv_respond_error(c, &e);
    }
    emb_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(root);
        return MHD_NO;
    }
    pthread_mutex_init(&j->mu, NULL);
    j->s = s;
    j->eng = atomic_load(&s->engine);
    j->conn = c;
    j->http11 = http11;
    j->refs = 1; /* this handler's; the connection's once it outlives this call */
    /* counted among the server's requests in flight until freed: a graceful shutdown waits */
    pthread_mutex_lock(&s->mu);
    j->next = s->embs;
    if (s->embs) s->embs->prev = j;
    s->embs = j;
    s->n_jobs++;
    pthread_mutex_unlock(&s->mu);
    emb_req *r = &j->req;
    enum MHD_Result ret;
    if (parse_request(s, root, r, &e)) goto fail;
    if (!served(s, r->model)) {
        xi_oai_fail(&e, 404, "model", "The model `%s` does not exist.", r->model);
        goto fail;
    }
    r->model = NULL; /* root goes before the answer */
    if (parse_inputs(j, json_object_get(root, "input"), r, &e)) goto fail;
    j->dim = r->dimensions ? r->dimensions : s->info.hidden_size;
    j->vecs = calloc((size_t)j->n_in * (size_t)j->dim, sizeof *j->vecs);
    if (!j->vecs) {
        xi_oai_fail(&e, 500, NULL, "out of memory");
        goto fail;
    }
    for (int i = 0; i < j->n_in; i++) j->in[i].vec = j->vecs + (size_t)i * (size_t)j->dim;
    if (submit_all(j, r, &e)) {
        abort_all(j);
        goto fail;
    }
    json_decref(root);
    *out = j; /* the connection's reference from now on */
    return xi_embeddings_resume(j);
fail:
    ret = xi_srv_respond_error(c, &e);
    json_decref(root);
    job_release(j);
    return ret;
}

/* ---- detection ---------------------------------------------------------------------------- */

void xi_server_set_pooling(xi_server *s, int pooling) { s->cfg.pooling = pooling; }

int xi_pooling_resolve(const char *runner, const char *dir, char *err, size_t errlen) {
    if (runner && !strcmp(runner, "generate")) return 0;
    int st = xi_pooling_detect(dir, err, errlen);
    if (st < 0) return -1;
    return st || (runner && !strcmp(runner, "pooling"));
}

int xi_pooling_detect(const char *dir, char *err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/modules.json", dir);
    json_t *mods = json_load_file(path, 0, NULL);
    if (!mods) return 0;
    const char *pool_dir = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(mods, i, m) {
        const char *type = json_string_value(json_object_get(m, "type"));
        if (type && strstr(type, "Pooling")) pool_dir = json_string_value(json_object_get(m, "path"));
    }
    int rc = 0;
    if (pool_dir) {
        snprintf(path, sizeof path, "%s/%s/config.json", dir, pool_dir);
        json_t *cfg = json_load_file(path, 0, NULL);
        if (!cfg) {
            snprintf(err, errlen, "%s: missing or not JSON (modules.json lists a pooling module)", path);
            rc = -1;
        } else if (json_is_true(json_object_get(cfg, "pooling_mode_lasttoken"))) {
            rc = 1;
        } else {
            const char *key;
            json_t *v;
            const char *mode = "no mode";
            json_object_foreach(cfg, key, v) if (json_is_true(v) && !strncmp(key, "pooling_mode_", 13)) mode = key;
            snprintf(err, errlen, "%s: %s is not supported (last-token pooling only)", path, mode);
            rc = -1;
        }
        json_decref(cfg);
    }
    json_decref(mods);
    return rc;
}

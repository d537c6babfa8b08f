/* loadgen/client: the streaming HTTP client and the sweep loop.
 *
 * Why libcurl's multi interface on one thread rather than a thread per in-flight request:
 * every timestamp is taken by the same thread right after curl_multi_poll wakes, so a chunk's
 * time is its arrival plus one wake-up (microseconds), not plus however long a scheduler
 * leaves a thread runnable while N others compete for two cores; no locks guard the results;
 * and a level of 256 streams costs 256 easy handles, not 256 stacks. The server under test
 * usually shares the machine, so the client must stay the lighter side of the measurement. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int curl_ready(char *err, size_t errlen) {
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return xi_errf(err, errlen, "libcurl: %s", curl_easy_strerror(curl_init_rc));
    return 0;
}

/* ---- config, URL and body ------------------------------------------------------------ */

void xi_loadgen_config_default(xi_loadgen_config *c) {
    static const int levels[] = {1, 2, 4, 8, 16};
    memset(c, 0, sizeof *c);
    c->url = "http://127.0.0.1:8000";
    c->endpoint = XI_LG_COMPLETIONS;
    c->concurrency = levels;
    c->n_levels = (int)XI_ARRAY_LEN(levels);
    c->num_requests = 64;
    c->prompt_len_min = c->prompt_len_max = 128;
    c->output_len = 128;
    c->seed = 0;
    c->timeout_s = 300;
    c->stream_usage = 1;
    c->ignore_eos = 1;
    c->burstiness = 1.0;
}

/* Level l's request rate: INFINITY for a closed loop. */
static double level_rate(const xi_loadgen_config *c, int l) {
    return c->request_rate ? c->request_rate[l] : INFINITY;
}

int xi_loadgen_config_check(const xi_loadgen_config *c, char *err, size_t errlen) {
    if (!c->url || !*c->url) return xi_errf(err, errlen, "url: missing");
    if (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8))
        return xi_errf(err, errlen, "url '%s': must start with http:// or https://", c->url);
    if (!c->model || !*c->model) return xi_errf(err, errlen, "model: missing");
    if (c->n_levels < 1 || !c->concurrency)
        return xi_errf(err, errlen, "concurrency: no levels");
    for (int i = 0; i < c->n_levels; i++)
        if (c->concurrency[i] < 1 || c->concurrency[i] > 100000)
            return xi_errf(err, errlen, "concurrency %d: must be 1..100000", c->concurrency[i]);
    for (int i = 0; c->request_rate && i < c->n_levels; i++)
        if (!(c->request_rate[i] > 0)) /* NaN too */
            return xi_errf(err, errlen, "request-rate %g: must be > 0 requests/s, or inf",
                           c->request_rate[i]);
    if (!(c->burstiness > 0) || !isfinite(c->burstiness))
        return xi_errf(err, errlen, "burstiness %g: must be a finite number > 0", c->burstiness);
    if (c->num_requests < 1) return xi_errf(err, errlen, "num-requests %d: must be >= 1", c->num_requests);
    if (c->prompt_len_min < 0 || c->prompt_len_max < c->prompt_len_min)
        return xi_errf(err, errlen, "prompt-len %d:%d: need 0 <= min <= max", c->prompt_len_min,
                       c->prompt_len_max);
    if (c->prompt_len_max + c->shared_prefix_len < 1)
        return xi_errf(err, errlen, "prompt-len: prompts would be empty");
    if (c->shared_prefix_len < 0)
        return xi_errf(err, errlen, "shared-prefix-len %d: must be >= 0", c->shared_prefix_len);
    if (c->output_len < 1) return xi_errf(err, errlen, "output-len %d: must be >= 1", c->output_len);
    if (!(c->timeout_s > 0)) return xi_errf(err, errlen, "timeout: must be > 0 seconds");
    return 0;
}

static int ends_with(const char *s, size_t n, const char *tail) {
    size_t k = strlen(tail);
    return n >= k && !memcmp(s + n - k, tail, k);
}

char *xi_loadgen_endpoint_url(const char *url, xi_loadgen_endpoint e) {
    size_t n = strlen(url);
    while (n && url[n - 1] == '/') n--;
    const char *tail = e == XI_LG_CHAT ? "/chat/completions" : "/completions";
    xi_buf b = {0};
    if (ends_with(url, n, "/chat/completions") || ends_with(url, n, "/completions"))
        xi_buf_printf(&b, "%.*s", (int)n, url);
    else if (ends_with(url, n, "/v1"))
        xi_buf_printf(&b, "%.*s%s", (int)n, url, tail);
    else
        xi_buf_printf(&b, "%.*s/v1%s", (int)n, url, tail);
    return b.data;
}

char *xi_loadgen_request_body(const xi_loadgen_config *c, const char *prompt) {
    json_t *j = json_object();
    json_object_set_new(j, "model", json_string(c->model));
    if (c->endpoint == XI_LG_CHAT) {
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("user"));
        json_object_set_new(msg, "content", json_string(prompt));
        json_t *msgs = json_array();
        json_array_append_new(msgs, msg);
        json_object_set_new(j, "messages", msgs);
    } else {
        json_object_set_new(j, "prompt", json_string(prompt));
    }
    json_object_set_new(j, "max_tokens", json_integer(c->output_len));
    json_object_set_new(j, "temperature", json_real(0.0));
    json_object_set_new(j, "stream", json_true());
    if (c->stream_usage) {
        json_t *so = json_object();
        json_object_set_new(so, "include_usage", json_true());
        json_object_set_new(j, "stream_options", so);
    }
    if (c->ignore_eos) json_object_set_new(j, "ignore_eos", json_true());
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

/* ---- one request ----------------------------------------------------------------------- */

#define KEEP_BODY 4096  /* bytes of a non-SSE or error answer kept for the message */

typedef struct req {
    CURL *h;                  /* reused by the slot across requests; owned */
    char *body;               /* request JSON, alive until the transfer ends; owned */
    xi_sse sse;
    xi_loadgen_result *r;     /* where the outcome goes; borrowed */
    long status;              /* HTTP status, 0 until the first body byte */
    xi_buf head;              /* first KEEP_BODY bytes of the answer; owned */
    double last_chunk;        /* time of the previous content chunk */
    int itl_cap;
    int events, done, finished, oom;
    xi_loadgen_err stream_err;  /* set by the event parser; XI_LG_OK otherwise */
    char errbuf[CURL_ERROR_SIZE];
} req;

static void set_err(xi_loadgen_result *r, xi_loadgen_err kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(xi_loadgen_result *r, xi_loadgen_err kind, const char *fmt, ...) {
    r->err = kind;
    free(r->err_msg);
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r->err_msg = xi_strdup(line);
}

/* The text a server put in its error answer: OpenAI's {"error":{"message"}}, a bare
 * {"message"} / {"detail"} (FastAPI) / {"error":"..."}, or the start of the body. */
static void error_text(const char *body, size_t n, char *out, size_t outlen) {
    json_t *j = json_loadb(body, n, 0, NULL);
    const char *m = NULL;
    if (j) {
        json_t *e = json_object_get(j, "error");
        if (json_is_object(e)) m = json_string_value(json_object_get(e, "message"));
        if (!m && json_is_string(e)) m = json_string_value(e);
        if (!m) m = json_string_value(json_object_get(j, "message"));
        if (!m) m = json_string_value(json_object_get(j, "detail"));
    }
    if (m) snprintf(out, outlen, "%s", m);
    else snprintf(out, outlen, "%.*s", (int)XI_MIN(n, 200), body);
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    json_decref(j);
}

/* A content chunk: text the model produced (completions' text, chat's content or the reasoning
 * fields vLLM and llama.cpp send for thinking models). An empty string is not a token. */
static const char *chunk_text(json_t *choice) {
    const char *t = json_string_value(json_object_get(choice, "text"));
    if (t && *t) return t;
    json_t *d = json_object_get(choice, "delta");
    if (!json_is_object(d)) return NULL;
    static const char *const keys[] = {"content", "reasoning_content", "reasoning"};
    for (size_t i = 0; i < XI_ARRAY_LEN(keys); i++) {
        t = json_string_value(json_object_get(d, keys[i]));
        if (t && *t) return t;
    }
    return NULL;
}

static int on_event(void *ud, const char *data, size_t len) {
    req *q = ud;
    xi_loadgen_result *r = q->r;
    double now = xi_now();
    q->events++;
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        q->done = 1;
        return 0;
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        set_err(r, XI_LG_ERR_STREAM, "event %d is not a JSON object: %.80s", q->events, data);
        q->stream_err = XI_LG_ERR_STREAM;
        return 1;
    }
    json_t *e = json_object_get(j, "error");
    if (e && !json_is_null(e)) {
        char *s = json_dumps(j, JSON_COMPACT);
        char msg[300];
        error_text(s, strlen(s), msg, sizeof msg);
        free(s);
        json_decref(j);
        set_err(r, XI_LG_ERR_STREAM, "error event in the stream: %s", msg);
        q->stream_err = XI_LG_ERR_STREAM;
        return 1;
    }
    json_t *choices = json_object_get(j, "choices");
    size_t k;
    json_t *ch;
    json_array_foreach(choices, k, ch) {
        if (chunk_text(ch)) {
            if (r->chunks == 0) {
                r->ttft = now - r->start;
            } else {
                if (r->chunks - 1 >= q->itl_cap) {
                    int cap = q->itl_cap ? q->itl_cap * 2 : 64;
                    double *p = realloc(r->itl, sizeof(double) * (size_t)cap);
                    if (!p) {
                        q->oom = 1;
                        json_decref(j);
                        return 1;
                    }
                    r->itl = p;
                    q->itl_cap = cap;
                }
                r->itl[r->chunks - 1] = now - q->last_chunk;
            }
            q->last_chunk = now;
            r->chunks++;
        }
        json_t *fr = json_object_get(ch, "finish_reason");
        if (fr && !json_is_null(fr)) q->finished = 1;
    }
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        json_t *ct = json_object_get(u, "completion_tokens");
        json_t *pt = json_object_get(u, "prompt_tokens");
        if (json_is_integer(ct)) {
            r->output_tokens = (int)json_integer_value(ct);
            r->usage_reported = 1;
        }
        if (json_is_integer(pt)) r->prompt_tokens = (int)json_integer_value(pt);
    }
    json_decref(j);
    return 0;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    req *q = ud;
    size_t n = size * nmemb;
    if (q->status == 0) curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
    if (q->head.len < KEEP_BODY && xi_buf_append(&q->head, ptr, XI_MIN(n, KEEP_BODY - q->head.len)))
        q->oom = 1;
    if (q->status < 200 || q->status >= 300) return n;  /* an error answer: keep its head only */
    int rc = xi_sse_feed(&q->sse, ptr, n);
    if (rc == -1) q->oom = 1;
    if (rc == -2) {
        set_err(q->r, XI_LG_ERR_STREAM, "an SSE line or event longer than %u bytes", XI_SSE_MAX_EVENT);
        q->stream_err = XI_LG_ERR_STREAM;
    }
    return rc ? 0 : n;   /* 0 makes libcurl abort the transfer */
}

static int req_start(req *q, const xi_loadgen_config *c, const char *url,
                     struct curl_slist *hdrs, int level, int index, xi_loadgen_result *r) {
    memset(r, 0, sizeof *r);
    r->prompt_tokens = -1;
    q->r = r;
    q->status = 0;
    q->head.len = 0;
    q->events = q->done = q->finished = q->oom = 0;
    q->itl_cap = 0;
    q->stream_err = XI_LG_OK;
    q->errbuf[0] = 0;
    xi_sse_free(&q->sse);
    xi_sse_init(&q->sse, on_event, q);
    int plen = xi_loadgen_prompt_len(c->seed, level, index, c->prompt_len_min, c->prompt_len_max);
    r->prompt_words = plen + c->shared_prefix_len;
    char *prompt = xi_loadgen_prompt(c->seed, level, index, c->shared_prefix_len, plen);
    free(q->body);
    q->body = prompt ? xi_loadgen_request_body(c, prompt) : NULL;
    free(prompt);
    if (!q->body) return -1;
    CURL *h = q->h;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(h, CURLOPT_PRIVATE, q);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, q->errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1e3));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(XI_MIN(c->timeout_s, 30.0) * 1e3));
    r->start = xi_now();
    return 0;
}

/* Classify the finished transfer into r. */
static void req_finish(req *q, CURLcode cc) {
    xi_loadgen_result *r = q->r;
    r->e2e = xi_now() - r->start;
    if (q->status == 0) curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
    const char *cmsg = q->errbuf[0] ? q->errbuf : curl_easy_strerror(cc);
    if (q->oom) {
        set_err(r, XI_LG_ERR_OTHER, "out of memory while reading the answer");
    } else if (q->status >= 300 || (q->status > 0 && q->status < 200)) {
        char msg[300];
        error_text(q->head.data ? q->head.data : "", q->head.len, msg, sizeof msg);
        set_err(r, q->status >= 500 ? XI_LG_ERR_HTTP_5XX
                   : q->status >= 400 ? XI_LG_ERR_HTTP_4XX : XI_LG_ERR_OTHER,
                "HTTP %ld: %s", q->status, msg);
    } else if (q->stream_err != XI_LG_OK) {
        /* the parser wrote the message */
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        set_err(r, XI_LG_ERR_TIMEOUT, "%s (after %d content chunks)", cmsg, r->chunks);
    } else if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
               cc == CURLE_COULDNT_RESOLVE_PROXY || (cc != CURLE_OK && q->status == 0)) {
        set_err(r, XI_LG_ERR_CONNECT, "%s", cmsg);
    } else if (cc != CURLE_OK) {
        set_err(r, XI_LG_ERR_STREAM, "stream cut after %d content chunks: %s", r->chunks, cmsg);
    } else {
        /* The transfer ended cleanly: the stream must have ended too. Servers mark the end with
         * "data: [DONE]" (OpenAI, vLLM, xinfer) or at least a finish_reason (some llama.cpp
         * versions); a final event without its blank line still counts then. */
        int frc = xi_sse_finish(&q->sse, 1);
        if (q->stream_err != XI_LG_OK) return;
        if (frc)
            set_err(r, XI_LG_ERR_OTHER, "out of memory while reading the answer");
        else if (q->events == 0)
            set_err(r, XI_LG_ERR_STREAM, "the answer is not an SSE stream: %.120s",
                    q->head.data ? q->head.data : "");
        else if (!q->done && !q->finished)
            set_err(r, XI_LG_ERR_STREAM,
                    "stream ended without [DONE] or a finish_reason after %d content chunks",
                    r->chunks);
        else if (r->chunks == 0)
            set_err(r, XI_LG_ERR_STREAM, "stream carried no content");
    }
    if (r->err == XI_LG_OK && !r->usage_reported) r->output_tokens = r->chunks;
}

/* ---- the sweep loop -------------------------------------------------------------------- */

static struct curl_slist *make_headers(const char *api_key) {
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    /* libcurl would otherwise wait up to a second for "100 Continue" before sending a large
     * body, which lands straight in the TTFT of long prompts. */
    h = curl_slist_append(h, "Expect:");
    if (api_key && *api_key) {
        xi_buf b = {0};
        xi_buf_printf(&b, "Authorization: Bearer %s", api_key);
        h = b.data ? curl_slist_append(h, b.data) : NULL;
        xi_buf_free(&b);
    }
    return h;
}

int xi_loadgen_run_level(const xi_loadgen_config *c, int level_idx, xi_loadgen_result *res,
                         xi_loadgen_progress_fn progress, void *ud, char *err, size_t errlen) {
    if (xi_loadgen_config_check(c, err, errlen) || curl_ready(err, errlen)) return -1;
    if (level_idx < 0 || level_idx >= c->n_levels)
        return xi_errf(err, errlen, "level %d: out of range", level_idx);
    int n = c->num_requests, conc = XI_MIN(c->concurrency[level_idx], n);
    int rc = -1, started = 0, done = 0, errors = 0;
    const double rate = level_rate(c, level_idx);
    char *url = xi_loadgen_endpoint_url(c->url, c->endpoint);
    struct curl_slist *hdrs = make_headers(c->api_key);
    CURLM *m = curl_multi_init();
    req *slots = calloc((size_t)conc, sizeof *slots);  /* [conc], one per in-flight request */
    int *free_slots = calloc((size_t)conc, sizeof *free_slots);  /* stack of idle slot ids */
    double *due = malloc(sizeof(double) * (size_t)n);  /* arrival offsets, seconds */
    int n_free = conc;
    if (!url || !hdrs || !m || !slots || !free_slots || !due) {
        xi_errf(err, errlen, "load generator: out of memory");
        goto out;
    }
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)conc);
    for (int i = 0; i < conc; i++) {
        free_slots[i] = conc - 1 - i;
        if (!(slots[i].h = curl_easy_init())) {
            xi_errf(err, errlen, "libcurl: cannot create a handle");
            goto out;
        }
    }
    xi_loadgen_arrivals(c->seed, level_idx, n, rate, c->burstiness, due);
    if (progress) progress(ud, level_idx, c->concurrency[level_idx], 0, n, 0);
    const double t0 = xi_now();
    while (done < n) {
        /* Closed loop: every request is due at once, so a finished one is replaced at once and
         * `conc` stay in flight. Open loop: a request starts when it is due and a slot is free;
         * one that finds all `conc` busy waits for the next free slot, as behind vLLM's
         * --max-concurrency, and its latencies count from when it is sent. */
        while (n_free > 0 && started < n && xi_now() - t0 >= due[started]) {
            req *q = &slots[free_slots[--n_free]];
            if (req_start(q, c, url, hdrs, level_idx, started, &res[started])) {
                xi_errf(err, errlen, "load generator: out of memory");
                goto out;
            }
            curl_multi_add_handle(m, q->h);
            started++;
        }
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK) {
            xi_errf(err, errlen, "libcurl: %s", curl_multi_strerror(mc));
            goto out;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            req *q = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            CURLcode cc = msg->data.result;
            curl_multi_remove_handle(m, q->h);
            req_finish(q, cc);
            if (q->r->err != XI_LG_OK) errors++;
            free_slots[n_free++] = (int)(q - slots);
            done++;
            if (progress) progress(ud, level_idx, c->concurrency[level_idx], done, n, errors);
        }
        /* Sleep only when nothing can start: a freed slot is refilled without waiting, and a
         * request due later is waited for no longer than until it is due. */
        if (done < n) {
            int wait_ms = 100;
            if (n_free > 0 && started < n) {
                const double until = due[started] - (xi_now() - t0);
                wait_ms = until <= 0 ? 0 : (int)XI_MIN(100.0, ceil(until * 1e3));
            }
            if (wait_ms > 0) curl_multi_poll(m, NULL, 0, wait_ms, NULL);
        }
    }
    rc = 0;
out:
    for (int i = 0; slots && i < conc; i++) {
        if (slots[i].h) {
            curl_multi_remove_handle(m, slots[i].h);
            curl_easy_cleanup(slots[i].h);
        }
        free(slots[i].body);
        xi_buf_free(&slots[i].head);
        xi_sse_free(&slots[i].sse);
    }
    /* Requests never started (only after an internal failure) must still be freeable. */
    for (int i = started; rc != 0 && i < n; i++) memset(&res[i], 0, sizeof res[i]);
    free(slots);
    free(free_slots);
    free(due);
    if (m) curl_multi_cleanup(m);
    curl_slist_free_all(hdrs);
    free(url);
    return rc;
}

int xi_loadgen_run(const xi_loadgen_config *c, xi_loadgen_level *lv,
                   xi_loadgen_progress_fn progress, void *ud, char *err, size_t errlen) {
    if (xi_loadgen_config_check(c, err, errlen)) return -1;
    xi_loadgen_result *res = calloc((size_t)c->num_requests, sizeof *res);
    if (!res) return xi_errf(err, errlen, "load generator: out of memory");
    memset(lv, 0, sizeof *lv * (size_t)c->n_levels);
    int rc = 0;
    for (int l = 0; l < c->n_levels && rc == 0; l++) {
        rc = xi_loadgen_run_level(c, l, res, progress, ud, err, errlen);
        if (rc == 0 && xi_loadgen_level_of(res, c->num_requests, c->concurrency[l], &lv[l]))
            rc = xi_errf(err, errlen, "load generator: out of memory");
        if (rc == 0) lv[l].request_rate = level_rate(c, l);
        for (int i = 0; i < c->num_requests; i++) xi_loadgen_result_free(&res[i]);
    }
    free(res);
    if (rc)
        for (int l = 0; l < c->n_levels; l++) xi_loadgen_level_free(&lv[l]);
    return rc;
}

/* ---- model discovery ------------------------------------------------------------------- */

static size_t collect(char *ptr, size_t size, size_t nmemb, void *ud) {
    xi_buf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > (1u << 22) || xi_buf_append(b, ptr, n)) return 0;
    return n;
}

char *xi_loadgen_first_model(const char *url, const char *api_key, double timeout_s, char *err,
                             size_t errlen) {
    if (curl_ready(err, errlen)) return NULL;
    size_t n = strlen(url);
    while (n && url[n - 1] == '/') n--;
    xi_buf u = {0}, body = {0};
    if (ends_with(url, n, "/v1")) xi_buf_printf(&u, "%.*s/models", (int)n, url);
    else xi_buf_printf(&u, "%.*s/v1/models", (int)n, url);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = make_headers(api_key);
    char *id = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    long status = 0;
    if (!h || !u.data || !hdrs) {
        xi_errf(err, errlen, "load generator: out of memory");
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, u.data);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1e3));
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        xi_errf(err, errlen, "%s: %s", u.data, errbuf[0] ? errbuf : curl_easy_strerror(cc));
        goto out;
    }
    if (status != 200) {
        char msg[300];
        error_text(body.data ? body.data : "", body.len, msg, sizeof msg);
        xi_errf(err, errlen, "%s: HTTP %ld: %s", u.data, status, msg);
        goto out;
    }
    json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
    const char *s = json_string_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "id"));
    if (s) id = xi_strdup(s);
    else xi_errf(err, errlen, "%s: no model id in data[0].id", u.data);
    json_decref(j);
out:
    curl_slist_free_all(hdrs);
    if (h) curl_easy_cleanup(h);
    xi_buf_free(&u);
    xi_buf_free(&body);
    return id;
}

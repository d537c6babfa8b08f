/* The fake OpenAI streaming server of test_loadgen_fake.h. Chunks look like vLLM's: completions
 * send choices[].text, chat sends a role delta first and then choices[].delta.content; with
 * stream_options.include_usage a last chunk carries usage; "data: [DONE]" ends the stream. */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "test_loadgen_fake.h"

struct fake_oai {
    struct MHD_Daemon *d;
    fake_oai_opts o;
    char url[64];
    pthread_mutex_t mu;
    int requests, inflight, max_inflight;
    volatile int stopping;
    char *last_body, *last_path, *last_auth;   /* owned, under mu */
};

typedef struct upload {
    xi_buf body;  /* the request body so far; owned */
} upload;

typedef struct stream {
    fake_oai *f;
    int chat, usage, cut, bad_json, prompt_words;
    int phase;        /* 0 role (chat only), 1 content, 2 usage, 3 done, 4 end */
    int i;            /* content chunks sent */
    char ev[1024];    /* the event being sent */
    size_t len, off;
} stream;

static void sleep_ms(fake_oai *f, int ms) {
    /* In slices, so that stopping the server does not wait for a long delay to run out. */
    for (int t = 0; t < ms && !f->stopping; t += 5) {
        struct timespec ts = {0, (long)XI_MIN(5, ms - t) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Produce the next event into s->ev; returns 0 at the end of the stream, -1 to cut it. */
static int next_event(stream *s) {
    const fake_oai_opts *o = &s->f->o;
    s->off = 0;
    for (;;) {
        switch (s->phase) {
        case 0:
            s->phase = 1;
            if (!s->chat) continue;
            s->len = (size_t)snprintf(s->ev, sizeof s->ev,
                "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n");
            return 1;
        case 1:
            if (s->i == o->tokens) {
                s->phase = 2;
                continue;
            }
            if (s->cut && s->i == o->tokens / 2) return -1;
            sleep_ms(s->f, s->i == 0 ? o->first_delay_ms : o->delay_ms);
            if (s->bad_json && s->i == 1) {
                s->i++;
                s->len = (size_t)snprintf(s->ev, sizeof s->ev, "data: {\"choices\": [tru\n\n");
                return 1;
            }
            {
                int last = s->i + 1 == o->tokens && !o->no_done;
                const char *fr = last ? "\"length\"" : "null";
                if (s->chat)
                    s->len = (size_t)snprintf(s->ev, sizeof s->ev,
                        "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                        "\"delta\":{\"content\":\" w%d\"},\"finish_reason\":%s}],\"usage\":null}\n\n",
                        s->i, fr);
                else
                    s->len = (size_t)snprintf(s->ev, sizeof s->ev,
                        "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
                        "\"text\":\" w%d\",\"finish_reason\":%s}],\"usage\":null}\n\n", s->i, fr);
            }
            s->i++;
            return 1;
        case 2:
            s->phase = 3;
            if (!s->usage || o->no_usage) continue;
            s->len = (size_t)snprintf(s->ev, sizeof s->ev,
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
                "\"total_tokens\":%d}}\n\n", s->prompt_words, o->tokens, s->prompt_words + o->tokens);
            return 1;
        case 3:
            s->phase = 4;
            if (o->no_done) continue;
            s->len = (size_t)snprintf(s->ev, sizeof s->ev, "data: [DONE]\n\n");
            return 1;
        default:
            return 0;
        }
    }
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    if (s->off == s->len) {
        int rc = next_event(s);
        if (rc < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (rc == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = XI_MIN(max, s->len - s->off);
    memcpy(buf, s->ev + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void free_stream(void *cls) {
    stream *s = cls;
    pthread_mutex_lock(&s->f->mu);
    s->f->inflight--;
    pthread_mutex_unlock(&s->f->mu);
    free(s);
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned code, const char *type,
                              const char *body) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static int count_words(const char *s) {
    int n = 0;
    for (const char *p = s; p && *p; p++)
        if (*p != ' ' && (p == s || p[-1] == ' ')) n++;
    return n;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **con_cls) {
    (void)version;
    fake_oai *f = cls;
    upload *u = *con_cls;
    if (!u) {
        *con_cls = u = calloc(1, sizeof *u);
        return u ? MHD_YES : MHD_NO;
    }
    if (*data_size) {
        xi_buf_append(&u->body, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    if (!strcmp(method, "GET") && !strcmp(url, "/v1/models"))
        return answer(c, 200, "application/json",
                      "{\"object\":\"list\",\"data\":[{\"id\":\"fake-model\",\"object\":\"model\"}]}");
    int chat = !strcmp(url, "/v1/chat/completions");
    if (strcmp(method, "POST") || (!chat && strcmp(url, "/v1/completions")))
        return answer(c, 404, "application/json", "{\"error\":{\"message\":\"no such route\"}}");
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    pthread_mutex_lock(&f->mu);
    int k = ++f->requests;
    free(f->last_body), free(f->last_path), free(f->last_auth);
    f->last_body = xi_strdup(u->body.data ? u->body.data : "");
    f->last_path = xi_strdup(url);
    f->last_auth = auth ? xi_strdup(auth) : NULL;
    pthread_mutex_unlock(&f->mu);
    const fake_oai_opts *o = &f->o;
    if (o->status_every && k % o->status_every == 0) {
        char body[128];
        snprintf(body, sizeof body, "{\"error\":{\"message\":\"fake failure of request %d\","
                 "\"type\":\"server_error\"}}", k);
        return answer(c, o->status ? (unsigned)o->status : 500, "application/json", body);
    }
    if (o->plain_json)
        return answer(c, 200, "application/json",
                      "{\"choices\":[{\"index\":0,\"text\":\"not streamed\",\"finish_reason\":\"length\"}]}");
    json_t *j = json_loadb(u->body.data ? u->body.data : "", u->body.len, 0, NULL);
    stream *s = calloc(1, sizeof *s);
    s->f = f;
    s->chat = chat;
    s->usage = json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage"));
    const char *prompt = json_string_value(json_object_get(j, "prompt"));
    if (!prompt)
        prompt = json_string_value(json_object_get(json_array_get(json_object_get(j, "messages"), 0), "content"));
    s->prompt_words = count_words(prompt);
    json_decref(j);
    s->cut = o->cut_every && k % o->cut_every == 0;
    s->bad_json = o->bad_json_every && k % o->bad_json_every == 0;
    pthread_mutex_lock(&f->mu);
    if (++f->inflight > f->max_inflight) f->max_inflight = f->inflight;
    pthread_mutex_unlock(&f->mu);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, read_stream, s, free_stream);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    upload *u = *con_cls;
    if (u) {
        xi_buf_free(&u->body);
        free(u);
        *con_cls = NULL;
    }
}

fake_oai *fake_oai_start(const fake_oai_opts *o) {
    fake_oai *f = calloc(1, sizeof *f);
    f->o = *o;
    pthread_mutex_init(&f->mu, NULL);
    f->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_ITC,
                            0, NULL, NULL, handle, f, MHD_OPTION_NOTIFY_COMPLETED, completed, f,
                            MHD_OPTION_END);
    if (!f->d) {
        free(f);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u", info ? info->port : 0);
    return f;
}

const char *fake_oai_url(const fake_oai *f) { return f->url; }

static int locked_int(fake_oai *f, const int *v) {
    pthread_mutex_lock(&f->mu);
    int x = *v;
    pthread_mutex_unlock(&f->mu);
    return x;
}

int fake_oai_requests(fake_oai *f) { return locked_int(f, &f->requests); }
int fake_oai_max_inflight(fake_oai *f) { return locked_int(f, &f->max_inflight); }

static char *locked_copy(fake_oai *f, char *const *s) {
    pthread_mutex_lock(&f->mu);
    char *x = *s ? xi_strdup(*s) : NULL;
    pthread_mutex_unlock(&f->mu);
    return x;
}

char *fake_oai_last_body(fake_oai *f) { return locked_copy(f, &f->last_body); }
char *fake_oai_last_path(fake_oai *f) { return locked_copy(f, &f->last_path); }
char *fake_oai_last_auth(fake_oai *f) { return locked_copy(f, &f->last_auth); }

void fake_oai_stop(fake_oai *f) {
    if (!f) return;
    f->stopping = 1;
    MHD_stop_daemon(f->d);
    free(f->last_body), free(f->last_path), free(f->last_auth);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

int fake_oai_refusing_url(char *url, int urllen, int *fd) {
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(*fd, (struct sockaddr *)&a, &len))
        return -1;
    snprintf(url, (size_t)urllen, "http://127.0.0.1:%u", ntohs(a.sin_port));
    return 0;
}

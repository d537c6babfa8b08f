/* server/conn_guard: what one connection may cost the server.
 *
 * libmicrohttpd serves every socket from a small pool of epoll threads, so a connection costs
 * memory, not a thread; what remains is time. Its only timeout is inactivity, which a client
 * that sends one byte a second never trips (slowloris), so every socket is tracked here from
 * accept to close with the phase it is in:
 *   IDLE     connected or between requests: --timeout-keep-alive to start a request;
 *   READING  the request line has arrived: --timeout-request-read for the rest of the request;
 *   BUSY     the request is complete and being answered: no deadline of ours.
 * A watchdog thread shuts down (shutdown(2)) sockets past their deadline; libmicrohttpd then
 * reads EOF and closes them. Past --limit-concurrency a new socket evicts the oldest one that
 * is not answering a request, so slow or idle sockets never keep new clients out; when every
 * socket is busy the newcomer is marked and its requests get 503 (/health and /metrics still
 * answer). libmicrohttpd's own connection limit sits above ours by a reserve, so probes and the
 * 503s still find a slot. The watchdog also looks after suspended jobs (completion.c), whose
 * sockets libmicrohttpd does not watch. */
#include "server/server_internal.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

struct xi_conn {
    xi_conn *prev, *next;            /* s->conns, oldest first (s->conn_mu) */
    int fd;
    xi_conn_phase phase;
    double since;                    /* monotonic start of the phase */
    int cut;                         /* shutdown(2) called: closing */
    int over;                        /* came in past --limit-concurrency with no one to evict */
};

double xi_srv_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int xi_guard_default_limit(void) {
    /* two descriptors per connection at worst (a client in this process, tests), a margin for
     * model files and the engine */
    struct rlimit rl;
    long n = 1024;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY) n = (long)rl.rlim_cur;
    n = (n - 256) / 2;
    return (int)(n < 64 ? 64 : n > 8192 ? 8192 : n);
}

int xi_guard_reserve(int limit) { return limit / 16 > 16 ? limit / 16 : 16; }

static void cut(xi_conn *k) {
    if (k->cut) return;
    k->cut = 1;
    shutdown(k->fd, SHUT_RDWR);
}

void xi_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code) {
    xi_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        xi_conn *k = calloc(1, sizeof *k);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!k || !ci) {
            free(k);
            *socket_context = NULL;
            return;
        }
        k->fd = ci->connect_fd;
        k->phase = XI_CONN_IDLE;
        k->since = xi_srv_mono();
        pthread_mutex_lock(&s->conn_mu);
        k->prev = s->conns_tail;
        if (s->conns_tail) s->conns_tail->next = k;
        else s->conns_head = k;
        s->conns_tail = k;
        if (++s->n_conns > s->cfg.limit_concurrency) {
            xi_conn *victim = s->conns_head;
            while (victim && (victim == k || victim->cut || victim->phase == XI_CONN_BUSY)) victim = victim->next;
            if (victim) cut(victim);
            else k->over = 1;
        }
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        xi_conn *k = *socket_context;
        if (!k) return;
        pthread_mutex_lock(&s->conn_mu);
        if (k->prev) k->prev->next = k->next;
        else s->conns_head = k->next;
        if (k->next) k->next->prev = k->prev;
        else s->conns_tail = k->prev;
        s->n_conns--;
        pthread_mutex_unlock(&s->conn_mu);
        free(k);
        *socket_context = NULL;
    }
}

static xi_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

int xi_guard_phase(xi_server *s, struct MHD_Connection *c, xi_conn_phase phase) {
    xi_conn *k = conn_of(c);
    if (!k) return 0;
    pthread_mutex_lock(&s->conn_mu);
    k->phase = phase;
    k->since = xi_srv_mono();
    int over = k->over;
    pthread_mutex_unlock(&s->conn_mu);
    return over;
}

int xi_guard_open_connections(xi_server *s) {
    pthread_mutex_lock(&s->conn_mu);
    int n = s->n_conns;
    pthread_mutex_unlock(&s->conn_mu);
    return n;
}

/* glibc keeps what a burst of requests freed (1000 streams: 126 MB -> 324 MB, no leak), so
 * once nothing is in flight the heap's free pages go back to the system. */
static void trim_when_idle(xi_server *s, int *busy_since_trim) {
    const int idle = xi_server_in_flight(s) == 0 && atomic_load(&s->parse_bytes) == 0;
    if (!idle) *busy_since_trim = 1;
    else if (*busy_since_trim) {
        *busy_since_trim = 0;
        malloc_trim(0);
    }
}

static void *watchdog(void *arg) {
    xi_server *s = arg;
    const struct timespec tick = {0, 50 * 1000000L};
    int busy_since_trim = 0;
    while (!atomic_load(&s->watchdog_stop)) {
        double now = xi_srv_mono();
        pthread_mutex_lock(&s->conn_mu);
        for (xi_conn *k = s->conns_head; k; k = k->next) {
            double limit = k->phase == XI_CONN_IDLE ? s->cfg.timeout_keep_alive
                         : k->phase == XI_CONN_READING ? s->cfg.timeout_request_read : -1;
            if (limit >= 0 && now - k->since > limit) cut(k);
        }
        pthread_mutex_unlock(&s->conn_mu);
        xi_job_watch(s);
        trim_when_idle(s, &busy_since_trim);
        nanosleep(&tick, NULL);
    }
    return NULL;
}

int xi_guard_start(xi_server *s) {
    pthread_mutex_init(&s->conn_mu, NULL);
    if (pthread_create(&s->watchdog, NULL, watchdog, s)) {
        pthread_mutex_destroy(&s->conn_mu);
        return -1;
    }
    return 0;
}

void xi_guard_stop(xi_server *s) {
    atomic_store(&s->watchdog_stop, 1);
    pthread_join(s->watchdog, NULL);
    pthread_mutex_destroy(&s->conn_mu);
}

/* ---- the parse budget ------------------------------------------------------------------------
 * A JSON body costs far more than its bytes once parsed, converted for the chat template and
 * rendered: 950k tiny messages in 33 MB peaked at 1.19 GB. So bodies are charged twice against
 * one server-wide budget (--max-parse-bytes-in-flight): their bytes while they arrive, and
 * XI_JSON_ELEMENT_COST per JSON element once complete, until the request is answered or its
 * prompts are tokenized. A request the budget cannot take now gets 503 with Retry-After; one
 * it could never take gets 413. */

int xi_srv_json_shape(const char *p, size_t len, int64_t *elements) {
    int64_t n = 1;
    int depth = 0, worst = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        const char ch = p[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = 0;
            continue;
        }
        switch (ch) {
        case '"': in_str = 1; break;
        case '{':
        case '[':
            n++;
            if (++depth > worst) worst = depth;
            break;
        case '}':
        case ']': depth--; break;
        case ',':
        case ':': n++; break;
        default: break;
        }
    }
    *elements = n;
    return worst;
}

int xi_srv_charge(xi_server *s, int64_t bytes) {
    if (bytes <= 0) return 0;
    const int64_t was = atomic_fetch_add(&s->parse_bytes, bytes);
    if (was + bytes <= s->cfg.max_parse_bytes) return 0;
    atomic_fetch_sub(&s->parse_bytes, bytes);
    return -1;
}

void xi_srv_uncharge(xi_server *s, int64_t bytes) {
    if (bytes > 0) atomic_fetch_sub(&s->parse_bytes, bytes);
}

/* What chat bodies of many tiny messages cost the server in memory (a 33 MB body of 950k
 * messages used to peak at 1.19 GB, eight at once at 8.9 GB): eight such bodies completed at
 * the same moment against a parse budget of 256 MiB are parsed a budget's worth at a time (one
 * that finds it full is answered 503 with Retry-After), and the process's peak RSS grows by less than the budget
 * (with no budget, all eight parse at once: +440 to +650 MB here). The model is the
 * random-weight Qwen2 with its real tokenizer and chat template; each body renders to far more
 * than max_model_len tokens, so the ones parsed get the context-length 400. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_util.h"
#include "tokenizer/jinja.h"
#include "test.h"

#define N_CLIENTS 8
#define N_MESSAGES 60000 /* 1.8 MB of JSON, 300k elements: more than half the budget */
#define BUDGET (256LL << 20)

/* A socket to the server with the whole request but its last byte sent; -1 on failure. */
static int send_all_but_one(int port, const char *body, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char head[256];
    const int hl = snprintf(head, sizeof head,
                            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n", n);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) || send(fd, head, (size_t)hl, MSG_NOSIGNAL) != hl) {
        if (fd >= 0) close(fd);
        return -1;
    }
    for (size_t off = 0; off < n - 1;) {
        const ssize_t w = send(fd, body + off, n - 1 - off, MSG_NOSIGNAL);
        if (w <= 0) return close(fd), -1;
        off += (size_t)w;
    }
    return fd;
}

/* The answer's status and body (heap) once the server closes. */
static int read_answer(int fd, char **out) {
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    ssize_t r;
    while (buf && (r = recv(fd, buf + len, cap - len - 1, 0)) > 0)
        if ((len += (size_t)r) + 4096 > cap) buf = realloc(buf, cap *= 2);
    if (buf) buf[len] = 0;
    *out = buf ? buf : strdup("");
    return !strncmp(*out, "HTTP/1.1 ", 9) ? atoi(*out + 9) : 0;
}

/* VmRSS or VmHWM of this process in bytes (-1 when /proc cannot say). */
static long long vm_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atoll(line + strlen(key) + 1) * 1024;
    if (f) fclose(f);
    return v;
}

/* Peak RSS starts again from the current RSS (Linux >= 4.0). */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

TEST(test_server_memory_many_message_bodies_stay_within_the_parse_budget) {
    server s;
    CHECK(ts_start_len(&s, "models/qwen2-tiny-random", 512, (xi_server_config){.max_parse_bytes = BUDGET, .max_body_bytes = 8 << 20}) == 0);
    const char *msg = "{\"role\":\"user\",\"content\":\"a\"}";
    const size_t ml = strlen(msg);
    char *body = malloc(64 + N_MESSAGES * (ml + 1));
    CHECK(body);
    size_t n = (size_t)sprintf(body, "{\"model\":\"tiny\",\"max_tokens\":1,\"messages\":[");
    for (int i = 0; i < N_MESSAGES; i++) {
        if (i) body[n++] = ',';
        memcpy(body + n, msg, ml);
        n += ml;
    }
    strcpy(body + n, "]}");
    char *out = NULL; /* warm: the template compiled, the first request's buffers */
    CHECK_EQ(ts_post(&s, "/v1/chat/completions",
                     "{\"model\":\"tiny\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &out),
             200);
    free(out);
    const long long base = vm_kb("VmRSS:");
    const int peak_known = reset_peak() == 0 && base > 0;

    /* every body but its last byte on the wire, then the last bytes together: eight parses
     * would run at once, with no budget all eight bodies' trees */
    int fds[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) CHECK((fds[i] = send_all_but_one(s.port, body, n + 2)) >= 0);
    for (int i = 0; i < N_CLIENTS; i++) CHECK(send(fds[i], "}", 1, MSG_NOSIGNAL) == 1);
    int parsed = 0, refused = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        char *ans;
        const int st = read_answer(fds[i], &ans);
        close(fds[i]);
        if (st == 400 && strstr(ans, "maximum context length")) parsed++;
        else if (st == 503 && strstr(ans, "Retry-After: ") && strstr(ans, "--max-parse-bytes-in-flight")) refused++;
        else CHECKF(0, "client %d: %.300s", i, ans);
        free(ans);
    }
    const long long peak = vm_kb("VmHWM:");
    printf("    %d bodies of %d messages (%.1f MB): %d parsed, %d refused; peak RSS +%.0f MB over %.0f MB "
           "(budget %lld MB)\n",
           N_CLIENTS, N_MESSAGES, (double)n / 1e6, parsed, refused, (double)(peak - base) / 1e6,
           (double)base / 1e6, BUDGET >> 20);
    /* how many overlap depends on the scheduling of this machine's cores: all may be parsed
     * one after another; the bound on memory holds either way */
    CHECK(parsed >= 1 && parsed + refused == N_CLIENTS);
    CHECKF(peak_known, "peak RSS unknown (/proc/self/clear_refs)");
#if defined(__SANITIZE_ADDRESS__)
    printf("    peak RSS not judged: AddressSanitizer keeps freed memory in its quarantine\n");
#else
    CHECKF(peak - base < BUDGET, "peak RSS grew by %lld MB", (peak - base) >> 20);
#endif
    /* and the server goes on serving */
    CHECK_EQ(ts_post(&s, "/v1/chat/completions",
                     "{\"model\":\"tiny\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &out),
             200);
    free(out);
    free(body);
    ts_stop(&s);
}

/* Chat templates rendering at once share one memory budget: a chat that finds it full is a
 * 503 with Retry-After ("retry later"), and the same chat is answered once there is room. */
TEST(test_server_memory_full_template_budget_is_503_with_retry_after) {
    server s;
    CHECK(ts_start_len(&s, "models/qwen2-tiny-random", 512, (xi_server_config){0}) == 0);
    const char *chat = "{\"model\":\"tiny\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}";
    xi_jinja_set_shared_budget(1024); /* less than one render of this template needs */
    const int fd = send_all_but_one(s.port, chat, strlen(chat));
    CHECK(fd >= 0 && send(fd, chat + strlen(chat) - 1, 1, MSG_NOSIGNAL) == 1);
    char *ans;
    const int st = read_answer(fd, &ans);
    close(fd);
    CHECKF(st == 503 && strstr(ans, "Retry-After: 1\r\n") && strstr(ans, "retry later"), "%.400s", ans);
    free(ans);
    xi_jinja_set_shared_budget((size_t)1 << 30);
    char *out = NULL;
    CHECK_EQ(ts_post(&s, "/v1/chat/completions", chat, &out), 200);
    free(out);
    ts_stop(&s);
}

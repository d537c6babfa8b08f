/* (No test name here contains "stories": .ci/arm64.sh runs those under qemu, without MPI.)
 * Tensor parallelism over MPI: the CLI with -tp 2 starts mpirun itself (2 ranks on this
 * machine, oversubscribed when it has fewer cores) and must give what -tp 1 gives: the same
 * text, and through `xinfer serve` the same greedy ids with log-probs (prompt_logprobs and
 * each generated token's top 20) within 1e-4 of -tp 1's (1e-2 where a rank's slice cuts int8
 * activation blocks, see there). Needs openmpi-bin and build/xinfer-mpi.so (libopenmpi-dev);
 * without them these fail and say so. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server_util.h"
#include "test.h"

static int have_mpi(void) {
    char path[512];
    snprintf(path, sizeof path, "%s", xi_test_bin());
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "xinfer-mpi.so");
    if (access(path, R_OK)) {
        fprintf(stderr, "    %s is missing: install libopenmpi-dev and rebuild\n", path);
        return 0;
    }
    if (system("command -v mpirun >/dev/null 2>&1")) {
        fprintf(stderr, "    mpirun is missing: apt-get install openmpi-bin\n");
        return 0;
    }
    return 1;
}

/* stdout of `xinfer generate` (stats line to *stats when not NULL); exit code. */
static int generate(const char *model, const char *extra, char **out, char **stats) {
    char *dir = xi_test_data(model), cmd[2048], errf[600];
    snprintf(errf, sizeof errf, "%s/gen.err", xi_test_tmpdir());
    /* OpenMPI leaks by design; LeakSanitizer would fail every ASan rank at exit */
    snprintf(cmd, sizeof cmd, "XINFER_TP_TIMEOUT=5 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 %s generate --model %s --threads 1 --max-tokens 48 %s 2>%s",
             xi_test_bin(), dir, extra, errf);
    int rc = xi_test_run(cmd, out);
    if (stats) {
        snprintf(cmd, sizeof cmd, "cat %s", errf);
        xi_test_run(cmd, stats);
    }
    free(dir);
    return rc;
}

static void same_text(const char *model, const char *prompt) {
    CHECK(have_mpi());
    char extra[256], extra2[300];
    snprintf(extra, sizeof extra, "--prompt '%s'", prompt);
    snprintf(extra2, sizeof extra2, "%s -tp 2", extra);
    char *one = NULL, *two = NULL, *st = NULL;
    CHECK_EQ(generate(model, extra, &one, NULL), 0);
    int rc = generate(model, extra2, &two, &st);
    CHECKF(rc == 0, "-tp 2 exited %d: %s", rc, st);
    CHECKF(strlen(one) > 40, "short output: %s", one);
    CHECKF(!strcmp(one, two), "%s: -tp 2 gave\n%s\n-tp 1 gave\n%s", model, two, one);
    free(one);
    free(two);
    free(st);
}

TEST(test_tp2_mpi_llama260K_greedy_equals_tp1) { same_text("models/stories260K", "Once upon a time"); }
TEST(test_tp2_mpi_llama260K_awq_greedy_equals_tp1) { same_text("models/stories260K-awq", "Lily went"); }
TEST(test_tp2_mpi_qwen3moe_tiny_greedy_equals_tp1) { same_text("models/qwen3moe-tiny-random", "Hello there"); }
/* A quantized GGUF file (Q8_0 blocks kept as stored; rows split by whole rows, inputs by whole blocks) shards like a folder. */
TEST(test_tp2_mpi_llama256_q8_0_gguf_greedy_equals_tp1) {
    same_text("gguf/llama256-random-q8_0.gguf", "Once upon a time");
}

TEST(test_tp4_mpi_split_cutting_awq_groups_is_refused_with_working_values) {
    CHECK(have_mpi());
    char *out = NULL, *st = NULL;
    int rc = generate("models/stories260K-awq", "--prompt hi -tp 4", &out, &st);
    CHECKF(rc != 0, "-tp 4 ran: %s", out);
    CHECKF(strstr(st, "cuts AWQ groups of 32") && strstr(st, "-tp values that work for this model: 1, 2"),
           "%s", st);
    free(out);
    free(st);
}

/* The same request gives the same logits bits run after run, and the same text alone or as
 * one of three in a batch, at -tp 2. */
TEST(test_tp2_mpi_run_to_run_and_batch_invariant) {
    CHECK(have_mpi());
    char *a1 = NULL, *a2 = NULL, *s1 = NULL, *s2 = NULL, *batch = NULL;
    CHECK_EQ(generate("models/stories260K", "--prompt 'The cat' -tp 2 --temperature 0", &a1, &s1), 0);
    CHECK_EQ(generate("models/stories260K", "--prompt 'The cat' -tp 2 --temperature 0", &a2, &s2), 0);
    const char *h1 = strstr(s1, "logits hash"), *h2 = strstr(s2, "logits hash");
    CHECKF(h1 && h2 && !strncmp(h1, h2, 30), "hashes differ:\n%s\n%s", s1, s2);
    char path[600], extra[700];
    snprintf(path, sizeof path, "%s/p.jsonl", xi_test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    fprintf(f, "{\"prompt\": \"Tim had a big red\"}\n{\"prompt\": \"The cat\", \"temperature\": 0}\n"
               "{\"prompt\": \"One day\"}\n");
    fclose(f);
    snprintf(extra, sizeof extra, "--prompts-file %s -tp 2 --temperature 0", path);
    CHECK_EQ(generate("models/stories260K", extra, &batch, NULL), 0);
    /* a1 is the continuation; the JSONL line of the second prompt holds it as a JSON string */
    char *nl = strchr(a1, '\n');
    if (nl) *nl = 0;
    const char *second = strchr(batch, '\n');
    CHECKF(second && strstr(second, a1 + 1), "alone: %s\nin a batch: %s", a1, batch);
    free(a1), free(a2), free(s1), free(s2), free(batch);
}

/* A rank killed while requests stream in: the requests it breaks get a 5xx (none hangs) and
 * the server exits within 10 s naming the rank. */
TEST(test_tp2_mpi_killed_rank_fails_requests_and_server_exits_naming_it) {
    CHECK(have_mpi());
    char *m = xi_test_data("models/stories260K"), cmd[4096], *out = NULL;
    const int port = 20000 + (int)(getpid() % 20000);
    snprintf(cmd, sizeof cmd,
             "T=%s; P=%d; M=%s\n"
             "XINFER_TP_TIMEOUT=3 ASAN_OPTIONS=detect_leaks=0 %s serve $M -tp 2 --host 127.0.0.1 --port $P "
             "  --threads 1 --kv-cache-memory-bytes 16000000 --disable-log-stats >$T/serve.log 2>&1 &\n"
             "S=$!\n"
             "for i in $(seq 1 240); do curl -sf 127.0.0.1:$P/health >/dev/null && break; sleep 0.25; done\n"
             "req() { curl -s -o /dev/null -w '%%{http_code}\\n' --max-time 30 127.0.0.1:$P/v1/completions "
             "  -H 'Content-Type: application/json' -d '{\"model\":\"'$M'\",\"prompt\":\"Once\",\"max_tokens\":64}'; }\n"
             ": >$T/codes\n" /* there before the loop below reads it */
             "(for i in $(seq 1 400); do req; done) >>$T/codes &\n"
             "L=$!\n"
             "while [ $(grep -c 200 $T/codes) -lt 3 ]; do sleep 0.05; done\n"
             "for p in $(pgrep -f -- \"--port $P\"); do tr '\\0' '\\n' </proc/$p/environ 2>/dev/null "
             "  | grep -qx OMPI_COMM_WORLD_RANK=1 && R=$p; done\n"
             "kill -9 $R; T0=$(date +%%s%%N)\n"
             "for i in $(seq 1 150); do kill -0 $S 2>/dev/null || break; sleep 0.1; done\n"
             "T1=$(date +%%s%%N)\n"
             "kill -0 $S 2>/dev/null && { echo STILL_RUNNING; kill -9 $S; }\n"
             "wait $S; echo \"exit=$?\"; kill $L 2>/dev/null; wait $L 2>/dev/null\n"
             "echo \"ms=$(( (T1 - T0) / 1000000 ))\"\n"
             "echo \"ok=$(grep -c '^200' $T/codes) err5xx=$(grep -c '^5' $T/codes) none=$(grep -c '^000' $T/codes)\"\n"
             "cat $T/serve.log\n",
             xi_test_tmpdir(), port, m, xi_test_bin());
    free(m);
    xi_test_run(cmd, &out);
    int ms = -1, ok = 0, e5 = 0;
    const char *p = strstr(out, "ms="), *q = strstr(out, "ok=");
    if (p) ms = atoi(p + 3);
    if (q) sscanf(q, "ok=%d err5xx=%d", &ok, &e5);
    fprintf(stderr, "    server gone %d ms after the kill; %d requests ok before, %d got a 5xx\n", ms, ok, e5);
    CHECKF(!strstr(out, "STILL_RUNNING") && ms >= 0 && ms <= 10000, "%s", out);
    CHECKF(ok >= 3 && e5 >= 1, "%s", out);
    CHECKF(strstr(out, "rank 1 did not answer"), "%s", out);
    CHECKF(strstr(out, "exit=1"), "%s", out);
    free(out);
}

/* Two hosts made of network namespaces joined by a veth pair, OpenMPI's TCP transport
 * between them (tests/tp_netns.sh): the same continuation as -tp 1 on one host. */
TEST(test_tp2_mpi_two_netns_hosts_over_tcp_equal_tp1) {
    CHECK(have_mpi());
    CHECKF(geteuid() == 0 && !system("command -v ip >/dev/null 2>&1"),
           "needs root and iproute2 (ip netns) to make two hosts");
    char *m = xi_test_data("models/stories260K"), cmd[2048], *one = NULL, *two = NULL, *log = NULL;
    snprintf(cmd, sizeof cmd, "%s generate --model %s --prompt 'Once upon a time' --max-tokens 32 --threads 1 2>/dev/null",
             xi_test_bin(), m);
    CHECK_EQ(xi_test_run(cmd, &one), 0);
    snprintf(cmd, sizeof cmd, "bash tests/tp_netns.sh %s %s %s 2>%s/netns.err", xi_test_bin(), m,
             xi_test_tmpdir(), xi_test_tmpdir());
    int rc = xi_test_run(cmd, &two);
    snprintf(cmd, sizeof cmd, "cat %s/netns.err", xi_test_tmpdir());
    xi_test_run(cmd, &log);
    free(m);
    CHECKF(rc == 0, "tp_netns.sh exited %d: %s", rc, log);
    CHECKF(strstr(log, "rank 0 in xtpa") && strstr(log, "rank 1 in xtpb"), "ranks not in two namespaces: %s", log);
    CHECKF(strlen(one) > 40 && !strcmp(one, two), "two hosts gave\n%s\none gave\n%s", two, one);
    free(one), free(two), free(log);
}

/* xinfer env says whether -tp > 1 can run: here (MPI installed) ok; with an empty PATH and
 * no plugin, an info line naming both. */
TEST(test_env_reports_mpi_for_tensor_parallel) {
    CHECK(have_mpi());
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s env --no-python 2>&1", xi_test_bin());
    xi_test_run(cmd, &out);
    CHECKF(strstr(out, "MPI present (") && strstr(out, "xinfer-mpi.so"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent XINFER_MPI_PLUGIN=/nonexistent/x.so %s env --no-python 2>&1",
             xi_test_bin());
    xi_test_run(cmd, &out);
    CHECKF(strstr(out, "MPI absent (no mpirun, no plugin)"), "%s", out);
    free(out);
}

/* ---- logprobs over real ranks: `xinfer serve -tp 2` against `-tp 1` -------------------- */

typedef struct tp_server {
    pid_t pid;
    server s; /* only its port: ts_post / ts_get */
    char log[600];
} tp_server;

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &n))
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* `xinfer serve models/<rel> <extra>` in the background until /health answers: 0, or -1 with
 * the server's log in *why (heap). */
static int tp_serve(tp_server *t, const char *rel, const char *extra, const char *tag, char **why) {
    char *m = xi_test_data(rel), cmd[2048];
    t->s = (server){.port = free_port()};
    snprintf(t->log, sizeof t->log, "%s/serve-%s.log", xi_test_tmpdir(), tag);
    snprintf(cmd, sizeof cmd,
             "ASAN_OPTIONS=detect_leaks=0 exec %s serve %s %s --host 127.0.0.1 --port %d --threads 1 "
             "--max-model-len 256 --kv-cache-memory-bytes 16000000 --disable-log-stats >%s 2>&1",
             xi_test_bin(), m, extra, t->s.port, t->log);
    free(m);
    t->pid = fork();
    if (t->pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; t->pid > 0 && i < 1200; i++) { /* 60 s: ASan builds load slowly */
        char *body = NULL;
        const long st = ts_get(&t->s, "/health", &body);
        free(body);
        if (st == 200) return 0;
        if (waitpid(t->pid, NULL, WNOHANG) == t->pid) {
            t->pid = 0; /* gone: nothing to stop */
            break;
        }
        usleep(50000);
    }
    snprintf(cmd, sizeof cmd, "cat %s", t->log);
    xi_test_run(cmd, why);
    return -1;
}

static void tp_serve_stop(tp_server *t) {
    if (t->pid <= 0) return;
    kill(t->pid, SIGTERM);
    for (int i = 0; i < 300; i++) { /* 15 s, then no more waiting */
        if (waitpid(t->pid, NULL, WNOHANG) == t->pid) return (void)(t->pid = 0);
        usleep(50000);
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, NULL, 0);
    t->pid = 0;
}

#define TP_TOPK 20 /* the most a request may ask for */

/* Values of a top-20 map, largest first (the i-th largest is within d of the other side's
 * i-th whenever every value is: a near tie may swap two ids, never move the order statistics). */
static int top_values(json_t *o, int prompt_form, double *v) {
    const char *k;
    json_t *e;
    int n = 0;
    json_object_foreach(o, k, e) {
        /* prompt_logprobs entries: {logprob, rank}; the prompt's own token may rank below 20 */
        if (prompt_form && json_integer_value(json_object_get(e, "rank")) > TP_TOPK) continue;
        if (n < TP_TOPK) v[n++] = json_number_value(prompt_form ? json_object_get(e, "logprob") : e);
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            const double x = v[j];
            v[j] = v[j - 1], v[j - 1] = x;
        }
    return n;
}

/* Largest |difference| between two top-20 maps, order statistic by order statistic, and
 * between the entries of ids (or texts) both hold; -1 when they hold different numbers of
 * values or fewer than min_n. */
static double top_diff(json_t *a, json_t *b, int prompt_form, int min_n) {
    double va[TP_TOPK], vb[TP_TOPK], d = 0;
    const int na = top_values(a, prompt_form, va), nb = top_values(b, prompt_form, vb);
    if (na != nb || na < min_n) return -1;
    for (int i = 0; i < na; i++) d = fmax(d, fabs(va[i] - vb[i]));
    const char *key;
    json_t *e;
    json_object_foreach(a, key, e) {
        json_t *f = json_object_get(b, key);
        if (!f) continue;
        d = fmax(d, fabs(json_number_value(prompt_form ? json_object_get(e, "logprob") : e) -
                         json_number_value(prompt_form ? json_object_get(f, "logprob") : f)));
    }
    return d;
}

/* One greedy completion with the top 20 log-probs of every prompt position (prompt_logprobs)
 * and of every generated token from `xinfer serve <extra2>` and `<extra1>`, run side by side:
 * the same ids, and every log-prob within tol. The largest differences go to stderr. */
static void logprobs_close2(const char *rel, const char *extra1, const char *extra2, double tol) {
    CHECK(have_mpi());
    char *why = NULL, req[1024], *b1 = NULL, *b2 = NULL;
    tp_server one = {0}, two = {0};
    const int ok1 = !tp_serve(&one, rel, extra1, "a", &why);
    if (!ok1) fprintf(stderr, "    %s did not start:\n%s\n", extra1, why);
    const int ok2 = ok1 && !tp_serve(&two, rel, extra2, "b", &why);
    if (ok1 && !ok2) fprintf(stderr, "    %s did not start:\n%s\n", extra2, why);
    snprintf(req, sizeof req,
             "{\"prompt\": \"Once upon a time there was a little girl named Lily who loved to play "
             "in the park with her dog\", \"max_tokens\": 8, \"temperature\": 0, \"logprobs\": %d, "
             "\"prompt_logprobs\": %d, \"return_token_ids\": true}", TP_TOPK, TP_TOPK);
    const long s1 = ok2 ? ts_post(&one.s, "/v1/completions", req, &b1) : 0;
    const long s2 = ok2 ? ts_post(&two.s, "/v1/completions", req, &b2) : 0;
    tp_serve_stop(&two);
    tp_serve_stop(&one);
    free(why);
    CHECK(ok2);
    if (strstr(extra2, "-tp 2")) { /* really over mpirun's ranks */
        char cmd[700], *log = NULL;
        snprintf(cmd, sizeof cmd, "cat %s", two.log);
        xi_test_run(cmd, &log);
        const int ranks = strstr(log, "-tp 2: starting 2 ranks: mpirun") != NULL;
        CHECKF(ranks, "no mpirun in the log of %s:\n%s", extra2, log);
        free(log);
    }
    CHECKF(s1 == 200 && s2 == 200, "%s: %ld %s\n%s: %ld %s", extra1, s1, b1, extra2, s2, b2);
    json_t *j1 = json_loads(b1, 0, NULL), *j2 = json_loads(b2, 0, NULL);
    json_t *c1 = json_array_get(json_object_get(j1, "choices"), 0), *c2 = json_array_get(json_object_get(j2, "choices"), 0);
    json_t *p1 = json_object_get(c1, "prompt_logprobs"), *p2 = json_object_get(c2, "prompt_logprobs");
    json_t *l1 = json_object_get(c1, "logprobs"), *l2 = json_object_get(c2, "logprobs");
    CHECKF(json_array_size(p1) >= 16 && json_array_size(p1) == json_array_size(p2), "%s\n%s", b1, b2);
    CHECKF(json_equal(json_object_get(c1, "token_ids"), json_object_get(c2, "token_ids")) &&
               json_array_size(json_object_get(c1, "token_ids")) == 8,
           "%s: greedy ids differ\n%s: %s\n%s: %s", rel, extra1, b1, extra2, b2);
    double dp = 0, dg = 0;
    for (size_t i = 1; i < json_array_size(p1); i++) {
        const double d = top_diff(json_array_get(p1, i), json_array_get(p2, i), 1, TP_TOPK);
        CHECKF(d >= 0, "%s: prompt position %zu: top-%d sets of different sizes", rel, i, TP_TOPK);
        dp = fmax(dp, d);
    }
    json_t *t1 = json_object_get(l1, "top_logprobs"), *t2 = json_object_get(l2, "top_logprobs");
    json_t *g1 = json_object_get(l1, "token_logprobs"), *g2 = json_object_get(l2, "token_logprobs");
    CHECK(json_array_size(t1) == 8 && json_array_size(t2) == 8);
    for (size_t i = 0; i < 8; i++) {
        dg = fmax(dg, fabs(json_number_value(json_array_get(g1, i)) - json_number_value(json_array_get(g2, i))));
        /* completions' top_logprobs are keyed by text: ids sharing one may merge, equally on
         * both sides whenever the ids are the same */
        const double d = top_diff(json_array_get(t1, i), json_array_get(t2, i), 0, TP_TOPK / 2);
        CHECKF(d >= 0, "%s: step %zu: top log-probs of different sizes\n%s\n%s", rel, i, b1, b2);
        dg = fmax(dg, d);
    }
    fprintf(stderr, "    %s: max |logprob(%s) - logprob(%s)|: prompt %.3g, generated %.3g\n", rel, extra2,
            *extra1 ? extra1 : "-tp 1", dp, dg);
    CHECKF(dp <= tol && dg <= tol, "%s: log-probs differ by %.3g (prompt), %.3g (generated) > %g", rel, dp, dg, tol);
    json_decref(j1);
    json_decref(j2);
    free(b1);
    free(b2);
}

/* ... `xinfer serve <extra> -tp 2` against `<extra>` (-tp 1). */
static void logprobs_close(const char *rel, const char *extra, double tol) {
    char e2[300];
    snprintf(e2, sizeof e2, "%s%s-tp 2", extra, *extra ? " " : "");
    logprobs_close2(rel, extra, e2, tol);
}

TEST(test_tp2_mpi_qwen2_tiny_logprobs_within_1e4_of_tp1) { logprobs_close("models/qwen2-tiny-random", "", 1e-4); }
TEST(test_tp2_mpi_qwen3_tiny_logprobs_within_1e4_of_tp1) { logprobs_close("models/qwen3-tiny-random", "", 1e-4); }
/* Its BF16 weights with fp32 activations. */
TEST(test_tp2_mpi_qwen3moe_tiny_exact_precision_logprobs_within_1e4_of_tp1) {
    logprobs_close("models/qwen3moe-tiny-random", "--kernel-precision exact", 1e-4);
}
/* The default precision, which on a CPU with AVX-512 BF16 rounds a BF16 weight's inputs to
 * bf16 (kernels/bf16dot.c): the all-reduce's fp32 sums differ from -tp 1's in the last bits,
 * and where such a value lies next to a bf16 rounding boundary the next layer reads it one
 * bf16 step (2^-8 relative) apart, so log-probs move by more than the sums' own 1e-6
 * (2.3e-4 measured). Greedy ids equal. */
TEST(test_tp2_mpi_qwen3moe_tiny_default_precision_logprobs_within_1e3_of_tp1) {
    logprobs_close("models/qwen3moe-tiny-random", "", 1e-3);
}

/* The int8 activation path (kernels/qdot.c) quantizes o_proj's and down's input per block of
 * 32 (Q8) or per AWQ group. AWQ splits keep whole groups (shard.c), so a rank's blocks are
 * -tp 1's blocks, the quantized values the same, and only the fp32 sums differ: each rank
 * scales and sums its blocks, the all-reduce adds the ranks' parts (5e-6 measured). */
TEST(test_tp2_mpi_llama260K_awq_int8_precision_logprobs_within_1e4_of_tp1) {
    logprobs_close("models/stories260K-awq", "", 1e-4);
}
/* int8 weights with fp32 activations: every rank takes the precision asked for. */
TEST(test_tp2_mpi_qwen2_tiny_q8_exact_precision_logprobs_within_1e4_of_tp1) {
    logprobs_close("models/qwen2-tiny-random", "--quantization int8 --kernel-precision exact", 1e-4);
}
/* Q8 weights in int8 precision where a rank's slice of down's input cuts the 32-value blocks
 * (moe_intermediate_size 32: 16 per rank): each rank quantizes its 16 values on their own
 * maximum, so the activations are rounded differently from -tp 1's (1.5e-3 measured). Either
 * side's rounding is int8 precision's own error, which on this model moves log-probs by up to
 * 4.2e-3 against --kernel-precision exact; the two are independent, so 1e-2. Greedy ids equal. */
TEST(test_tp2_mpi_qwen3moe_tiny_q8_int8_precision_greedy_equal_logprobs_within_1e2_of_tp1) {
    logprobs_close("models/qwen3moe-tiny-random", "--quantization int8", 1e-2);
}

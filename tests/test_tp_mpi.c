/* (No test name here contains "stories": .ci/arm64.sh runs those under qemu, without MPI.)
 * Tensor parallelism over MPI: the CLI with -tp 2 starts mpirun itself (2 ranks on this
 * machine, oversubscribed when it has fewer cores) and must give what -tp 1 gives. Needs
 * openmpi-bin and build/xinfer-mpi.so (libopenmpi-dev); without them these fail and say so. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

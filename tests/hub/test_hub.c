/* Hub tests: the real client (libcurl) against the fake hub of fake_hub.h on loopback, into
 * a fresh cache folder per test. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../model_util.h"
#include "../test.h"
#include "base/base.h"
#include "fake_hub.h"
#include "hub/hub.h"

#define REPO "xi-test/stories260K"
#define BIG "model.safetensors"

/* One fake hub, one cache and one options set per test; every test runs in its own
 * process, so file-level state is private to it. */
static struct {
    fake_hub *h;
    char *cache;                /* TMP/cache */
    xi_hub_options o;
    xi_hub_result r;            /* of the last pull */
    char err[512];
} fx;

static const char *source_dir(void) {
    static char *d;
    if (!d) d = xi_test_data("models/stories260K");
    return d;
}

static char *src(const char *file) { return xi_path_join(source_dir(), file); }

/* Options that reach the fake hub (or a closed port when h is NULL) and the test cache. */
static void opts_for(const fake_hub *h) {
    xi_hub_options_default(&fx.o);
    fx.o.source = XI_HUB_SOURCE_HF;
    fx.o.endpoint = h ? fake_hub_url(h) : "http://127.0.0.1:9";
    fx.o.cache_dir = fx.cache;
    fx.o.offline = 0;
    fx.o.progress = 0;
    fx.o.quiet = 1;
    fx.o.retries = 0;
}

static int fx_up(void) {
    fx.h = fake_hub_start(source_dir());
    fx.cache = xi_path_join(xi_test_tmpdir(), "cache");
    opts_for(fx.h);
    return fx.h != NULL;
}

static int pull(const char *name) {
    xi_hub_result_free(&fx.r);
    fx.err[0] = 0;
    return xi_hub_pull(name, &fx.o, &fx.r, fx.err, sizeof fx.err);
}

#define UP() CHECKF(fx_up(), "the fake hub did not start")
#define PULL_OK(name) CHECKF(pull(name) == 0, "%s", fx.err)
#define PULL_FAILS(name, ...)                                                             \
    do {                                                                                  \
        CHECKF(pull(name) == -1, "%s: pull succeeded", name);                             \
        const char *const want_[] = {__VA_ARGS__};                                        \
        for (size_t k_ = 0; k_ < XI_ARRAY_LEN(want_); k_++)                               \
            CHECKF(strstr(fx.err, want_[k_]), "'%s' not in: %s", want_[k_], fx.err);      \
    } while (0)

/* CACHE/models--xi-test--stories260K/ + fmt(a) */
static char *repo_path(const char *fmt, const char *a) {
    xi_buf p = {0};
    xi_buf_printf(&p, "%s/models--xi-test--stories260K/", fx.cache);
    xi_buf_printf(&p, fmt, a);
    return p.data;
}

static char *big_blob(const char *suffix) {
    xi_buf p = {0};
    xi_buf_printf(&p, "blobs/%s%s", fake_hub_sha256(fx.h, BIG), suffix);
    char *r = repo_path("%s", p.data);
    xi_buf_free(&p);
    return r;
}

static int same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = xi_read_file(a, &na, NULL, 0), *y = xi_read_file(b, &nb, NULL, 0);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static int64_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (int64_t)st.st_size;
}

TEST(test_hub_fresh_pull_builds_the_hf_cache_layout) {
    UP();
    PULL_OK(REPO);
    char *snap = repo_path("snapshots/%s", fake_hub_commit(fx.h));
    CHECK_STR(fx.r.path, snap);
    CHECK_STR(fx.r.commit, fake_hub_commit(fx.h));
    /* config, generation config, weights and two tokenizer files; reference.json, the onnx
     * subfolder and .gitattributes are not for inference */
    CHECK_EQ(fx.r.n_files, 5);
    CHECK_EQ(fx.r.n_downloaded, 5);
    static const char *const want[] = {"config.json", "generation_config.json", BIG,
                                       "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < XI_ARRAY_LEN(want); i++) {
        char *link = xi_path_join(snap, want[i]), target[512];
        ssize_t n = readlink(link, target, sizeof target - 1);
        CHECKF(n > 0, "%s is not a symlink", link);
        target[n] = 0;
        CHECKF(!strncmp(target, "../../blobs/", 12), "%s -> %s", want[i], target);
        CHECKF(same_bytes(link, src(want[i])), "%s differs from the hub's copy", want[i]);
        free(link);
    }
    /* the weights' blob is named by its sha256, the LFS oid */
    CHECK(same_bytes(big_blob(""), src(BIG)));
    CHECK_STR(xi_read_file(repo_path("refs/main", ""), NULL, NULL, 0), fake_hub_commit(fx.h));
    CHECK(access(xi_path_join(snap, "reference.json"), F_OK) != 0);
    CHECK(access(big_blob(".incomplete"), F_OK) != 0);
    CHECK(fake_hub_saw(fx.h, "/api/models/xi-test/stories260K/revision/main", "blobs", "true"));
    CHECK(fake_hub_saw(fx.h, "/cdn/", NULL, NULL)); /* the weights came through the redirect */
    fake_hub_stop(fx.h);
}

TEST(test_hub_second_pull_downloads_nothing) {
    UP();
    PULL_OK(REPO);
    PULL_OK(REPO "@main");
    CHECK_EQ(fx.r.n_downloaded, 0);
    CHECK_EQ(fx.r.bytes_downloaded, 0);
    CHECK_EQ(fake_hub_downloads(fx.h, BIG), 1);
    fake_hub_stop(fx.h);
}

TEST(test_hub_interrupted_pull_resumes_with_a_range_request) {
    UP();
    int64_t total = file_size(src(BIG)), half = total / 2;
    fake_hub_cut_once(fx.h, BIG, (long)half);
    PULL_FAILS(REPO, BIG, "interrupted", "resume");
    CHECK_EQ(file_size(big_blob(".incomplete")), half);
    PULL_OK(REPO);
    CHECK_EQ(fake_hub_last_range(fx.h, BIG), half);
    CHECK_EQ(fake_hub_downloads(fx.h, BIG), 2);
    /* only the missing half of the weights came again (plus the small files after them) */
    CHECK(fx.r.bytes_downloaded >= total - half && fx.r.bytes_downloaded < total);
    CHECK(access(big_blob(".incomplete"), F_OK) != 0);
    CHECK(same_bytes(xi_path_join(fx.r.path, BIG), src(BIG)));
    fake_hub_stop(fx.h);
}

TEST(test_hub_broken_transfer_resumes_within_one_pull) {
    UP();
    fake_hub_cut_once(fx.h, BIG, 300000);
    fx.o.retries = 2;
    PULL_OK(REPO);
    CHECK_EQ(fake_hub_downloads(fx.h, BIG), 2);
    CHECK_EQ(fake_hub_last_range(fx.h, BIG), 300000);
    CHECK(same_bytes(xi_path_join(fx.r.path, BIG), src(BIG)));
    fake_hub_stop(fx.h);
}

TEST(test_hub_corrupt_download_is_deleted_and_reported) {
    UP();
    fake_hub_corrupt_once(fx.h, BIG);
    PULL_FAILS(REPO, BIG, "sha256 mismatch", "deleted");
    CHECK(access(big_blob(""), F_OK) != 0 && access(big_blob(".incomplete"), F_OK) != 0);
    PULL_OK(REPO);
    CHECK(same_bytes(big_blob(""), src(BIG)));
    fake_hub_stop(fx.h);
}

/* Flip one byte of a cached file in place (same size: only the hash can tell). */
static int corrupt_file(const char *path) {
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    fseek(f, 1000, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 1000, SEEK_SET);
    fputc(c ^ 0xff, f);
    return fclose(f);
}

TEST(test_hub_corrupt_cached_blob_is_found_and_downloaded_again) {
    UP();
    PULL_OK(REPO);
    CHECK(corrupt_file(big_blob("")) == 0);
    /* offline, verification reports it and cannot repair it */
    fx.o.offline = 1;
    fx.o.verify = 1;
    PULL_FAILS(REPO, BIG, "corrupt");
    /* online, verification replaces it */
    fx.o.offline = 0;
    PULL_OK(REPO);
    CHECK_EQ(fx.r.n_downloaded, 1);
    CHECK_EQ(fake_hub_downloads(fx.h, BIG), 2);
    CHECK(same_bytes(big_blob(""), src(BIG)));
    fake_hub_stop(fx.h);
}

TEST(test_hub_offline_mode_uses_the_cache_and_never_connects) {
    UP();
    PULL_OK(REPO);
    char *online = xi_strdup(fx.r.path);
    int before = fake_hub_requests(fx.h);
    /* HF_HUB_OFFLINE=1 is how users ask for it */
    setenv("HF_HUB_OFFLINE", "1", 1);
    fx.o.offline = -1;
    fx.o.verify = 1;
    PULL_OK(REPO);
    CHECK_STR(fx.r.path, online);
    CHECK_EQ(fx.r.from_cache_offline, 1);
    CHECK_EQ(fake_hub_requests(fx.h), before);
    /* a miss fails clearly, still without a request */
    PULL_FAILS("xi-test/other", "xi-test/other@main is not in the cache", "HF_HUB_OFFLINE");
    CHECK_EQ(fake_hub_requests(fx.h), before);
    unsetenv("HF_HUB_OFFLINE");
    fake_hub_stop(fx.h);
}

TEST(test_hub_unreachable_hub_falls_back_to_the_cache_or_fails_clearly) {
    UP();
    PULL_OK(REPO);
    char *online = xi_strdup(fx.r.path);
    fake_hub_stop(fx.h);
    opts_for(NULL); /* nothing listens there */
    PULL_OK(REPO);
    CHECK_STR(fx.r.path, online);
    CHECK_EQ(fx.r.from_cache_offline, 1);
    PULL_FAILS("xi-test/other", "cannot reach http://127.0.0.1:9", "no network");
}

TEST(test_hub_errors_name_the_cause) {
    UP();
    fx.o.token = "";
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    setenv("HF_TOKEN_PATH", "/nonexistent/token", 1);
    PULL_FAILS("xi-test/missing", "xi-test/missing: no such model", "HF_TOKEN");
    PULL_FAILS("xi-test/gated", "gated", "HF_TOKEN");
    PULL_FAILS(REPO "@v9", "no revision 'v9'");
    PULL_FAILS("xi-test/bin-only", "no safetensors weights", "pytorch_model.bin");
    PULL_FAILS("not a name", "not a name");
    /* with the token the gated repo opens */
    setenv("HF_TOKEN", "hf_secret", 1);
    fx.o.token = NULL;
    PULL_OK("xi-test/gated");
    unsetenv("HF_TOKEN");
    fake_hub_stop(fx.h);
}

TEST(test_hub_modelscope_uses_its_own_url_shapes) {
    UP();
    fx.o.source = XI_HUB_SOURCE_AUTO;
    setenv("VLLM_USE_MODELSCOPE", "1", 1);
    unsetenv("XINFER_SOURCE");
    PULL_OK(REPO);
    unsetenv("VLLM_USE_MODELSCOPE");
    CHECK_STR(fx.r.commit, fake_hub_ms_commit(fx.h));
    CHECK_EQ(fx.r.n_downloaded, 5);
    const char *api = "/api/v1/models/xi-test/stories260K/repo";
    CHECK(fake_hub_saw(fx.h, "/api/v1/models/xi-test/stories260K/repo/files", "Revision", "master"));
    CHECK(fake_hub_saw(fx.h, "/api/v1/models/xi-test/stories260K/repo/files", "Recursive", "true"));
    CHECK(fake_hub_saw(fx.h, api, "FilePath", BIG));
    CHECK(!fake_hub_saw(fx.h, "/api/models/", NULL, NULL));
    CHECK(!fake_hub_saw(fx.h, "/xi-test/", NULL, NULL));
    CHECK(same_bytes(xi_path_join(fx.r.path, BIG), src(BIG)));
    /* every ModelScope blob is named by the Sha256 the listing gave */
    char target[512];
    ssize_t n = readlink(xi_path_join(fx.r.path, "config.json"), target, sizeof target - 1);
    CHECK(n > 0);
    target[n] = 0;
    CHECK_STR(strrchr(target, '/') + 1, fake_hub_sha256(fx.h, "config.json"));
    CHECK_STR(xi_read_file(repo_path("refs/master", ""), NULL, NULL, 0), fake_hub_ms_commit(fx.h));
    fake_hub_stop(fx.h);
}

TEST(test_hub_listing_without_blob_metadata_asks_the_resolve_headers) {
    UP();
    fake_hub_listing_without_blobs(fx.h);
    PULL_OK(REPO);
    CHECK_EQ(fake_hub_heads(fx.h), 5);
    /* X-Linked-Etag named the weights' blob */
    CHECK(same_bytes(big_blob(""), src(BIG)));
    fake_hub_stop(fx.h);
}

TEST(test_hub_resolve_prefers_a_local_folder_and_pulls_names) {
    UP();
    char *p = xi_hub_resolve(source_dir(), &fx.o, fx.err, sizeof fx.err);
    CHECK_STR(p, source_dir());
    free(p);
    CHECK_EQ(fake_hub_requests(fx.h), 0);
    /* a folder that happens to look like ORG/NAME wins over the hub */
    char *local = xi_path_join(xi_test_tmpdir(), "xi-test");
    CHECK(mkdir(local, 0755) == 0);
    char *local2 = xi_path_join(local, "stories260K");
    CHECK(mkdir(local2, 0755) == 0);
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd));
    CHECK(chdir(xi_test_tmpdir()) == 0);
    p = xi_hub_resolve(REPO, &fx.o, fx.err, sizeof fx.err);
    CHECK(chdir(cwd) == 0);
    CHECK_STR(p, REPO);
    free(p);
    CHECK_EQ(fake_hub_requests(fx.h), 0);
    p = xi_hub_resolve(REPO, &fx.o, fx.err, sizeof fx.err);
    CHECKF(p && strstr(p, "/snapshots/"), "%s", p ? p : fx.err);
    free(p);
    CHECK(xi_hub_resolve("./no/such/folder", &fx.o, fx.err, sizeof fx.err) == NULL);
    CHECKF(strstr(fx.err, "no such model folder"), "%s", fx.err);
    fake_hub_stop(fx.h);
}

TEST(test_hub_repo_name_shapes) {
    CHECK(xi_hub_is_repo_name("Qwen/Qwen2.5-0.5B-Instruct"));
    CHECK(xi_hub_is_repo_name("Qwen/Qwen2.5-0.5B-Instruct@main"));
    CHECK(xi_hub_is_repo_name("org/name@refs/pr/1"));
    CHECK(!xi_hub_is_repo_name("name"));
    CHECK(!xi_hub_is_repo_name("a/b/c"));
    CHECK(!xi_hub_is_repo_name("./models/x"));
    CHECK(!xi_hub_is_repo_name("/abs/x"));
    CHECK(!xi_hub_is_repo_name("org/../x"));
    CHECK(!xi_hub_is_repo_name("org/name@"));
    CHECK(!xi_hub_is_repo_name("org/name@../x"));
    CHECK(!xi_hub_is_repo_name("org/na me"));
}

/* The pulled folder loads and reproduces llama2.c's greedy ids. Teacher-forced: one batch
 * of the prompt and the reference continuation; the argmax at each position must be the
 * next reference id, which is what greedy decoding from the prompt produces. */
TEST(test_hub_pulled_model_generates_the_reference_tokens) {
    UP();
    char *dir = xi_hub_resolve(REPO, &fx.o, fx.err, sizeof fx.err);
    CHECKF(dir, "%s", fx.err);
    fake_hub_stop(fx.h);
    xi_model_params p = {.dir = dir, .dtype = "float32", .n_threads = 2};
    xi_model *m = xi_model_load(&p, fx.err, sizeof fx.err);
    CHECKF(m, "%s", fx.err);
    json_t *ref = tm_load_json("models/stories260K/reference.json");
    CHECK(ref);
    json_t *cs = json_array_get(json_object_get(ref, "cases"), 0);
    json_t *pj = json_object_get(cs, "prompt_ids"), *gj = json_object_get(cs, "generated_ids");
    int np = (int)json_array_size(pj), ng = 24, n = np + ng;
    CHECK(np > 0 && n <= 200 && (int)json_array_size(gj) >= ng);
    int32_t ids[200];
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)json_integer_value(i < np ? json_array_get(pj, i) : json_array_get(gj, i - np));
    const xi_config *c = xi_model_config(m);
    xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, fx.err, sizeof fx.err);
    CHECKF(kv, "%s", fx.err);
    tm_seq s;
    tm_seq_init(&s, 1, 15);
    tm_seq *sp = &s;
    const int32_t *ip = ids;
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * n);
    CHECK(tm_forward(m, kv, &sp, &ip, &n, 1, 1, logits) == 0);
    for (int i = 0; i < ng; i++) {
        int32_t got = tm_argmax(logits + (size_t)(np - 1 + i) * c->vocab_size, c->vocab_size);
        CHECKF(got == ids[np + i], "token %d: got %d want %d", i, got, ids[np + i]);
    }
    free(logits);
    xi_kv_store_free(kv);
    json_decref(ref);
    xi_model_free(m);
    free(dir);
}

TEST(test_hub_moved_branch_gets_a_new_snapshot_sharing_unchanged_blobs) {
    UP();
    PULL_OK(REPO);
    char *old = xi_strdup(fx.r.path);
    const char *moved = "1111111111111111111111111111111111111111";
    fake_hub_set_commit(fx.h, moved);
    PULL_OK(REPO);
    CHECK_STR(fx.r.commit, moved);
    CHECK(strcmp(fx.r.path, old) != 0);
    CHECK_EQ(fx.r.n_downloaded, 0); /* same file contents: the blobs are shared */
    CHECK(xi_dir_exists(old));      /* the old snapshot stays usable */
    CHECK_STR(xi_read_file(repo_path("refs/main", ""), NULL, NULL, 0), moved);
    CHECK(same_bytes(xi_path_join(fx.r.path, BIG), src(BIG)));
    fake_hub_stop(fx.h);
}

TEST(test_hub_concurrent_pulls_of_one_repo_both_succeed) {
    UP();
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        CHECK(kids[k] >= 0);
        if (kids[k] == 0) {
            int rc = pull(REPO);
            if (rc) fprintf(stderr, "    puller %d: %s\n", k, fx.err);
            _exit(rc ? 1 : 0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        CHECK(waitpid(kids[k], &st, 0) == kids[k]);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "puller %d failed", k);
    }
    CHECK(same_bytes(big_blob(""), src(BIG)));
    CHECK(access(big_blob(".incomplete"), F_OK) != 0);
    fake_hub_stop(fx.h);
}

TEST(test_hub_stale_snapshot_link_is_pointed_at_the_listed_blob) {
    UP();
    fx.o.source = XI_HUB_SOURCE_MODELSCOPE;
    PULL_OK(REPO);
    /* as if "master" had moved: config.json links to another blob */
    char *cfg = xi_path_join(fx.r.path, "config.json"), target[512];
    CHECK(unlink(cfg) == 0);
    snprintf(target, sizeof target, "../../blobs/%s", fake_hub_sha256(fx.h, "tokenizer_config.json"));
    CHECK(symlink(target, cfg) == 0);
    PULL_OK(REPO);
    CHECK_EQ(fx.r.n_downloaded, 0); /* the listed blob is still in the store */
    CHECK(same_bytes(cfg, src("config.json")));
    fake_hub_stop(fx.h);
}

TEST(test_hub_renamed_repo_is_followed_through_relative_redirects) {
    UP();
    fake_hub_listing_without_blobs(fx.h); /* so the HEAD requests meet the redirects too */
    PULL_OK("xi-test/renamed");
    CHECK_STR(fx.r.commit, fake_hub_commit(fx.h));
    CHECK(strstr(fx.r.path, "/models--xi-test--renamed/snapshots/"));
    CHECK(same_bytes(xi_path_join(fx.r.path, BIG), src(BIG)));
    fake_hub_stop(fx.h);
}

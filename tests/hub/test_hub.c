/* Hub tests: the real client (libcurl) against the fake hub of fake_hub.h on
 * loopback, into a fresh cache folder per test. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "../model_util.h"
#include "../test.h"
#include "fake_hub.h"
#include "hub/hub.h"

#define REPO "xi-test/stories260K"
#define BIG "model.safetensors"

static const char *source_dir(void) {
    static char *d;
    if (!d) d = xi_test_data("models/stories260K");
    return d;
}

static char *cache_dir(void) { return xi_path_join(xi_test_tmpdir(), "cache"); }

static void opts(xi_hub_options *o, const fake_hub *h, const char *cache) {
    xi_hub_options_default(o);
    o->source = XI_HUB_SOURCE_HF;
    o->endpoint = h ? fake_hub_url(h) : "http://127.0.0.1:9";
    o->cache_dir = cache;
    o->offline = 0;
    o->progress = 0;
    o->quiet = 1;
    o->retries = 0;
}

static char *repo_path(const char *cache, const char *fmt, const char *a, const char *b) {
    xi_buf p = {0};
    xi_buf_printf(&p, "%s/models--xi-test--stories260K/", cache);
    xi_buf_printf(&p, fmt, a, b);
    return p.data;
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
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    char *snap = repo_path(cache, "snapshots/%s", fake_hub_commit(h), "");
    CHECK_STR(r.path, snap);
    CHECK_STR(r.commit, fake_hub_commit(h));
    /* config, generation config, weights and two tokenizer files; reference.json, the onnx
     * subfolder and .gitattributes are not for inference */
    CHECK_EQ(r.n_files, 5);
    CHECK_EQ(r.n_downloaded, 5);
    static const char *const want[] = {"config.json", "generation_config.json", BIG,
                                       "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < XI_ARRAY_LEN(want); i++) {
        char *link = xi_path_join(snap, want[i]), *src = xi_path_join(source_dir(), want[i]);
        char target[512];
        ssize_t n = readlink(link, target, sizeof target - 1);
        CHECKF(n > 0, "%s is not a symlink", link);
        target[n] = 0;
        CHECKF(!strncmp(target, "../../blobs/", 12), "%s -> %s", want[i], target);
        CHECKF(same_bytes(link, src), "%s differs from the hub's copy", want[i]);
        free(link);
        free(src);
    }
    /* the weights' blob is named by its sha256, the LFS oid */
    char *blob = repo_path(cache, "blobs/%s", fake_hub_sha256(h, BIG), "");
    CHECK(same_bytes(blob, xi_path_join(source_dir(), BIG)));
    char *ref = repo_path(cache, "refs/main", "", "");
    char *commit = xi_read_file(ref, NULL, err, sizeof err);
    CHECK_STR(commit, fake_hub_commit(h));
    char *unwanted = xi_path_join(snap, "reference.json");
    CHECK(access(unwanted, F_OK) != 0);
    char *partial = repo_path(cache, "blobs/%s.incomplete", fake_hub_sha256(h, BIG), "");
    CHECK(access(partial, F_OK) != 0);
    CHECK(fake_hub_saw(h, "/api/models/xi-test/stories260K/revision/main", "blobs", "true"));
    CHECK(fake_hub_saw(h, "/cdn/", NULL, NULL)); /* the weights came through the redirect */
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_second_pull_downloads_nothing) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    xi_hub_result_free(&r);
    CHECKF(xi_hub_pull(REPO "@main", &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(r.n_downloaded, 0);
    CHECK_EQ(r.bytes_downloaded, 0);
    CHECK_EQ(fake_hub_downloads(h, BIG), 1);
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_interrupted_pull_resumes_with_a_range_request) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    int64_t total = file_size(xi_path_join(source_dir(), BIG)), half = total / 2;
    fake_hub_cut_once(h, BIG, (long)half);
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECK(xi_hub_pull(REPO, &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, BIG) && strstr(err, "interrupted") && strstr(err, "resume"), "%s", err);
    char *partial = repo_path(cache, "blobs/%s.incomplete", fake_hub_sha256(h, BIG), "");
    CHECK_EQ(file_size(partial), half);
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(fake_hub_last_range(h, BIG), half);
    CHECK_EQ(fake_hub_downloads(h, BIG), 2);
    /* only the missing half of the weights came again (plus the small files after them) */
    CHECK(r.bytes_downloaded >= total - half && r.bytes_downloaded < total);
    CHECK(access(partial, F_OK) != 0);
    char *link = xi_path_join(r.path, BIG);
    CHECK(same_bytes(link, xi_path_join(source_dir(), BIG)));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_broken_transfer_resumes_within_one_pull) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    fake_hub_cut_once(h, BIG, 300000);
    xi_hub_options o;
    opts(&o, h, cache);
    o.retries = 2;
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(fake_hub_downloads(h, BIG), 2);
    CHECK_EQ(fake_hub_last_range(h, BIG), 300000);
    CHECK(same_bytes(xi_path_join(r.path, BIG), xi_path_join(source_dir(), BIG)));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_corrupt_download_is_deleted_and_reported) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    fake_hub_corrupt_once(h, BIG);
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECK(xi_hub_pull(REPO, &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, BIG) && strstr(err, "sha256 mismatch") && strstr(err, "deleted"), "%s", err);
    char *blob = repo_path(cache, "blobs/%s", fake_hub_sha256(h, BIG), "");
    char *partial = repo_path(cache, "blobs/%s.incomplete", fake_hub_sha256(h, BIG), "");
    CHECK(access(blob, F_OK) != 0 && access(partial, F_OK) != 0);
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK(same_bytes(blob, xi_path_join(source_dir(), BIG)));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

/* Flip one byte of the cached weights in place (same size: only the hash can tell). */
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
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    xi_hub_result_free(&r);
    char *blob = repo_path(cache, "blobs/%s", fake_hub_sha256(h, BIG), "");
    CHECK(corrupt_file(blob) == 0);
    /* offline, verification reports it and cannot repair it */
    o.offline = 1;
    o.verify = 1;
    CHECK(xi_hub_pull(REPO, &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, BIG) && strstr(err, "corrupt"), "%s", err);
    /* online, verification replaces it */
    o.offline = 0;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(r.n_downloaded, 1);
    CHECK_EQ(fake_hub_downloads(h, BIG), 2);
    CHECK(same_bytes(blob, xi_path_join(source_dir(), BIG)));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_offline_mode_uses_the_cache_and_never_connects) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    char *online = xi_strdup(r.path);
    xi_hub_result_free(&r);
    int before = fake_hub_requests(h);
    /* HF_HUB_OFFLINE=1 is how users ask for it */
    setenv("HF_HUB_OFFLINE", "1", 1);
    o.offline = -1;
    o.verify = 1;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_STR(r.path, online);
    CHECK_EQ(r.from_cache_offline, 1);
    CHECK_EQ(fake_hub_requests(h), before);
    xi_hub_result_free(&r);
    /* a miss fails clearly, still without a request */
    CHECK(xi_hub_pull("xi-test/other", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "xi-test/other@main is not in the cache") && strstr(err, "HF_HUB_OFFLINE"),
           "%s", err);
    CHECK_EQ(fake_hub_requests(h), before);
    unsetenv("HF_HUB_OFFLINE");
    fake_hub_stop(h);
}

TEST(test_hub_unreachable_hub_falls_back_to_the_cache_or_fails_clearly) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    char *online = xi_strdup(r.path);
    xi_hub_result_free(&r);
    fake_hub_stop(h);
    opts(&o, NULL, cache); /* nothing listens there */
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_STR(r.path, online);
    CHECK_EQ(r.from_cache_offline, 1);
    xi_hub_result_free(&r);
    CHECK(xi_hub_pull("xi-test/other", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "cannot reach http://127.0.0.1:9") && strstr(err, "no network"), "%s", err);
}

TEST(test_hub_errors_name_the_cause) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    o.token = "";
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    setenv("HF_TOKEN_PATH", "/nonexistent/token", 1);
    xi_hub_result r;
    CHECK(xi_hub_pull("xi-test/missing", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "xi-test/missing: no such model") && strstr(err, "HF_TOKEN"), "%s", err);
    CHECK(xi_hub_pull("xi-test/gated", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "gated") && strstr(err, "HF_TOKEN"), "%s", err);
    CHECK(xi_hub_pull(REPO "@v9", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "no revision 'v9'"), "%s", err);
    CHECK(xi_hub_pull("xi-test/bin-only", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "no safetensors weights") && strstr(err, "pytorch_model.bin"), "%s", err);
    CHECK(xi_hub_pull("not a name", &o, &r, err, sizeof err) == -1);
    /* with the token the gated repo opens */
    setenv("HF_TOKEN", "hf_secret", 1);
    o.token = NULL;
    CHECKF(xi_hub_pull("xi-test/gated", &o, &r, err, sizeof err) == 0, "%s", err);
    xi_hub_result_free(&r);
    unsetenv("HF_TOKEN");
    fake_hub_stop(h);
}

TEST(test_hub_modelscope_uses_its_own_url_shapes) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    o.source = XI_HUB_SOURCE_AUTO;
    setenv("VLLM_USE_MODELSCOPE", "1", 1);
    unsetenv("XINFER_SOURCE");
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    unsetenv("VLLM_USE_MODELSCOPE");
    CHECK_STR(r.commit, fake_hub_ms_commit(h));
    CHECK_EQ(r.n_downloaded, 5);
    CHECK(fake_hub_saw(h, "/api/v1/models/xi-test/stories260K/repo/files", "Revision", "master"));
    CHECK(fake_hub_saw(h, "/api/v1/models/xi-test/stories260K/repo/files", "Recursive", "true"));
    CHECK(fake_hub_saw(h, "/api/v1/models/xi-test/stories260K/repo", "FilePath", BIG));
    CHECK(!fake_hub_saw(h, "/api/models/", NULL, NULL));
    CHECK(!fake_hub_saw(h, "/xi-test/", NULL, NULL));
    CHECK(same_bytes(xi_path_join(r.path, BIG), xi_path_join(source_dir(), BIG)));
    /* every ModelScope blob is named by the Sha256 the listing gave */
    char *cfg = xi_path_join(r.path, "config.json"), target[512];
    ssize_t n = readlink(cfg, target, sizeof target - 1);
    CHECK(n > 0);
    target[n] = 0;
    CHECK_STR(strrchr(target, '/') + 1, fake_hub_sha256(h, "config.json"));
    char *ref = repo_path(cache, "refs/master", "", "");
    CHECK_STR(xi_read_file(ref, NULL, NULL, 0), fake_hub_ms_commit(h));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_listing_without_blob_metadata_asks_the_resolve_headers) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    fake_hub_listing_without_blobs(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(fake_hub_heads(h), 5);
    /* X-Linked-Etag named the weights' blob; a corrupt transfer would have been caught */
    char *blob = repo_path(cache, "blobs/%s", fake_hub_sha256(h, BIG), "");
    CHECK(same_bytes(blob, xi_path_join(source_dir(), BIG)));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_resolve_prefers_a_local_folder_and_pulls_names) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    char *p = xi_hub_resolve(source_dir(), &o, err, sizeof err);
    CHECK_STR(p, source_dir());
    free(p);
    CHECK_EQ(fake_hub_requests(h), 0);
    /* a folder that happens to look like ORG/NAME wins over the hub */
    char *local = xi_path_join(xi_test_tmpdir(), "xi-test/stories260K");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", local);
    CHECK(system(cmd) == 0);
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd));
    CHECK(chdir(xi_test_tmpdir()) == 0);
    p = xi_hub_resolve(REPO, &o, err, sizeof err);
    CHECK(chdir(cwd) == 0);
    CHECK_STR(p, REPO);
    free(p);
    CHECK_EQ(fake_hub_requests(h), 0);
    p = xi_hub_resolve(REPO, &o, err, sizeof err);
    CHECKF(p && strstr(p, "/snapshots/"), "%s", p ? p : err);
    free(p);
    CHECK(xi_hub_resolve("./no/such/folder", &o, err, sizeof err) == NULL);
    CHECKF(strstr(err, "no such model folder"), "%s", err);
    fake_hub_stop(h);
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

/* Greedy-decode from prompt ids with one sequence, fp32 KV cache (as test_model.c). */
static int greedy(xi_model *m, const int32_t *prompt, int n_prompt, int n_gen, int32_t *out) {
    const xi_config *c = xi_model_config(m);
    char err[256];
    xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
    if (!kv) return -1;
    tm_seq s;
    tm_seq_init(&s, 1, 15);
    tm_seq *sp = &s;
    float *logits = malloc(sizeof(float) * c->vocab_size);
    const int32_t *ids = prompt;
    int n = n_prompt, rc = 0;
    for (int i = 0; i < n_gen && !rc; i++) {
        rc = tm_forward(m, kv, &sp, &ids, &n, 1, 0, logits);
        out[i] = tm_argmax(logits, c->vocab_size);
        ids = &out[i];
        n = 1;
    }
    free(logits);
    xi_kv_store_free(kv);
    return rc;
}

TEST(test_hub_pulled_model_generates_the_reference_tokens) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    char *dir = xi_hub_resolve(REPO, &o, err, sizeof err);
    CHECKF(dir, "%s", err);
    fake_hub_stop(h);
    xi_model_params p = {.dir = dir, .dtype = "float32", .n_threads = 2};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    CHECKF(m, "%s", err);
    json_t *ref = tm_load_json("models/stories260K/reference.json");
    CHECK(ref);
    json_t *cs = json_array_get(json_object_get(ref, "cases"), 0);
    json_t *pj = json_object_get(cs, "prompt_ids"), *gj = json_object_get(cs, "generated_ids");
    int np = (int)json_array_size(pj), ng = 16;
    CHECK(np > 0 && np < 64 && (int)json_array_size(gj) >= ng);
    int32_t prompt[64], out[16];
    for (int i = 0; i < np; i++) prompt[i] = (int32_t)json_integer_value(json_array_get(pj, i));
    CHECK(greedy(m, prompt, np, ng, out) == 0);
    for (int i = 0; i < ng; i++)
        CHECKF(out[i] == json_integer_value(json_array_get(gj, i)), "token %d: got %d want %lld",
               i, out[i], json_integer_value(json_array_get(gj, i)));
    json_decref(ref);
    xi_model_free(m);
    free(dir);
}

TEST(test_hub_moved_branch_gets_a_new_snapshot_sharing_unchanged_blobs) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir(), err[512] = "";
    xi_hub_options o;
    opts(&o, h, cache);
    xi_hub_result r;
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    char *old = xi_strdup(r.path);
    xi_hub_result_free(&r);
    fake_hub_set_commit(h, "1111111111111111111111111111111111111111");
    CHECKF(xi_hub_pull(REPO, &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_STR(r.commit, "1111111111111111111111111111111111111111");
    CHECK(strcmp(r.path, old) != 0);
    CHECK_EQ(r.n_downloaded, 0); /* same file contents: the blobs are shared */
    CHECK(xi_dir_exists(old));   /* the old snapshot stays usable */
    char *ref = repo_path(cache, "refs/main", "", "");
    CHECK_STR(xi_read_file(ref, NULL, NULL, 0), "1111111111111111111111111111111111111111");
    CHECK(same_bytes(xi_path_join(r.path, BIG), xi_path_join(source_dir(), BIG)));
    xi_hub_result_free(&r);
    fake_hub_stop(h);
}

TEST(test_hub_concurrent_pulls_of_one_repo_both_succeed) {
    fake_hub *h = fake_hub_start(source_dir());
    CHECK(h);
    char *cache = cache_dir();
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        CHECK(kids[k] >= 0);
        if (kids[k] == 0) {
            char err[512] = "";
            xi_hub_options o;
            opts(&o, h, cache);
            xi_hub_result r;
            int rc = xi_hub_pull(REPO, &o, &r, err, sizeof err);
            if (rc) fprintf(stderr, "    puller %d: %s\n", k, err);
            _exit(rc ? 1 : 0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        CHECK(waitpid(kids[k], &st, 0) == kids[k]);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "puller %d failed", k);
    }
    char *blob = repo_path(cache, "blobs/%s", fake_hub_sha256(h, BIG), "");
    CHECK(same_bytes(blob, xi_path_join(source_dir(), BIG)));
    char *partial = repo_path(cache, "blobs/%s.incomplete", fake_hub_sha256(h, BIG), "");
    CHECK(access(partial, F_OK) != 0);
    fake_hub_stop(h);
}

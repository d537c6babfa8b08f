/* GGUF files by name: quantization tags of a GGUF repo on the fake hub (every split part,
 * case-insensitive, Q4_K_M by default), the tag picker's word rules, and Ollama's store. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../test.h"
#include "base/base.h"
#include "fake_hub.h"
#include "hub/hub.h"
#include "model/gguf.h"

/* A tiny valid GGUF whose general.name says which file it is. */
static void write_tiny_gguf(const char *dir, const char *name) {
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "general.name", name);
    static const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    xi_gguf_write_tensor(w, name, XI_GGML_F32, 1, (int64_t[]){8}, v); /* unique across splits */
    char err[256], *p = xi_path_join(dir, name);
    if (xi_gguf_writer_write(w, p, err, sizeof err)) xi_test_fail(__FILE__, __LINE__, "%s", err);
    xi_gguf_writer_free(w);
    free(p);
}

/* The general.name of a GGUF file, or "". */
static const char *gguf_name(const char *path) {
    static char out[256];
    char err[256];
    out[0] = 0;
    xi_gguf *g = xi_gguf_open(path, err, sizeof err);
    if (g && xi_gguf_get_str(g, "general.name"))
        snprintf(out, sizeof out, "%s", xi_gguf_get_str(g, "general.name"));
    xi_gguf_close(g);
    return out;
}

static const char *const repo_files[] = {
    "Tiny-Q4_K_M.gguf", "tiny-q8_0.gguf", "Tiny-Q2_K-00001-of-00002.gguf",
    "Tiny-Q2_K-00002-of-00002.gguf", "mmproj-Tiny-F16.gguf",
};

TEST(test_hub_gguf_tag_picks_every_split_part_and_nothing_else) {
    char *dir = xi_path_join(xi_test_tmpdir(), "repo");
    CHECK(mkdir(dir, 0755) == 0);
    for (size_t i = 0; i < XI_ARRAY_LEN(repo_files); i++) write_tiny_gguf(dir, repo_files[i]);
    char *readme = xi_path_join(dir, "README.md");
    FILE *f = fopen(readme, "w");
    fputs("# tiny\n", f);
    fclose(f);
    fake_hub *h = fake_hub_start(dir);
    CHECK(h);
    xi_hub_options o;
    xi_hub_options_default(&o);
    o.source = XI_HUB_SOURCE_HF;
    char url[256]; /* outlives the hub: the offline part below still names it */
    snprintf(url, sizeof url, "%s", fake_hub_url(h));
    o.endpoint = url;
    o.cache_dir = xi_path_join(xi_test_tmpdir(), "cache");
    o.offline = 0;
    o.progress = 0;
    o.quiet = 1;
    o.retries = 0;
    xi_hub_result r;
    char err[512] = "";

    CHECKF(xi_hub_pull("xi-test/stories260K:q2_k", &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK(r.gguf && strstr(r.gguf, "/snapshots/") && strstr(r.gguf, "Tiny-Q2_K-00001-of-00002.gguf"));
    CHECK_EQ(fake_hub_downloads(h, "Tiny-Q2_K-00001-of-00002.gguf"), 1);
    CHECK_EQ(fake_hub_downloads(h, "Tiny-Q2_K-00002-of-00002.gguf"), 1);
    CHECK_EQ(fake_hub_downloads(h, "Tiny-Q4_K_M.gguf"), 0);
    CHECK_EQ(fake_hub_downloads(h, "mmproj-Tiny-F16.gguf"), 0);
    CHECK_EQ(fake_hub_downloads(h, "README.md"), 1);
    CHECK_STR(gguf_name(r.gguf), "Tiny-Q2_K-00001-of-00002.gguf");
    xi_hub_result_free(&r);

    /* No tag: Q4_K_M; the resolver hands back the file itself. */
    char *path = xi_hub_resolve("xi-test/stories260K", &o, err, sizeof err);
    CHECKF(path, "%s", err);
    CHECK(strstr(path, "Tiny-Q4_K_M.gguf"));
    CHECK_STR(gguf_name(path), "Tiny-Q4_K_M.gguf");
    free(path);
    CHECKF(xi_hub_pull("xi-test/stories260K:Q8_0", &o, &r, err, sizeof err) == 0, "%s", err);
    CHECK_STR(gguf_name(r.gguf), "tiny-q8_0.gguf");
    xi_hub_result_free(&r);

    /* A tag the repo does not have names what it has. */
    CHECK(xi_hub_pull("xi-test/stories260K:Q5_0", &o, &r, err, sizeof err) == -1);
    CHECKF(strstr(err, "'Q5_0'") && strstr(err, "tiny-q8_0.gguf") && !strstr(err, "mmproj"),
           "%s", err);

    /* Offline, the cached snapshot serves each tag pulled before. */
    fake_hub_stop(h);
    o.offline = 1;
    path = xi_hub_resolve("xi-test/stories260K:Q2_K", &o, err, sizeof err);
    CHECKF(path && strstr(path, "Tiny-Q2_K-00001-of-00002.gguf"), "%s", err);
    free(path);
    path = xi_hub_resolve("xi-test/stories260K:q5_0", &o, err, sizeof err);
    CHECKF(!path && strstr(err, "'q5_0'"), "%s", err);
    free(readme);
    free(dir);
}

TEST(test_hub_gguf_tags_match_whole_words_only) {
    static const char *const p[] = {
        "Qwen3-8B-IQ4_NL.gguf",      "Qwen3-8B-Q4_K_M.gguf",       "Qwen3-8B-Q4_K_S.gguf",
        "Qwen3-8B-Q4_K.gguf",        "BF16/Qwen3-8B-BF16-00002-of-00002.gguf",
        "BF16/Qwen3-8B-BF16-00001-of-00002.gguf", "mmproj-Q4_K_M.gguf", "README.md",
    };
    int chosen[8], n = (int)XI_ARRAY_LEN(p);
    char err[512];
    CHECK_EQ(xi_hub_gguf_pick(p, n, "Q4_K", chosen, err, sizeof err), 1);
    CHECK_STR(p[chosen[0]], "Qwen3-8B-Q4_K.gguf");
    CHECK_EQ(xi_hub_gguf_pick(p, n, "q4_nl", chosen, err, sizeof err), -1);
    CHECK_EQ(xi_hub_gguf_pick(p, n, "iq4_nl", chosen, err, sizeof err), 1);
    CHECK_EQ(xi_hub_gguf_pick(p, n, NULL, chosen, err, sizeof err), 1);
    CHECK_STR(p[chosen[0]], "Qwen3-8B-Q4_K_M.gguf");
    CHECK_EQ(xi_hub_gguf_pick(p, n, "bf16", chosen, err, sizeof err), 2);
    CHECK_STR(p[chosen[0]], "BF16/Qwen3-8B-BF16-00001-of-00002.gguf");
    CHECK_STR(p[chosen[1]], "BF16/Qwen3-8B-BF16-00002-of-00002.gguf");
    /* Without Q4_K_M the first GGUF by name (never an mmproj). */
    static const char *const q[] = {"m-Q8_0.gguf", "mmproj-a.gguf", "m-F16.gguf"};
    CHECK_EQ(xi_hub_gguf_pick(q, 3, "", chosen, err, sizeof err), 1);
    CHECK_STR(q[chosen[0]], "m-F16.gguf");
    CHECK_EQ(xi_hub_gguf_pick(q, 0, NULL, chosen, err, sizeof err), -1);
    CHECK(xi_hub_is_repo_name("Qwen/Qwen3-8B-GGUF:Q4_K_M"));
    CHECK(xi_hub_is_repo_name("Qwen/Qwen3-8B-GGUF:q8_0@main"));
    CHECK(!xi_hub_is_repo_name("Qwen/Qwen3-8B-GGUF:"));
    CHECK(!xi_hub_is_repo_name("Qwen:x/Qwen3"));
    CHECK(!xi_hub_is_repo_name("Qwen/Qwen3-8B-GGUF:Q4 K"));
}

/* OLLAMA_MODELS/blobs/sha256-HEX and manifests/registry.ollama.ai/NS/MODEL/TAG. */
static char *ollama_store(const char *model_path, const char *tag, const char *blob_name,
                          const char *digest_hex) {
    char *root = xi_path_join(xi_test_tmpdir(), "ollama");
    xi_buf p = {0};
    xi_buf_printf(&p, "mkdir -p %s/blobs %s/manifests/registry.ollama.ai/%s", root, root,
                  model_path);
    if (system(p.data) != 0) return NULL;
    p.len = 0;
    xi_buf_printf(&p, "%s/manifests/registry.ollama.ai/%s/%s", root, model_path, tag);
    FILE *f = fopen(p.data, "w");
    fprintf(f, "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama.image."
               "template\",\"digest\":\"sha256:%064d\"},{\"mediaType\":\"application/vnd.ollama."
               "image.model\",\"digest\":\"sha256:%s\",\"size\":1}]}", 0, digest_hex);
    fclose(f);
    xi_buf_free(&p);
    char *blobs = xi_path_join(root, "blobs");
    write_tiny_gguf(blobs, blob_name);
    free(blobs);
    return root;
}

TEST(test_hub_ollama_name_resolves_to_the_model_blob_in_place) {
    char err[512] = "";
    const char *hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char blob[80];
    snprintf(blob, sizeof blob, "sha256-%s", hex);
    char *root = ollama_store("library/tiny", "1b", blob, hex);
    CHECK(root);
    setenv("OLLAMA_MODELS", root, 1);
    char *path = xi_hub_ollama_resolve("ollama:tiny:1b", err, sizeof err);
    CHECKF(path, "%s", err);
    char want[1024];
    snprintf(want, sizeof want, "%s/blobs/%s", root, blob);
    CHECK_STR(path, want);
    CHECK_STR(gguf_name(path), blob);
    free(path);
    path = xi_hub_resolve("ollama:tiny:1b", NULL, err, sizeof err);
    CHECKF(path && !strcmp(path, want), "%s", err);
    free(path);
    /* A user namespace, and the default tag "latest". */
    ollama_store("someone/tiny", "latest", blob, hex);
    path = xi_hub_ollama_resolve("ollama:someone/tiny", err, sizeof err);
    CHECKF(path && !strcmp(path, want), "%s", err);
    free(path);
    /* Missing manifest, and a manifest whose blob is not GGUF. */
    CHECK(!xi_hub_ollama_resolve("ollama:tiny:7b", err, sizeof err));
    CHECKF(strstr(err, "library/tiny/7b") && strstr(err, "ollama pull tiny:7b"), "%s", err);
    const char *hex2 = "1111111111111111111111111111111111111111111111111111111111111111";
    ollama_store("library/broken", "latest", "unused", hex2);
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/blobs/sha256-%s", root, hex2);
    FILE *f = fopen(bad, "w");
    fputs("not gguf", f);
    fclose(f);
    CHECK(!xi_hub_ollama_resolve("ollama:broken", err, sizeof err));
    CHECKF(strstr(err, "not a GGUF file"), "%s", err);
    CHECK(!xi_hub_ollama_resolve("ollama:../x", err, sizeof err));
    unsetenv("OLLAMA_MODELS");
    free(root);
}

TEST(test_hub_resolve_accepts_a_local_gguf_file) {
    write_tiny_gguf(xi_test_tmpdir(), "local.gguf");
    char err[256], *p = xi_path_join(xi_test_tmpdir(), "local.gguf");
    char *r = xi_hub_resolve(p, NULL, err, sizeof err);
    CHECKF(r && !strcmp(r, p), "%s", err);
    free(r);
    free(p);
}

/* xinfer pull --local-dir: a plain folder of regular files that still serves after the
 * cache is gone, offline, moved elsewhere, and whose weights match the hub's sha256. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../test.h"
#include "base/base.h"
#include "fake_hub.h"
#include "hub/hub.h"

TEST(test_hub_local_dir_is_plain_files_that_serve_offline_after_a_move) {
    fake_hub *h = fake_hub_start(xi_test_data("models/stories260K"));
    CHECK(h);
    const char *tmp = xi_test_tmpdir();
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "env -u HF_HUB_OFFLINE -u HF_TOKEN HF_ENDPOINT=%s %s pull "
             "xi-test/stories260K --download-dir %s/cache --local-dir %s/usb/stories 2>&1",
             fake_hub_url(h), xi_test_bin(), tmp, tmp);
    CHECKF(xi_test_run(cmd, &out) == 0, "%s", out);
    char want_line[1024];
    snprintf(want_line, sizeof want_line, "5 files in %s/usb/stories", tmp);
    CHECKF(strstr(out, want_line), "%s", out);

    /* regular files, not symlinks, with the hub's bytes */
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/usb/stories/%s", tmp, files[i]);
        struct stat st;
        CHECKF(lstat(path, &st) == 0 && S_ISREG(st.st_mode), "%s is not a regular file", path);
    }
    char weights[1024], hex[65], err[256];
    snprintf(weights, sizeof weights, "%s/usb/stories/model.safetensors", tmp);
    CHECK(xi_hub_sha256_file(weights, hex, err, sizeof err) == 0);
    CHECK_STR(hex, fake_hub_sha256(h, "model.safetensors"));

    /* a second run keeps what is there and fetches nothing */
    const int downloads = fake_hub_downloads(h, "model.safetensors");
    CHECKF(xi_test_run(cmd, &out) == 0, "%s", out);
    CHECK_EQ(fake_hub_downloads(h, "model.safetensors"), downloads);

    /* on another file system (a tmpfs here) the files are copies, byte for byte */
    struct stat t, shm;
    if (!stat(tmp, &t) && !stat("/dev/shm", &shm) && t.st_dev != shm.st_dev) {
        char shm_dir[256];
        snprintf(shm_dir, sizeof shm_dir, "/dev/shm/xinfer-test-%d", (int)getpid());
        snprintf(cmd, sizeof cmd, "env -u HF_HUB_OFFLINE HF_ENDPOINT=%s %s pull xi-test/stories260K "
                 "--download-dir %s/cache --local-dir %s 2>&1", fake_hub_url(h), xi_test_bin(), tmp, shm_dir);
        const int rc = xi_test_run(cmd, &out);
        snprintf(weights, sizeof weights, "%s/model.safetensors", shm_dir);
        const int hashed = xi_hub_sha256_file(weights, hex, err, sizeof err);
        snprintf(cmd, sizeof cmd, "rm -rf %s", shm_dir);
        char *rm_out = NULL;
        xi_test_run(cmd, &rm_out);
        CHECKF(rc == 0 && strstr(out, "(5 copied, 0 linked"), "%s", out);
        CHECK(hashed == 0);
        CHECK_STR(hex, fake_hub_sha256(h, "model.safetensors"));
    }
    fake_hub_stop(h);

    /* "another box": the cache deleted, the folder moved, no hub, HF_HUB_OFFLINE=1 */
    snprintf(cmd, sizeof cmd, "rm -rf %s/cache && mv %s/usb/stories %s/moved", tmp, tmp, tmp);
    CHECK(xi_test_run(cmd, &out) == 0);
    char *ref = xi_read_file(xi_test_data("models/stories260K/reference.json"), NULL, NULL, 0);
    json_t *j = ref ? json_loads(ref, 0, NULL) : NULL;
    const char *want = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "cases"), 0), "text"));
    CHECK(want);
    snprintf(cmd, sizeof cmd, "HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 %s generate --model "
             "%s/moved --prompt '' --max-tokens 200 --temperature 0 2>/dev/null", xi_test_bin(), tmp);
    CHECK(xi_test_run(cmd, &out) == 0);
    size_t n = strlen(want), m = strlen(out);
    while (n && (want[n - 1] == '\n' || want[n - 1] == ' ')) n--;
    while (m && out[m - 1] == '\n') m--;
    CHECKF(m == n && !strncmp(out, want, n), "got:\n%s\nwant:\n%.*s", out, (int)n, want);
    json_decref(j);
    free(ref);
}

/* hub/cache: the Hugging Face hub-cache layout (see hub.h). Every change to the cache is a
 * rename of a finished temporary, so a crash leaves either the old or the new state. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub_internal.h"

char *xi_hub_cache_root(const xi_hub_options *o) {
    if (o && o->cache_dir && *o->cache_dir) return xi_strdup(o->cache_dir);
    const char *s = getenv("HF_HUB_CACHE");
    if (!s || !*s) s = getenv("HUGGINGFACE_HUB_CACHE");
    if (s && *s) return xi_strdup(s);
    const char *home = getenv("HF_HOME");
    if (home && *home) return xi_path_join(home, "hub");
    const char *xdg = getenv("XDG_CACHE_HOME");
    char buf[4096];
    if (xdg && *xdg) snprintf(buf, sizeof buf, "%s/huggingface/hub", xdg);
    else snprintf(buf, sizeof buf, "%s/.cache/huggingface/hub", getenv("HOME") ? getenv("HOME") : ".");
    return xi_strdup(buf);
}

char *xi_hub_repo_dir(const char *root, const char *repo) {
    /* models--ORG--NAME: the slash becomes "--", as huggingface_hub names it. */
    xi_buf b = {0};
    xi_buf_printf(&b, "%s%smodels--", root, root[0] && root[strlen(root) - 1] == '/' ? "" : "/");
    for (const char *p = repo; *p; p++) {
        if (*p == '/') xi_buf_append(&b, "--", 2);
        else xi_buf_append(&b, p, 1);
    }
    return b.data;
}

int xi_hub_mkdirs(const char *path, char *err, size_t errlen) {
    char *p = xi_strdup(path);
    if (!p) return xi_errf(err, errlen, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) && errno != EEXIST) {
                xi_errf(err, errlen, "cannot create %s: %s", p, strerror(errno));
                free(p);
                return -1;
            }
            *s = c;
            if (!c) break;
        }
    }
    free(p);
    return 0;
}

/* Write data to path through path.tmp.PID + rename. */
static int write_atomic(const char *path, const char *data, size_t n, char *err, size_t errlen) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return xi_errf(err, errlen, "%s: %s", tmp, strerror(errno));
    ssize_t k = write(fd, data, n);
    int bad = k != (ssize_t)n || fsync(fd);
    int e = errno;
    close(fd);
    if (bad || rename(tmp, path)) {
        if (!bad) e = errno;
        unlink(tmp);
        return xi_errf(err, errlen, "%s: %s", path, strerror(e));
    }
    return 0;
}

int xi_hub_ref_read(const char *repo_dir, const char *rev, char *out, size_t outlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/refs/%s", repo_dir, rev);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[128] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[strcspn(line, " \r\n")] = 0;
    if (!ok || !line[0]) return -1;
    snprintf(out, outlen, "%s", line);
    return 0;
}

int xi_hub_ref_write(const char *repo_dir, const char *rev, const char *commit, char *err,
                     size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/refs/%s", repo_dir, rev);
    /* A revision like "refs/pr/1" nests folders under refs/. */
    char *dir = xi_strdup(path);
    if (!dir) return xi_errf(err, errlen, "out of memory");
    *strrchr(dir, '/') = 0;
    int rc = xi_hub_mkdirs(dir, err, errlen);
    free(dir);
    if (rc) return -1;
    /* No newline: huggingface_hub writes the bare commit. */
    return write_atomic(path, commit, strlen(commit), err, errlen);
}

int xi_hub_snapshot_link(const char *repo_dir, const char *commit, const char *file,
                         const char *etag, char *err, size_t errlen) {
    xi_buf link = {0}, target = {0};
    xi_buf_printf(&link, "%s/snapshots/%s/%s", repo_dir, commit, file);
    /* One "../" per folder between the link and the repo folder. */
    xi_buf_printf(&target, "../../");
    for (const char *p = file; *p; p++)
        if (*p == '/') xi_buf_printf(&target, "../");
    xi_buf_printf(&target, "blobs/%s", etag);
    int rc = -1;
    char *dir = xi_strdup(link.data);
    char tmp[4300];
    if (!dir) {
        xi_errf(err, errlen, "out of memory");
        goto done;
    }
    *strrchr(dir, '/') = 0;
    if (xi_hub_mkdirs(dir, err, errlen)) goto done;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", link.data, (int)getpid());
    unlink(tmp);
    if (symlink(target.data, tmp) || rename(tmp, link.data)) {
        xi_errf(err, errlen, "%s: %s", link.data, strerror(errno));
        unlink(tmp);
        goto done;
    }
    rc = 0;
done:
    free(dir);
    xi_buf_free(&link);
    xi_buf_free(&target);
    return rc;
}

int xi_hub_cached_commit(const char *repo_dir, const char *rev, char *out, size_t outlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/snapshots/%s", repo_dir, rev);
    if (xi_dir_exists(path)) {
        snprintf(out, outlen, "%s", rev);
        return 0;
    }
    return xi_hub_ref_read(repo_dir, rev, out, outlen);
}

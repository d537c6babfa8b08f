/* hub/local_dir: `xinfer pull ORG/NAME --local-dir DIR`. The pull itself goes through the
 * cache (resumable, sha256-verified); then each file of the snapshot becomes a regular file
 * in DIR: a hard link to the cached blob when DIR is on the same file system, a copy
 * otherwise. DIR has no symlinks and no cache layout, so it can be copied to a USB disk and
 * served on a box without a network (`HF_HUB_OFFLINE=1 xinfer serve DIR`). Each file is
 * written to a temporary name and renamed, so an interrupted export leaves whole files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/hub_internal.h"

static int copy_file(const char *src, const char *dst, char *err, size_t errlen) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return xi_errf(err, errlen, "%s: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return xi_errf(err, errlen, "%s: %s", dst, strerror(errno));
    }
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    int rc = buf ? 0 : xi_errf(err, errlen, "out of memory");
    for (ssize_t n; !rc && (n = read(in, buf, CHUNK)) != 0;) {
        if (n < 0) {
            if (errno == EINTR) continue;
            rc = xi_errf(err, errlen, "%s: %s", src, strerror(errno));
            break;
        }
        for (ssize_t off = 0; off < n && !rc;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno != EINTR) rc = xi_errf(err, errlen, "%s: %s", dst, strerror(errno));
            if (w > 0) off += w;
        }
    }
    /* The folder is meant to be carried away on removable disks: flush before the rename. */
    if (!rc && fsync(out)) rc = xi_errf(err, errlen, "%s: %s", dst, strerror(errno));
    if (close(out) && !rc) rc = xi_errf(err, errlen, "%s: %s", dst, strerror(errno));
    close(in);
    free(buf);
    return rc;
}

/* One file: skip it when DIR already holds this very blob, else link or copy. */
static int export_file(const char *src, const char *dst, int *n_copied, char *err, size_t errlen) {
    struct stat s, d;
    if (stat(src, &s)) return xi_errf(err, errlen, "%s: %s", src, strerror(errno));
    if (!lstat(dst, &d) && S_ISREG(d.st_mode) && d.st_ino == s.st_ino && d.st_dev == s.st_dev)
        return 0;
    xi_buf tmp = {0};
    xi_buf_printf(&tmp, "%s.incomplete", dst);
    if (!tmp.data) return xi_errf(err, errlen, "out of memory");
    unlink(tmp.data);
    int rc = 0;
    if (linkat(AT_FDCWD, src, AT_FDCWD, tmp.data, AT_SYMLINK_FOLLOW)) {
        rc = copy_file(src, tmp.data, err, errlen);
        if (!rc) ++*n_copied;
    }
    if (!rc && rename(tmp.data, dst)) rc = xi_errf(err, errlen, "%s: %s", dst, strerror(errno));
    if (rc) unlink(tmp.data);
    xi_buf_free(&tmp);
    return rc;
}

static int export_tree(const char *src_dir, const char *dst_dir, int *n_files, int *n_copied,
                       char *err, size_t errlen) {
    if (xi_hub_mkdirs(dst_dir, err, errlen)) return -1;
    DIR *d = opendir(src_dir);
    if (!d) return xi_errf(err, errlen, "%s: %s", src_dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char *src = xi_path_join(src_dir, e->d_name), *dst = xi_path_join(dst_dir, e->d_name);
        struct stat st;
        if (!src || !dst) rc = xi_errf(err, errlen, "out of memory");
        else if (stat(src, &st)) rc = xi_errf(err, errlen, "%s: %s", src, strerror(errno));
        else if (S_ISDIR(st.st_mode)) rc = export_tree(src, dst, n_files, n_copied, err, errlen);
        else if (!(rc = export_file(src, dst, n_copied, err, errlen))) ++*n_files;
        free(src);
        free(dst);
    }
    closedir(d);
    return rc;
}

int xi_hub_export_dir(const char *snapshot, const char *dir, int *n_files, int *n_copied,
                      char *err, size_t errlen) {
    *n_files = *n_copied = 0;
    return export_tree(snapshot, dir, n_files, n_copied, err, errlen);
}

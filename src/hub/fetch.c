/* hub/fetch: one file from the hub into the blob store.
 *
 * The bytes go to BLOB.incomplete (kept across runs, so an interrupted pull resumes with an
 * HTTP Range request), are hashed as they arrive, and are renamed to BLOB only after the
 * size and sha256 match what the hub promised: a blob under its final name is always whole.
 * An exclusive flock on the .incomplete file keeps two processes from writing one blob. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hub/hub_internal.h"

/* ---- sha256 ------------------------------------------------------------------------- */

static void hex_digest(EVP_MD_CTX *md, char hex[65]) {
    unsigned char d[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(md, d, &n);
    for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    hex[64] = 0;
}

/* Hash the first n bytes of fd into md (n < 0: to the end). Returns bytes read or -1. */
static int64_t hash_fd(int fd, EVP_MD_CTX *md, int64_t n) {
    static __thread char buf[1 << 16];
    int64_t done = 0;
    if (lseek(fd, 0, SEEK_SET) < 0) return -1;
    while (n < 0 || done < n) {
        size_t want = sizeof buf;
        if (n >= 0 && (int64_t)want > n - done) want = (size_t)(n - done);
        ssize_t k = read(fd, buf, want);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) break;
        EVP_DigestUpdate(md, buf, (size_t)k);
        done += k;
    }
    return done;
}

int xi_hub_sha256_file(const char *path, char hex[65], char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return xi_errf(err, errlen, "%s: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = -1;
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
        xi_errf(err, errlen, "%s: sha256 unavailable in libcrypto", path);
    else if (hash_fd(fd, md, -1) < 0)
        xi_errf(err, errlen, "%s: read: %s", path, strerror(errno));
    else {
        hex_digest(md, hex);
        rc = 0;
    }
    EVP_MD_CTX_free(md);
    close(fd);
    return rc;
}

int xi_hub_blob_ok(const char *blob_path, const char *sha256, int64_t size, char *err,
                   size_t errlen) {
    struct stat st;
    if (stat(blob_path, &st)) return 0;
    if (size >= 0 && st.st_size != size) return 0;
    if (!sha256) return 1;
    char hex[65];
    if (xi_hub_sha256_file(blob_path, hex, err, errlen)) return -1;
    return strcasecmp(hex, sha256) == 0;
}

/* ---- progress ----------------------------------------------------------------------- */

const char *xi_hub_fmt_bytes(int64_t n, char *buf, size_t len) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0) snprintf(buf, len, "%lld B", (long long)n);
    else snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

typedef struct progress {
    int bar;                    /* draw a terminal bar */
    int quiet;                  /* no bar and no log lines */
    const char *name;
    int64_t total;              /* -1 unknown */
    int64_t start_bytes;        /* already on disk when this run began (resumed) */
    double t0, t_last;
} progress;

/* A terminal gets a bar redrawn ten times a second; a log (serve's stderr in a file) gets a
 * line every 15 s, so a long download is never silent. */
static void progress_draw(progress *p, int64_t done, int final) {
    double now = xi_now();
    if (p->quiet || (!p->bar && final)) return;
    if (!final && now - p->t_last < (p->bar ? 0.1 : 15.0)) return;
    if (!p->bar && p->t_last == 0) { /* the first log line comes after 15 s, not at once */
        p->t_last = now;
        return;
    }
    p->t_last = now;
    double dt = now - p->t0;
    double rate = dt > 0 ? (double)(done - p->start_bytes) / dt : 0;
    char a[32], b[32], r[32], eta[32] = "";
    xi_hub_fmt_bytes(done, a, sizeof a);
    xi_hub_fmt_bytes(p->total, b, sizeof b);
    xi_hub_fmt_bytes((int64_t)rate, r, sizeof r);
    if (p->total > 0 && rate > 0 && done < p->total) {
        long s = (long)((double)(p->total - done) / rate);
        snprintf(eta, sizeof eta, " ETA %ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    }
    int pct = p->total > 0 ? (int)(100.0 * (double)done / (double)p->total) : 0;
    if (!p->bar) {
        XI_INFO("%s: %d%% %s/%s %s/s%s", p->name, pct, a, p->total > 0 ? b : "?", r, eta);
        return;
    }
    char barbuf[32];
    int w = 24, fill = p->total > 0 ? (int)((double)done / (double)p->total * w) : 0;
    for (int i = 0; i < w; i++) barbuf[i] = i < fill ? '#' : '.';
    barbuf[w] = 0;
    fprintf(stderr, "\r%-32.32s %3d%% [%s] %s/%s %s/s%s\033[K", p->name, pct, barbuf, a,
            p->total > 0 ? b : "?", r, eta);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

/* ---- the download ------------------------------------------------------------------- */

typedef struct sink_ctx {
    int fd;
    EVP_MD_CTX *md;
    int64_t have;               /* bytes in the .incomplete file */
    int64_t received;           /* body bytes this call */
    int64_t resume_from;        /* what the request asked for */
    const xi_http_resp *resp;
    int started;                /* the first body byte of this response was seen */
    int write_errno;
    progress *prog;
} sink_ctx;

static size_t sink_write(void *user, const char *data, size_t n) {
    sink_ctx *s = user;
    if (!s->started) {
        s->started = 1;
        long st = s->resp->status;
        if (st == 200 && s->have > 0) {
            /* The server ignored the Range: start the file over. */
            if (ftruncate(s->fd, 0) || lseek(s->fd, 0, SEEK_SET) < 0) {
                s->write_errno = errno;
                return 0;
            }
            EVP_DigestInit_ex(s->md, EVP_sha256(), NULL);
            s->have = 0;
            s->prog->start_bytes = 0;
        } else if (st == 206 && s->resp->range_start != s->resume_from) {
            s->write_errno = EPROTO;
            return 0;
        } else if (st != 200 && st != 206) {
            return n; /* an error page: the status says it all, keep nothing */
        }
    }
    long st = s->resp->status;
    if (st != 200 && st != 206) return n;
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t k = write(s->fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            s->write_errno = errno;
            return 0;
        }
        p += k;
        left -= (size_t)k;
    }
    EVP_DigestUpdate(s->md, data, n);
    s->have += (int64_t)n;
    s->received += (int64_t)n;
    progress_draw(s->prog, s->have, 0);
    return n;
}

static int status_error(const xi_http_resp *r, const char *what, const char *token_env,
                        char *err, size_t errlen) {
    if (r->status == 401 || r->status == 403)
        return xi_errf(err, errlen, "%s: not authorised (HTTP %ld): set %s to a token with "
                       "access to this repository", what, r->status, token_env);
    if (r->status == 404) return xi_errf(err, errlen, "%s: not found on the hub (HTTP 404)", what);
    return xi_errf(err, errlen, "%s: the hub answered HTTP %ld", what, r->status);
}

/* Refuse to start a download the disk cannot hold; ENOSPC halfway is still caught. */
static int check_space(int fd, const char *path, int64_t need, char *err, size_t errlen) {
    struct statvfs vs;
    if (need <= 0 || fstatvfs(fd, &vs)) return 0;
    int64_t avail = (int64_t)vs.f_bavail * (int64_t)vs.f_frsize;
    if (avail >= need) return 0;
    char a[32], b[32];
    return xi_errf(err, errlen, "disk full: %s needs %s more, %s free", path,
                   xi_hub_fmt_bytes(need, a, sizeof a), xi_hub_fmt_bytes(avail, b, sizeof b));
}

static int download(xi_hub_fetch *f, int fd, const char *tmp, EVP_MD_CTX *md, int64_t *have,
                    char *err, size_t errlen) {
    progress prog = {f->progress, f->quiet, f->display, f->size, *have, xi_now(), 0};
    int retries = f->retries < 0 ? 5 : f->retries;
    for (int attempt = 0;; attempt++) {
        if (f->size >= 0 && *have == f->size) break;
        if (check_space(fd, tmp, f->size >= 0 ? f->size - *have : 0, err, errlen)) return -1;
        if (lseek(fd, *have, SEEK_SET) < 0) return xi_errf(err, errlen, "%s: %s", tmp, strerror(errno));
        xi_http_resp resp;
        sink_ctx s = {fd, md, *have, 0, *have, &resp, 0, 0, &prog};
        xi_http_req q = {.url = f->url, .token = f->token, .follow = 1, .range_from = *have,
                         .sink = sink_write, .user = &s};
        int rc = xi_http_do(&q, &resp);
        *have = s.have;
        f->bytes_received += s.received;
        if (s.write_errno == ENOSPC || s.write_errno == EDQUOT) {
            char a[32];
            return xi_errf(err, errlen, "disk full writing %s (%s of %s so far; free space and "
                           "run again to resume)", tmp, xi_hub_fmt_bytes(*have, a, sizeof a),
                           f->display);
        }
        if (s.write_errno == EPROTO)
            return xi_errf(err, errlen, "%s: the server answered a different range than asked",
                           f->display);
        if (s.write_errno) return xi_errf(err, errlen, "%s: %s", tmp, strerror(s.write_errno));
        if (rc == 0 && resp.status == 416 && f->size >= 0 && *have >= f->size) break;
        if (rc == 0 && resp.status == 416) {
            /* Our partial file is longer than the remote one: it cannot be a prefix. */
            if (ftruncate(fd, 0)) return xi_errf(err, errlen, "%s: %s", tmp, strerror(errno));
            EVP_DigestInit_ex(md, EVP_sha256(), NULL);
            *have = 0;
            continue;
        }
        if (rc == 0 && resp.status != 200 && resp.status != 206)
            return status_error(&resp, f->display, f->token_env ? f->token_env : "HF_TOKEN", err,
                                errlen);
        if (rc == 0 && (f->size < 0 || *have >= f->size)) break;
        /* Broken mid-way (or ended short): resume from what arrived. */
        int broken = rc != 0 ? resp.fail == XI_HTTP_BROKEN : 1;
        if (!broken || attempt >= retries) {
            char a[32];
            if (rc != 0 && resp.fail == XI_HTTP_UNREACHABLE)
                return xi_errf(err, errlen, "%s: cannot reach %s (%s): no network?", f->display,
                               f->url, resp.fail_msg);
            return xi_errf(err, errlen, "%s: download interrupted after %s (%s); run the pull "
                           "again to resume", f->display, xi_hub_fmt_bytes(*have, a, sizeof a),
                           rc != 0 ? resp.fail_msg : "connection closed early");
        }
        if (!f->quiet)
            XI_WARN("%s: transfer broke at %lld bytes (%s), resuming", f->display,
                    (long long)*have, rc != 0 ? resp.fail_msg : "closed early");
        usleep((useconds_t)(200000u << (attempt < 4 ? attempt : 4)));
    }
    progress_draw(&prog, *have, 1);
    return 0;
}

int xi_hub_fetch_file(xi_hub_fetch *f, char *err, size_t errlen) {
    size_t n = strlen(f->blob_path) + 16;
    char *tmp = malloc(n);
    if (!tmp) return xi_errf(err, errlen, "out of memory");
    snprintf(tmp, n, "%s.incomplete", f->blob_path);
    int rc = -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int fd = -1;
    struct stat st, st_path;
    /* Lock the .incomplete file; if another process renamed or removed it while we waited,
     * our descriptor names a stale inode, so open the path again. */
    for (;;) {
        fd = open(tmp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            xi_errf(err, errlen, "%s: %s", tmp, strerror(errno));
            goto done;
        }
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            if (!f->quiet) XI_INFO("%s: another process is downloading it, waiting", f->display);
            if (flock(fd, LOCK_EX)) {
                xi_errf(err, errlen, "%s: lock: %s", tmp, strerror(errno));
                goto done;
            }
        }
        if (!stat(f->blob_path, &st)) break; /* the other process finished it */
        if (!fstat(fd, &st) && !stat(tmp, &st_path) && st.st_ino == st_path.st_ino &&
            st.st_dev == st_path.st_dev)
            break;
        close(fd);
    }
    if (!stat(f->blob_path, &st)) { /* the other process finished it */
        rc = 0;
        goto done;
    }
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        xi_errf(err, errlen, "sha256 unavailable in libcrypto");
        goto done;
    }
    if (fstat(fd, &st)) {
        xi_errf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    int64_t have = st.st_size;
    if (f->size >= 0 && have > f->size) {
        if (ftruncate(fd, 0)) {
            xi_errf(err, errlen, "%s: %s", tmp, strerror(errno));
            goto done;
        }
        have = 0;
    }
    if (have > 0) {
        /* Resuming: the digest must cover the bytes already on disk. */
        if (hash_fd(fd, md, have) != have) {
            xi_errf(err, errlen, "%s: read: %s", tmp, strerror(errno));
            goto done;
        }
        if (!f->quiet) {
            char a[32];
            XI_INFO("%s: resuming at %s", f->display, xi_hub_fmt_bytes(have, a, sizeof a));
        }
    } else if (!f->quiet && !f->progress) {
        char a[32];
        XI_INFO("downloading %s (%s)", f->display,
                f->size >= 0 ? xi_hub_fmt_bytes(f->size, a, sizeof a) : "size unknown");
    }
    if (download(f, fd, tmp, md, &have, err, errlen)) goto done;

    /* Verify before the blob gets its final name. */
    if (f->size >= 0 && have != f->size) {
        unlink(tmp);
        xi_errf(err, errlen, "%s: size mismatch (expected %lld bytes, got %lld); the download "
                "was deleted, run the pull again", f->display, (long long)f->size,
                (long long)have);
        goto done;
    }
    char hex[65];
    hex_digest(md, hex);
    if (f->sha256 && strcasecmp(hex, f->sha256)) {
        unlink(tmp);
        xi_errf(err, errlen, "%s: sha256 mismatch (expected %s, got %s); the download was "
                "deleted, run the pull again", f->display, f->sha256, hex);
        goto done;
    }
    if (fsync(fd) || rename(tmp, f->blob_path)) {
        xi_errf(err, errlen, "%s: %s", f->blob_path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    /* Nothing worth resuming stays behind (we hold the lock, so no one else writes it). */
    if (fd >= 0 && !fstat(fd, &st) && st.st_size == 0 && !stat(tmp, &st_path) &&
        st.st_ino == st_path.st_ino && st.st_dev == st_path.st_dev)
        unlink(tmp);
    if (fd >= 0) close(fd);
    EVP_MD_CTX_free(md);
    free(tmp);
    return rc;
}

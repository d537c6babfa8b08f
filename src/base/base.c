/* base: errors, logging, clocks, files, memory. */
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

int xi_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int xi_err_prefix(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return -1;
    char old[1024];
    snprintf(old, sizeof old, "%s", err);
    char pre[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", pre, old);
    return -1;
}

static int log_level = -1;

void xi_log_set_level(int level) { log_level = level; }

void xi_log(int level, const char *fmt, ...) {
    if (log_level < 0) {
        const char *s = getenv("XINFER_LOG_LEVEL");
        log_level = XI_LOG_INFO;
        if (s) {
            if (!strcasecmp(s, "debug")) log_level = XI_LOG_DEBUG;
            else if (!strcasecmp(s, "warn") || !strcasecmp(s, "warning")) log_level = XI_LOG_WARN;
            else if (!strcasecmp(s, "error")) log_level = XI_LOG_ERROR;
        }
    }
    if (level < log_level) return;
    static const char *names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    char line[2048];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    int n = snprintf(line, sizeof line, "%s %02d-%02d %02d:%02d:%02d] ", names[level],
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

double xi_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double xi_wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *xi_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        xi_errf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    xi_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (xi_buf_append(&b, chunk, n)) {
            fclose(f);
            xi_buf_free(&b);
            xi_errf(err, errlen, "%s: out of memory", path);
            return NULL;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        xi_buf_free(&b);
        xi_errf(err, errlen, "%s: read error", path);
        return NULL;
    }
    if (!b.data && xi_buf_append(&b, "", 0)) return NULL;
    if (len) *len = b.len;
    return b.data;
}

int xi_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int xi_dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *xi_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t o = a;
    if (a && dir[a - 1] != '/') p[o++] = '/';
    memcpy(p + o, name, b + 1);
    return p;
}

#define HUGE_ALIGN (2u << 20)

void *xi_alloc_big(size_t bytes) {
    if (bytes == 0) bytes = 64;
    if (bytes < HUGE_ALIGN) {
        void *p = NULL;
        size_t rounded = (bytes + 63) & ~(size_t)63;
        if (posix_memalign(&p, 64, rounded)) return NULL;
        memset(p, 0, rounded);
        return p;
    }
    /* mmap gives zeroed anonymous memory; over-allocate to align to 2 MiB. */
    size_t total = bytes + HUGE_ALIGN;
    char *raw = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    size_t head = start - (uintptr_t)raw;
    if (head) munmap(raw, head);
    size_t tail = total - head - bytes;
    size_t bytes_r = bytes;
    /* keep the tail up to the page boundary mapped */
    size_t page = 4096;
    size_t keep = (bytes_r + page - 1) & ~(page - 1);
    if (tail > keep - bytes_r) munmap((char *)start + keep, total - head - keep);
    madvise((void *)start, keep, MADV_HUGEPAGE);
    return (void *)start;
}

void xi_free_big(void *p, size_t bytes) {
    if (!p) return;
    if (bytes == 0) bytes = 64;
    if (bytes < HUGE_ALIGN) {
        free(p);
        return;
    }
    size_t keep = (bytes + 4095) & ~(size_t)4095;
    munmap(p, keep);
}

void *xi_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }

char *xi_strdup(const char *s) { return s ? strdup(s) : NULL; }

char *xi_strndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

uint64_t xi_hash64(const void *data, size_t len) { return XXH3_64bits(data, len); }

int xi_buf_append(xi_buf *b, const void *data, size_t len) {
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return -1;
        b->data = d;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
    return 0;
}

int xi_buf_printf(xi_buf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof tmp) return xi_buf_append(b, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = xi_buf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

void xi_buf_free(xi_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

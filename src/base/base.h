/* base: errors, logging, time, files and aligned memory shared by every module.
 * Thread-safe: every function here may be called from any thread. */
#ifndef XI_BASE_H
#define XI_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Errors are values: a failing function returns -1 (or NULL) and writes one line into the
 * caller's buffer naming what was wrong. xi_errf formats that line and returns -1 so that
 * `return xi_errf(err, errlen, "...")` is the idiom. err may be NULL. */
int xi_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an existing message: "ctx: old message". Returns -1. */
int xi_err_prefix(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

enum { XI_LOG_DEBUG, XI_LOG_INFO, XI_LOG_WARN, XI_LOG_ERROR };
/* Log to stderr as "LEVEL mm-dd hh:mm:ss file] message"; level from XINFER_LOG_LEVEL. */
void xi_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void xi_log_set_level(int level);
#define XI_INFO(...) xi_log(XI_LOG_INFO, __VA_ARGS__)
#define XI_WARN(...) xi_log(XI_LOG_WARN, __VA_ARGS__)
#define XI_DEBUG(...) xi_log(XI_LOG_DEBUG, __VA_ARGS__)

/* Monotonic seconds. */
double xi_now(void);
/* Wall-clock seconds since the epoch. */
double xi_wall_time(void);

/* Read a whole file into a NUL-terminated heap buffer. */
char *xi_read_file(const char *path, size_t *len, char *err, size_t errlen);
int xi_file_exists(const char *path);
int xi_dir_exists(const char *path);
/* Join a directory and a file name into a heap string. */
char *xi_path_join(const char *dir, const char *name);

/* Large buffers (weights, KV cache): 64-byte aligned, 2 MiB aligned and MADV_HUGEPAGE
 * when big. Zero-filled. Free with xi_free_big(ptr, bytes). */
void *xi_alloc_big(size_t bytes);
void xi_free_big(void *p, size_t bytes);

/* Checked allocation helpers: abort-free; return NULL on failure like malloc. */
void *xi_calloc(size_t n, size_t size);
char *xi_strdup(const char *s);
char *xi_strndup(const char *s, size_t n);

/* 64-bit hash of bytes (XXH3), used for logits fingerprints and tables. */
uint64_t xi_hash64(const void *data, size_t len);

/* Growable byte buffer. */
typedef struct xi_buf {
    char *data;  /* [len] bytes + NUL, owned */
    size_t len;
    size_t cap;
} xi_buf;
int xi_buf_append(xi_buf *b, const void *data, size_t len);
int xi_buf_printf(xi_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void xi_buf_free(xi_buf *b);

#define XI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define XI_MAX(a, b) ((a) > (b) ? (a) : (b))
#define XI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif

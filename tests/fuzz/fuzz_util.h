/* fuzz_util: shared by the libFuzzer harnesses of tests/fuzz. Each harness is one .c file with
 * LLVMFuzzerTestOneInput; this header gives them a private scratch folder (created once per
 * process, removed at exit), file writing, test-data paths and input splitting. Harnesses
 * call fuzz_fail() when a documented property breaks, so that libFuzzer records a crash. */
#ifndef XI_FUZZ_UTIL_H
#define XI_FUZZ_UTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir_path[256];

static inline int fuzz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void fuzz_dir_cleanup(void) {
    if (fuzz_dir_path[0]) nftw(fuzz_dir_path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Scratch folder of this process (tmpfs when there is one: every input is written to it). */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/xinfer-fuzz-XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_dir_cleanup);
    }
    return fuzz_dir_path;
}

/* dir/name as a static path (one at a time per call site is enough for the harnesses). */
static inline const char *fuzz_path(const char *name, char *out, size_t outlen) {
    snprintf(out, outlen, "%s/%s", fuzz_dir(), name);
    return out;
}

/* Write data[0..len) to dir/name, replacing it; len == (size_t)-1 removes the file. */
static inline void fuzz_write(const char *name, const void *data, size_t len) {
    char p[512];
    fuzz_path(name, p, sizeof p);
    if (len == (size_t)-1) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f)) {
        perror(p);
        abort();
    }
}

/* Shared test data (XINFER_TEST_DATA, else ../shared/data as in the test runner). */
static inline void fuzz_data_path(const char *rel, char *out, size_t outlen) {
    const char *root = getenv("XINFER_TEST_DATA");
    if (!root || !*root) root = "../shared/data";
    snprintf(out, outlen, "%s/%s", root, rel);
}

/* Cut data at NUL bytes into at most max parts, each copied NUL-terminated into parts[]
 * (malloc'ed; free with fuzz_parts_free). The last part keeps any further NULs as text ends.
 * Returns the count (>= 1). */
static inline int fuzz_split(const uint8_t *data, size_t size, char **parts, size_t *lens, int max) {
    int n = 0;
    size_t i = 0;
    while (n < max) {
        size_t j = i;
        if (n < max - 1)
            while (j < size && data[j]) j++;
        else
            j = size;
        parts[n] = malloc(j - i + 1);
        if (!parts[n]) abort();
        memcpy(parts[n], data + i, j - i);
        parts[n][j - i] = 0;
        lens[n] = j - i;
        n++;
        if (j >= size) break;
        i = j + 1;
    }
    return n;
}

static inline void fuzz_parts_free(char **parts, int n) {
    for (int i = 0; i < n; i++) free(parts[i]);
}

/* A broken property: print it and abort so libFuzzer saves the input. */
#define fuzz_fail(...)                                                                        \
    do {                                                                                      \
        fprintf(stderr, "fuzz property failed at %s:%d: ", __FILE__, __LINE__);             \
        fprintf(stderr, __VA_ARGS__);                                                         \
        fputc('\n', stderr);                                                                  \
        abort();                                                                              \
    } while (0)

#endif

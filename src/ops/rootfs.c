/* ops/rootfs: file access relative to an inspected root, and KEY=value lookups. */
#include "ops/rootfs.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/base.h"

char *xi_rootfs_path(const char *root, const char *path) {
    if (!root || !*root || !strcmp(root, "/")) return xi_strdup(path);
    return xi_path_join(root, path[0] == '/' ? path + 1 : path);
}

char *xi_rootfs_read(const char *root, const char *path) {
    char *p = xi_rootfs_path(root, path);
    if (!p) return NULL;
    char *text = xi_file_exists(p) ? xi_read_file(p, NULL, NULL, 0) : NULL;
    free(p);
    return text;
}

int xi_rootfs_exists(const char *root, const char *path) {
    char *p = xi_rootfs_path(root, path);
    int ok = p && access(p, F_OK) == 0;
    free(p);
    return ok;
}

void xi_copy_str(char *out, size_t outlen, const char *s) {
    if (!outlen) return;
    size_t n = s ? strlen(s) : 0;
    if (n >= outlen) n = outlen - 1;
    if (n) memcpy(out, s, n);
    out[n] = 0;
}

int xi_contains_ci(const char *hay, const char *needle) {
    if (!hay || !needle) return 0;
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n)) return 1;
    return n == 0;
}

int xi_kv_get(const char *text, const char *key, char *out, size_t outlen) {
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        const char *p = line;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if ((size_t)(end - p) > klen && !strncmp(p, key, klen)) {
            const char *q = p + klen;
            while (q < end && (*q == ' ' || *q == '\t')) q++;
            if (q < end && *q == '=') {
                q++;
                while (q < end && isspace((unsigned char)*q)) q++;
                const char *e = end;
                while (e > q && isspace((unsigned char)e[-1])) e--;
                if (e - q >= 2 && (*q == '"' || *q == '\'') && e[-1] == *q) q++, e--;
                size_t n = (size_t)(e - q);
                if (n >= outlen) n = outlen - 1;
                memcpy(out, q, n);
                out[n] = 0;
                return 1;
            }
        }
        line = *end ? end + 1 : end;
    }
    return 0;
}

int xi_on_path(const char *prog) {
    const char *path = getenv("PATH");
    char buf[1024];
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        if (n && n < sizeof buf - strlen(prog) - 2) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
            if (access(buf, X_OK) == 0) return 1;
        }
        p += n + (p[n] == ':');
    }
    return 0;
}

int xi_rootfs_count_numbered(const char *root, const char *dir, const char *prefix) {
    char *path = xi_rootfs_path(root, dir);
    DIR *d = path ? opendir(path) : NULL;
    free(path);
    if (!d) return 0;
    int n = 0;
    size_t plen = strlen(prefix);
    struct dirent *de;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, prefix, plen) && isdigit((unsigned char)de->d_name[plen])) n++;
    closedir(d);
    return n;
}

/* ops/rootfs: read a machine's files under an optional root folder, so that `xinfer env`
 * can inspect a saved tree (tests, a mounted image) exactly as it inspects "/".
 * Pure functions over the file system; any thread. */
#ifndef XI_OPS_ROOTFS_H
#define XI_OPS_ROOTFS_H

#include <stddef.h>

/* root NULL or "" means "/". path is absolute ("/etc/os-release"). The result is a heap
 * string the caller frees. */
char *xi_rootfs_path(const char *root, const char *path);
/* Whole file as a NUL-terminated heap buffer, or NULL when it is absent or unreadable. */
char *xi_rootfs_read(const char *root, const char *path);
int xi_rootfs_exists(const char *root, const char *path);
/* Entries of dir named prefix<digit>... (node0, davinci3); 0 when dir is absent. */
int xi_rootfs_count_numbered(const char *root, const char *dir, const char *prefix);

/* 1 when an executable named prog is on $PATH (commands are only run when present). */
int xi_on_path(const char *prog);

/* Value of `key` in KEY=value text (os-release, version.info, install.info): surrounding
 * blanks and one pair of quotes removed. Returns 1 and fills out, or 0 when the key is absent.
 * Keys match case-sensitively; the first occurrence wins. */
int xi_kv_get(const char *text, const char *key, char *out, size_t outlen);

/* Copy at most outlen-1 bytes of s and NUL-terminate (snprintf without format warnings). */
void xi_copy_str(char *out, size_t outlen, const char *s);
/* Case-insensitive substring test. */
int xi_contains_ci(const char *hay, const char *needle);

#endif

/* model/safetensors: mmap reader for single and sharded .safetensors files.
 *
 * Layout of a file: u64 little-endian header length N, N bytes of JSON, then the data region.
 * The JSON maps tensor names to {dtype, shape, data_offsets: [begin, end)} relative to the data
 * region, plus an optional "__metadata__" string map. Everything the header claims is checked
 * against the mapped file before a tensor is exposed, so later code can trust data/nbytes. */
#include "model/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "model/name_index.h"

/* A header larger than this is corrupt, not a model: real ones are well under 10 MB. */
#define XI_ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct st_file {
    char *path;        /* owned */
    void *map;         /* whole file, PROT_READ + MAP_PRIVATE; NULL for an empty mapping */
    size_t size;
} st_file;

typedef struct st_meta {
    char *key, *value; /* owned */
} st_meta;

struct xi_st_set {
    st_file *files;          /* [n_files] owned */
    int n_files;
    xi_st_tensor *tensors;   /* [n_tensors] owned, file order then data offset order */
    int n_tensors, cap_tensors;
    int *by_name;            /* [n_tensors] indices into tensors sorted by name, for bsearch */
    st_meta *meta;           /* [n_meta] owned, first file's entries first */
    int n_meta;
};

/* ---------------------------------------------------------------- set bookkeeping */

static xi_st_set *set_new(void) { return xi_calloc(1, sizeof(xi_st_set)); }

void xi_st_close(xi_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_tensors; i++) free((char *)s->tensors[i].name);
    free(s->tensors);
    free(s->by_name);
    for (int i = 0; i < s->n_meta; i++) {
        free(s->meta[i].key);
        free(s->meta[i].value);
    }
    free(s->meta);
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].map) munmap(s->files[i].map, s->files[i].size);
        free(s->files[i].path);
    }
    free(s->files);
    free(s);
}

static xi_st_tensor *set_push_tensor(xi_st_set *s) {
    if (s->n_tensors == s->cap_tensors) {
        int cap = s->cap_tensors ? s->cap_tensors * 2 : 64;
        xi_st_tensor *t = realloc(s->tensors, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        s->tensors = t;
        s->cap_tensors = cap;
    }
    xi_st_tensor *t = &s->tensors[s->n_tensors++];
    memset(t, 0, sizeof *t);
    return t;
}

static int set_push_meta(xi_st_set *s, const char *key, const char *value) {
    st_meta *m = realloc(s->meta, (size_t)(s->n_meta + 1) * sizeof *m);
    if (!m) return -1;
    s->meta = m;
    m[s->n_meta].key = xi_strdup(key);
    m[s->n_meta].value = xi_strdup(value);
    if (!m[s->n_meta].key || !m[s->n_meta].value) {
        free(m[s->n_meta].key);
        free(m[s->n_meta].value);
        return -1;
    }
    s->n_meta++;
    return 0;
}

/* Map a file and register it; returns its index or -1. */
static int set_map_file(xi_st_set *s, const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return xi_errf(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return xi_errf(err, errlen, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return xi_errf(err, errlen, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return xi_errf(err, errlen, "%s: mmap: %s", path, strerror(e));
        }
    }
    close(fd); /* the mapping keeps the file alive */
    st_file *f = realloc(s->files, (size_t)(s->n_files + 1) * sizeof *f);
    char *p = xi_strdup(path);
    if (!f || !p) {
        if (f) s->files = f;
        free(p);
        if (map) munmap(map, size);
        return xi_errf(err, errlen, "%s: out of memory", path);
    }
    s->files = f;
    f[s->n_files] = (st_file){p, map, size};
    return s->n_files++;
}

/* ---------------------------------------------------------------- header parsing */

static int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

typedef struct span {
    uint64_t begin, end;
    int tensor;        /* index into the set */
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    int c = cmp_u64(x->begin, y->begin);
    return c ? c : cmp_u64(x->end, y->end);
}

/* Parse one entry {dtype, shape, data_offsets} into t. data is the start of the data region. */
static int parse_entry(const char *path, const char *name, json_t *v, const uint8_t *data,
                       uint64_t data_size, xi_st_tensor *t, uint64_t *begin_out, char *err,
                       size_t errlen) {
    if (!json_is_object(v)) return xi_errf(err, errlen, "%s: tensor %s: entry is not an object", path, name);
    json_t *jd = json_object_get(v, "dtype");
    if (!json_is_string(jd)) return xi_errf(err, errlen, "%s: tensor %s: missing dtype", path, name);
    int dt = xi_dtype_from_safetensors(json_string_value(jd));
    if (dt < 0)
        return xi_errf(err, errlen, "%s: tensor %s: unknown dtype \"%s\"", path, name,
                       json_string_value(jd));
    t->dtype = (xi_dtype)dt;

    json_t *js = json_object_get(v, "shape");
    if (!json_is_array(js)) return xi_errf(err, errlen, "%s: tensor %s: missing shape", path, name);
    size_t nd = json_array_size(js);
    if (nd > XI_ST_MAX_DIMS)
        return xi_errf(err, errlen, "%s: tensor %s: %zu dims, at most %d supported", path, name, nd,
                       XI_ST_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t count = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return xi_errf(err, errlen, "%s: tensor %s: shape[%zu] is not a non-negative integer",
                           path, name, i);
        t->shape[i] = json_integer_value(d);
        overflow |= __builtin_mul_overflow(count, (uint64_t)t->shape[i], &count);
    }
    uint64_t esize = xi_dtype_size(t->dtype), need = 0;
    overflow |= __builtin_mul_overflow(count, esize, &need);
    for (size_t i = 0; i < nd; i++)
        if (t->shape[i] == 0) overflow = 0, need = 0; /* an empty tensor is empty however wide */
    if (overflow) return xi_errf(err, errlen, "%s: tensor %s: shape overflows 64 bits", path, name);

    json_t *jo = json_object_get(v, "data_offsets");
    if (!json_is_array(jo) || json_array_size(jo) != 2 ||
        !json_is_integer(json_array_get(jo, 0)) || !json_is_integer(json_array_get(jo, 1)))
        return xi_errf(err, errlen, "%s: tensor %s: data_offsets must be [begin, end]", path, name);
    json_int_t b = json_integer_value(json_array_get(jo, 0));
    json_int_t e = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || e < b)
        return xi_errf(err, errlen, "%s: tensor %s: data_offsets [%lld, %lld] are not ordered", path,
                       name, (long long)b, (long long)e);
    if ((uint64_t)e > data_size)
        return xi_errf(err, errlen, "%s: tensor %s: data_offsets [%lld, %lld] exceed data size %llu",
                       path, name, (long long)b, (long long)e, (unsigned long long)data_size);
    uint64_t nbytes = (uint64_t)(e - b);
    if (need != nbytes)
        return xi_errf(err, errlen,
                       "%s: tensor %s: shape needs %llu bytes of %s but data_offsets [%lld, %lld] "
                       "hold %llu",
                       path, name, (unsigned long long)need, xi_dtype_name(t->dtype),
                       (long long)b, (long long)e, (unsigned long long)nbytes);
    t->data = data + b;
    t->nbytes = (size_t)nbytes;
    *begin_out = (uint64_t)b;
    return 0;
}

static int parse_metadata(xi_st_set *s, const char *path, json_t *m, char *err, size_t errlen) {
    if (!json_is_object(m)) return xi_errf(err, errlen, "%s: __metadata__ is not an object", path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return xi_errf(err, errlen, "%s: __metadata__ entry %s is not a string", path, k);
        if (set_push_meta(s, k, json_string_value(v))) return xi_errf(err, errlen, "%s: out of memory", path);
    }
    return 0;
}

/* Parse the header of file fi and append its tensors to the set, ordered by data offset.
 * Overlapping tensors are rejected: two names sharing bytes is corruption, not a feature. */
static int load_file(xi_st_set *s, int fi, char *err, size_t errlen) {
    const st_file *f = &s->files[fi];
    const char *path = f->path;
    if (f->size < 8)
        return xi_errf(err, errlen, "%s: truncated: %zu bytes, shorter than the 8-byte header length",
                       path, f->size);
    const uint8_t *p = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > XI_ST_MAX_HEADER)
        return xi_errf(err, errlen, "%s: header length %llu exceeds the %llu-byte limit", path,
                       (unsigned long long)hlen, (unsigned long long)XI_ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return xi_errf(err, errlen, "%s: header length %llu exceeds file size %zu (truncated?)", path,
                       (unsigned long long)hlen, f->size);
    const uint8_t *data = p + 8 + hlen;
    uint64_t data_size = f->size - 8 - hlen;

    json_error_t je;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) return xi_errf(err, errlen, "%s: header JSON: %s (at byte %d)", path, je.text, je.position);
    int rc = 0;
    int first = s->n_tensors;
    span *spans = NULL;
    if (!json_is_object(root)) {
        rc = xi_errf(err, errlen, "%s: header JSON is not an object", path);
        goto out;
    }
    size_t n = json_object_size(root);
    spans = xi_calloc(n ? n : 1, sizeof *spans);
    if (!spans) {
        rc = xi_errf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    int n_spans = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if ((rc = parse_metadata(s, path, v, err, errlen))) goto out;
            continue;
        }
        xi_st_tensor *t = set_push_tensor(s);
        if (!t) {
            rc = xi_errf(err, errlen, "%s: out of memory", path);
            goto out;
        }
        t->file = f->path;
        t->name = xi_strdup(key);
        if (!t->name) {
            rc = xi_errf(err, errlen, "%s: out of memory", path);
            goto out;
        }
        uint64_t begin = 0;
        if ((rc = parse_entry(path, key, v, data, data_size, t, &begin, err, errlen))) goto out;
        spans[n_spans++] = (span){begin, begin + t->nbytes, s->n_tensors - 1};
    }
    qsort(spans, (size_t)n_spans, sizeof *spans, cmp_span);
    uint64_t max_end = 0;
    int max_at = -1;
    for (int i = 0; i < n_spans; i++) {
        if (spans[i].begin < max_end && spans[i].end > spans[i].begin) {
            rc = xi_errf(err, errlen, "%s: tensor %s: data_offsets [%llu, %llu] overlap tensor %s", path,
                         s->tensors[spans[i].tensor].name, (unsigned long long)spans[i].begin,
                         (unsigned long long)spans[i].end, s->tensors[max_at].name);
            goto out;
        }
        if (spans[i].end > max_end) max_end = spans[i].end, max_at = spans[i].tensor;
    }
    /* Reorder this file's tensors by offset so xi_st_at walks the file front to back. */
    if (n_spans > 1) {
        xi_st_tensor *tmp = malloc((size_t)n_spans * sizeof *tmp);
        if (!tmp) {
            rc = xi_errf(err, errlen, "%s: out of memory", path);
            goto out;
        }
        for (int i = 0; i < n_spans; i++) tmp[i] = s->tensors[spans[i].tensor];
        memcpy(s->tensors + first, tmp, (size_t)n_spans * sizeof *tmp);
        free(tmp);
    }
out:
    free(spans);
    json_decref(root);
    return rc;
}

/* Build the sorted name index and reject a name that appears in two files. */
static int set_index(xi_st_set *s, char *err, size_t errlen) {
    int dup[2];
    s->by_name = xi_name_index(s->tensors, s->n_tensors, sizeof *s->tensors,
                               offsetof(xi_st_tensor, name), dup);
    if (!s->by_name)
        return xi_errf(err, errlen, "out of memory indexing %d tensors", s->n_tensors);
    if (dup[0] >= 0) {
        const xi_st_tensor *a = &s->tensors[dup[0]], *b = &s->tensors[dup[1]];
        return xi_errf(err, errlen, "%s: tensor %s: also defined in %s", b->file, b->name, a->file);
    }
    return 0;
}

/* ---------------------------------------------------------------- public API */

xi_st_set *xi_st_open_file(const char *path, char *err, size_t errlen) {
    xi_st_set *s = set_new();
    if (!s) {
        xi_errf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    int fi = set_map_file(s, path, err, errlen);
    if (fi < 0 || load_file(s, fi, err, errlen) || set_index(s, err, errlen)) {
        xi_st_close(s);
        return NULL;
    }
    return s;
}

/* Open the shards named by an index's weight_map, each once, then check that every listed
 * tensor really lives in the shard the index names. */
static xi_st_set *open_index(const char *dir, const char *index_path, char *err, size_t errlen) {
    char *text = xi_read_file(index_path, NULL, err, errlen);
    if (!text) return NULL;
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        xi_errf(err, errlen, "%s: JSON: %s (line %d)", index_path, je.text, je.line);
        return NULL;
    }
    xi_st_set *s = set_new();
    json_t *wm = json_object_get(root, "weight_map");
    const char *name;
    json_t *v;
    if (!s) {
        xi_errf(err, errlen, "%s: out of memory", index_path);
        goto fail;
    }
    if (!json_is_object(wm)) {
        xi_errf(err, errlen, "%s: missing weight_map object", index_path);
        goto fail;
    }
    json_object_foreach(wm, name, v) {
        if (!json_is_string(v)) {
            xi_errf(err, errlen, "%s: tensor %s: shard name is not a string", index_path, name);
            goto fail;
        }
        const char *shard = json_string_value(v);
        /* The index may only point next to itself. */
        if (!*shard || strchr(shard, '/') || !strcmp(shard, "..")) {
            xi_errf(err, errlen, "%s: tensor %s: bad shard name \"%s\"", index_path, name, shard);
            goto fail;
        }
        char *path = xi_path_join(dir, shard);
        if (!path) {
            xi_errf(err, errlen, "%s: out of memory", index_path);
            goto fail;
        }
        int seen = 0;
        for (int i = 0; i < s->n_files && !seen; i++) seen = !strcmp(s->files[i].path, path);
        if (!seen) {
            int fi = set_map_file(s, path, err, errlen);
            if (fi < 0 || load_file(s, fi, err, errlen)) {
                xi_err_prefix(err, errlen, "%s: tensor %s", index_path, name);
                free(path);
                goto fail;
            }
        }
        free(path);
    }
    if (s->n_files == 0) {
        xi_errf(err, errlen, "%s: weight_map is empty", index_path);
        goto fail;
    }
    if (set_index(s, err, errlen)) goto fail;
    json_object_foreach(wm, name, v) {
        const xi_st_tensor *t = xi_st_find(s, name);
        const char *shard = json_string_value(v);
        const char *base = t ? strrchr(t->file, '/') : NULL;
        base = base ? base + 1 : (t ? t->file : NULL);
        if (!t || strcmp(base, shard)) {
            xi_errf(err, errlen, "%s: tensor %s: listed in shard %s but not found there", index_path,
                    name, shard);
            goto fail;
        }
    }
    json_decref(root);
    return s;
fail:
    json_decref(root);
    xi_st_close(s);
    return NULL;
}

static int select_st(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return n > 12 && !strcmp(d->d_name + n - 12, ".safetensors");
}

xi_st_set *xi_st_open_dir(const char *dir, char *err, size_t errlen) {
    if (!xi_dir_exists(dir)) {
        xi_errf(err, errlen, "%s: not a directory", dir);
        return NULL;
    }
    char *index = xi_path_join(dir, "model.safetensors.index.json");
    char *single = xi_path_join(dir, "model.safetensors");
    xi_st_set *s = NULL;
    if (!index || !single) {
        xi_errf(err, errlen, "%s: out of memory", dir);
    } else if (xi_file_exists(index)) {
        s = open_index(dir, index, err, errlen);
    } else if (xi_file_exists(single)) {
        s = xi_st_open_file(single, err, errlen);
    } else {
        /* Folders written by other tools may name their only shard differently. */
        struct dirent **list = NULL;
        int n = scandir(dir, &list, select_st, alphasort);
        if (n <= 0) {
            xi_errf(err, errlen, "%s: no .safetensors files", dir);
        } else {
            s = set_new();
            for (int i = 0; s && i < n; i++) {
                char *path = xi_path_join(dir, list[i]->d_name);
                int fi = path ? set_map_file(s, path, err, errlen) : xi_errf(err, errlen, "out of memory");
                if (fi < 0 || load_file(s, fi, err, errlen)) {
                    xi_st_close(s);
                    s = NULL;
                }
                free(path);
            }
            if (s && set_index(s, err, errlen)) {
                xi_st_close(s);
                s = NULL;
            }
            if (!s && err && errlen && !*err) xi_errf(err, errlen, "%s: out of memory", dir);
        }
        for (int i = 0; i < n; i++) free(list[i]);
        free(list);
    }
    free(index);
    free(single);
    return s;
}

int xi_st_count(const xi_st_set *s) { return s ? s->n_tensors : 0; }

const xi_st_tensor *xi_st_at(const xi_st_set *s, int i) {
    return s && i >= 0 && i < s->n_tensors ? &s->tensors[i] : NULL;
}

const xi_st_tensor *xi_st_find(const xi_st_set *s, const char *name) {
    if (!s || !name || !s->by_name) return NULL;
    int lo = 0, hi = s->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const xi_st_tensor *t = &s->tensors[s->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *xi_st_metadata(const xi_st_set *s, const char *key) {
    if (!s || !key) return NULL;
    for (int i = 0; i < s->n_meta; i++)
        if (!strcmp(s->meta[i].key, key)) return s->meta[i].value;
    return NULL;
}

/* ---------------------------------------------------------------- writer */

uint64_t xi_st_spec_nbytes(const xi_st_spec *t) {
    uint64_t n = xi_dtype_size(t->dtype);
    for (int i = 0; i < t->n_dims; i++) n *= (uint64_t)t->shape[i];
    return n;
}

int64_t xi_st_write_header(FILE *f, const xi_st_spec *specs, int n, const char *const *meta_kv,
                           int n_meta, char *err, size_t errlen) {
    json_t *root = json_object();
    if (!root) return xi_errf(err, errlen, "out of memory");
    uint64_t off = 0;
    int rc = 0;
    if (n_meta > 0) {
        json_t *m = json_object();
        for (int i = 0; m && i < n_meta; i++)
            json_object_set_new(m, meta_kv[2 * i], json_string(meta_kv[2 * i + 1]));
        json_object_set_new(root, "__metadata__", m);
    }
    for (int i = 0; i < n && !rc; i++) {
        const xi_st_spec *t = &specs[i];
        const char *dt = (unsigned)t->dtype < XI_DTYPE_COUNT && xi_dtype_size(t->dtype)
                             ? xi_dtype_name(t->dtype) : NULL;
        if (!dt || t->n_dims < 0 || t->n_dims > XI_ST_MAX_DIMS) {
            rc = xi_errf(err, errlen, "tensor %s: cannot be written as safetensors", t->name);
            break;
        }
        char up[16];
        size_t k = 0;
        for (; dt[k] && k + 1 < sizeof up; k++) up[k] = (char)(dt[k] >= 'a' && dt[k] <= 'z' ? dt[k] - 32 : dt[k]);
        up[k] = 0;
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        uint64_t nb = xi_st_spec_nbytes(t);
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", up, "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + nb));
        if (!e || json_object_set_new(root, t->name, e))
            rc = xi_errf(err, errlen, "tensor %s: cannot add to header (duplicate name?)", t->name);
        off += nb;
    }
    char *text = rc ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (rc) return -1;
    if (!text) return xi_errf(err, errlen, "out of memory");
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int bad = fwrite(lenbuf, 1, 8, f) != 8 || fwrite(text, 1, len, f) != len;
    for (size_t i = len; i < padded && !bad; i++) bad = fputc(' ', f) == EOF;
    free(text);
    if (bad) return xi_errf(err, errlen, "write error: %s", strerror(errno));
    return (int64_t)off;
}

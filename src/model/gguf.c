/* model/gguf: validating mmap reader for GGUF v2/v3 files and splits.
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata (u64-length
 * key, u32 value type, value; arrays: u32 element type, u64 count, elements), the tensor infos
 * (name, u32 dims, u64 ne[dims], u32 ggml type, u64 offset), padding to general.alignment,
 * then the data section; each offset is relative to it and a multiple of the alignment.
 * A cursor reads the header; every read checks the bytes left, so a count or length from the
 * file never drives a read or an allocation past the mapping. */
#include "model/gguf.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "model/name_index.h"

#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_NAME 256     /* ggml's GGML_MAX_NAME is 64; be lenient, not unbounded */
#define GGUF_MAX_SPLITS 9999

typedef struct gg_file {
    char *path;
    uint8_t *map;
    size_t size;
} gg_file;

struct xi_gguf {
    uint32_t version;
    gg_file *files;          /* [n_files] owned */
    int n_files;
    xi_gguf_kv *kv;          /* [n_kv] owned, metadata of the first file */
    int n_kv;
    xi_gguf_tensor *tensors; /* [n_tensors] owned, file order */
    int n_tensors, cap_tensors;
    int *by_name;            /* [n_tensors] sorted by name */
};

/* ---------------------------------------------------------------- cursor */

typedef struct cur {
    const uint8_t *base;
    size_t size, at;
    const char *path;
    char *err;
    size_t errlen;
} cur;

static int need(cur *c, uint64_t n, const char *what) {
    if (n > c->size - c->at)
        return xi_errf(c->err, c->errlen,
                       "%s: truncated: %s needs %llu bytes at offset %zu, the file has %zu",
                       c->path, what, (unsigned long long)n, c->at, c->size);
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int rd_u32(cur *c, uint32_t *v, const char *what) {
    if (need(c, 4, what)) return -1;
    *v = (uint32_t)rd_le(c->base + c->at, 4);
    c->at += 4;
    return 0;
}

static int rd_u64(cur *c, uint64_t *v, const char *what) {
    if (need(c, 8, what)) return -1;
    *v = rd_le(c->base + c->at, 8);
    c->at += 8;
    return 0;
}

/* A string: u64 length + bytes. Returns a pointer into the map. */
static const char *rd_str(cur *c, uint64_t *len, const char *what) {
    if (rd_u64(c, len, what) || need(c, *len, what)) return NULL;
    const char *s = (const char *)c->base + c->at;
    c->at += *len;
    return s;
}

/* Names end up in error lines: no control characters (bytes above max are refused too). */
static int printable(const char *s, uint64_t n, unsigned max) {
    for (uint64_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f || ch > max) return 0;
    }
    return 1;
}

static const int vsize[XI_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vname[XI_GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

const char *xi_gguf_vtype_name(xi_gguf_vtype t) {
    return (unsigned)t < XI_GGUF_VTYPE_COUNT ? vname[t] : "?";
}

/* ---------------------------------------------------------------- set bookkeeping */

int xi_gguf_is_file(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    int ok = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f) fclose(f);
    return ok;
}

void xi_gguf_close(xi_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) {
        free((char *)g->kv[i].key);
        free((char *)g->kv[i].str);
        free((uint64_t *)g->kv[i].str_off);
    }
    free(g->kv);
    for (int i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->by_name);
    for (int i = 0; i < g->n_files; i++) {
        if (g->files[i].map) munmap(g->files[i].map, g->files[i].size);
        free(g->files[i].path);
    }
    free(g->files);
    free(g);
}

static int map_file(xi_gguf *g, const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return xi_errf(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return xi_errf(err, errlen, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return xi_errf(err, errlen, "%s: mmap: %s", path, strerror(e));
        }
    }
    close(fd);
    gg_file *f = realloc(g->files, (size_t)(g->n_files + 1) * sizeof *f);
    char *p = xi_strdup(path);
    if (!f || !p) {
        if (f) g->files = f;
        free(p);
        if (map) munmap(map, size);
        return xi_errf(err, errlen, "%s: out of memory", path);
    }
    g->files = f;
    f[g->n_files] = (gg_file){p, map, size};
    return g->n_files++;
}

/* ---------------------------------------------------------------- metadata */

/* Check and skip one value of type t (not an array). */
static int rd_scalar(cur *c, xi_gguf_vtype t, const char *key, const char *what) {
    if (t == XI_GGUF_STR) {
        uint64_t len;
        return rd_str(c, &len, what) ? 0 : -1;
    }
    if (need(c, (uint64_t)vsize[t], what)) return -1;
    if (t == XI_GGUF_BOOL && c->base[c->at] > 1)
        return xi_errf(c->err, c->errlen, "%s: key %s: bool value %u is not 0 or 1", c->path, key,
                       c->base[c->at]);
    c->at += (size_t)vsize[t];
    return 0;
}

/* what: "key NAME", for the truncation messages. */
static int rd_kv(cur *c, xi_gguf_kv *kv, const char *key, const char *what) {
    uint32_t t;
    if (rd_u32(c, &t, what)) return -1;
    if (t >= XI_GGUF_VTYPE_COUNT)
        return xi_errf(c->err, c->errlen, "%s: key %s: unknown value type %u", c->path, key, t);
    kv->type = (xi_gguf_vtype)t;
    kv->n = 1;
    if (t == XI_GGUF_ARR) {
        uint32_t et;
        uint64_t n;
        if (rd_u32(c, &et, what) || rd_u64(c, &n, what)) return -1;
        if (et >= XI_GGUF_VTYPE_COUNT || et == XI_GGUF_ARR)
            return xi_errf(c->err, c->errlen, "%s: key %s: array of %s is not supported", c->path,
                           key, et == XI_GGUF_ARR ? "arrays" : "an unknown type");
        kv->arr_type = (xi_gguf_vtype)et;
        kv->n = n;
        kv->data = c->base + c->at;
        if (et != XI_GGUF_STR) {
            uint64_t bytes;
            if (__builtin_mul_overflow(n, (uint64_t)vsize[et], &bytes))
                return xi_errf(c->err, c->errlen, "%s: key %s: array count %llu overflows",
                               c->path, key, (unsigned long long)n);
            if (need(c, bytes, what)) return -1;
            if (et == XI_GGUF_BOOL)
                for (uint64_t i = 0; i < n; i++)
                    if (c->base[c->at + i] > 1)
                        return xi_errf(c->err, c->errlen, "%s: key %s: bool [%llu] is not 0 or 1",
                                       c->path, key, (unsigned long long)i);
            c->at += (size_t)bytes;
            return 0;
        }
        /* Every string takes at least its 8-byte length: bound n before allocating. */
        if (n > (c->size - c->at) / 8)
            return xi_errf(c->err, c->errlen, "%s: key %s: %llu strings cannot fit in the file",
                           c->path, key, (unsigned long long)n);
        uint64_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
        if (!off) return xi_errf(c->err, c->errlen, "%s: key %s: out of memory", c->path, key);
        kv->str_off = off;
        for (uint64_t i = 0; i < n; i++) {
            off[i] = c->at;
            uint64_t len;
            if (!rd_str(c, &len, what)) return -1;
        }
        return 0;
    }
    kv->data = c->base + c->at + (t == XI_GGUF_STR ? 8 : 0);
    if (t == XI_GGUF_STR) {
        uint64_t len;
        const char *s = rd_str(c, &len, what);
        if (!s) return -1;
        if (!(kv->str = xi_strndup(s, (size_t)len)))
            return xi_errf(c->err, c->errlen, "%s: key %s: out of memory", c->path, key);
        return 0;
    }
    return rd_scalar(c, kv->type, key, what);
}

static int read_metadata(xi_gguf *g, cur *c, uint64_t n_kv, int keep) {
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t klen;
        const char *k = rd_str(c, &klen, "metadata key");
        if (!k) return -1;
        if (klen == 0 || klen > 65535 || !printable(k, klen, 0x7e))
            return xi_errf(c->err, c->errlen, "%s: metadata key %llu: not 1..65535 bytes of "
                           "printable ASCII", c->path, (unsigned long long)i);
        char *key = xi_strndup(k, (size_t)klen);
        xi_gguf_kv kv = {0};
        if (!key) return xi_errf(c->err, c->errlen, "%s: out of memory", c->path);
        kv.key = key;
        char what[96];
        snprintf(what, sizeof what, "key %.80s", key);
        int rc = rd_kv(c, &kv, key, what);
        if (!rc && keep) {
            if (xi_gguf_find_kv(g, key))
                rc = xi_errf(c->err, c->errlen, "%s: key %s: defined twice", c->path, key);
            xi_gguf_kv *a = rc ? NULL : realloc(g->kv, (size_t)(g->n_kv + 1) * sizeof *a);
            if (!rc && !a) rc = xi_errf(c->err, c->errlen, "%s: out of memory", c->path);
            if (!rc) {
                g->kv = a;
                g->kv[g->n_kv++] = kv;
                continue;
            }
        }
        free(key);
        free((char *)kv.str);
        free((uint64_t *)kv.str_off);
        if (rc) return -1;
    }
    return 0;
}

int xi_gguf_kv_count(const xi_gguf *g) { return g->n_kv; }

const xi_gguf_kv *xi_gguf_kv_at(const xi_gguf *g, int i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

/* Metadata counts are small (tens); a linear scan is simpler than an index. */
const xi_gguf_kv *xi_gguf_find_kv(const xi_gguf *g, const char *key) {
    for (int i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

static int64_t as_i64(xi_gguf_vtype t, const uint8_t *p, int *ok) {
    *ok = 1;
    switch (t) {
    case XI_GGUF_U8: case XI_GGUF_BOOL: return p[0];
    case XI_GGUF_I8: return (int8_t)p[0];
    case XI_GGUF_U16: return (int64_t)rd_le(p, 2);
    case XI_GGUF_I16: return (int16_t)rd_le(p, 2);
    case XI_GGUF_U32: return (int64_t)rd_le(p, 4);
    case XI_GGUF_I32: return (int32_t)rd_le(p, 4);
    case XI_GGUF_U64: {
        uint64_t v = rd_le(p, 8);
        if (v > INT64_MAX) *ok = 0;
        return (int64_t)v;
    }
    case XI_GGUF_I64: return (int64_t)rd_le(p, 8);
    default: *ok = 0; return 0;
    }
}

static double as_f64(xi_gguf_vtype t, const uint8_t *p, int *ok) {
    if (t == XI_GGUF_F32) {
        uint32_t u = (uint32_t)rd_le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return *ok = 1, f;
    }
    if (t == XI_GGUF_F64) {
        uint64_t u = rd_le(p, 8);
        double d;
        memcpy(&d, &u, 8);
        return *ok = 1, d;
    }
    return (double)as_i64(t, p, ok);
}

int xi_gguf_get_i64(const xi_gguf *g, const char *key, int64_t *out) {
    const xi_gguf_kv *kv = xi_gguf_find_kv(g, key);
    int ok = 0;
    if (!kv || kv->type == XI_GGUF_BOOL) return -1;
    int64_t v = as_i64(kv->type, kv->data, &ok);
    if (!ok) return -1;
    *out = v;
    return 0;
}

int xi_gguf_get_f64(const xi_gguf *g, const char *key, double *out) {
    const xi_gguf_kv *kv = xi_gguf_find_kv(g, key);
    int ok = 0;
    if (!kv || kv->type == XI_GGUF_BOOL) return -1;
    double v = as_f64(kv->type, kv->data, &ok);
    if (!ok) return -1;
    *out = v;
    return 0;
}

int xi_gguf_get_bool(const xi_gguf *g, const char *key, int *out) {
    const xi_gguf_kv *kv = xi_gguf_find_kv(g, key);
    if (!kv || kv->type != XI_GGUF_BOOL) return -1;
    *out = ((const uint8_t *)kv->data)[0];
    return 0;
}

const char *xi_gguf_get_str(const xi_gguf *g, const char *key) {
    const xi_gguf_kv *kv = xi_gguf_find_kv(g, key);
    return kv ? kv->str : NULL;
}

const char *xi_gguf_arr_str(const xi_gguf_kv *kv, uint64_t i, uint64_t *len) {
    if (kv->type != XI_GGUF_ARR || kv->arr_type != XI_GGUF_STR || i >= kv->n) return NULL;
    /* The offsets were read from this mapping: data points at element 0's length field. */
    const uint8_t *p = (const uint8_t *)kv->data + (kv->str_off[i] - kv->str_off[0]);
    *len = rd_le(p, 8);
    return (const char *)p + 8;
}

double xi_gguf_arr_f64(const xi_gguf_kv *kv, uint64_t i) {
    int ok;
    if (kv->type != XI_GGUF_ARR || kv->arr_type == XI_GGUF_STR || i >= kv->n) return 0;
    return as_f64(kv->arr_type, (const uint8_t *)kv->data + i * (uint64_t)vsize[kv->arr_type], &ok);
}

int64_t xi_gguf_arr_i64(const xi_gguf_kv *kv, uint64_t i) {
    int ok;
    if (kv->type != XI_GGUF_ARR || kv->arr_type == XI_GGUF_STR || i >= kv->n) return 0;
    xi_gguf_vtype t = kv->arr_type;
    const uint8_t *p = (const uint8_t *)kv->data + i * (uint64_t)vsize[t];
    if (t != XI_GGUF_F32 && t != XI_GGUF_F64) return as_i64(t, p, &ok);
    double v = as_f64(t, p, &ok); /* a float out of int64's range (or NaN) reads as 0 */
    return v > -9.2e18 && v < 9.2e18 ? (int64_t)v : 0;
}

/* ---------------------------------------------------------------- tensors */

static xi_gguf_tensor *push_tensor(xi_gguf *g) {
    if (g->n_tensors == g->cap_tensors) {
        int cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
        xi_gguf_tensor *t = realloc(g->tensors, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        g->tensors = t;
        g->cap_tensors = cap;
    }
    xi_gguf_tensor *t = &g->tensors[g->n_tensors++];
    memset(t, 0, sizeof *t);
    return t;
}

/* One tensor info; offsets are checked once the data section's start is known. */
static int rd_tensor_info(cur *c, xi_gguf *g, const char *file, uint64_t *offset) {
    uint64_t nlen;
    const char *nm = rd_str(c, &nlen, "tensor name");
    if (!nm) return -1;
    if (nlen == 0 || nlen > GGUF_MAX_NAME || !printable(nm, nlen, 0xff))
        return xi_errf(c->err, c->errlen, "%s: tensor %d: name is not 1..%d bytes of text", c->path,
                       g->n_tensors, GGUF_MAX_NAME);
    xi_gguf_tensor *t = push_tensor(g);
    if (!t || !(t->name = xi_strndup(nm, (size_t)nlen)))
        return xi_errf(c->err, c->errlen, "%s: out of memory", c->path);
    t->file = file;
    uint32_t nd, type;
    if (rd_u32(c, &nd, t->name)) return -1;
    if (nd < 1 || nd > XI_GGUF_MAX_DIMS)
        return xi_errf(c->err, c->errlen, "%s: tensor %s: %u dims, expected 1..%d", c->path,
                       t->name, nd, XI_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne;
        if (rd_u64(c, &ne, t->name)) return -1;
        if (ne > INT64_MAX || __builtin_mul_overflow(numel, ne, &numel))
            return xi_errf(c->err, c->errlen, "%s: tensor %s: dimensions overflow 64 bits",
                           c->path, t->name);
        t->ne[d] = (int64_t)ne;
    }
    for (int d = (int)nd; d < XI_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    if (rd_u32(c, &type, t->name) || rd_u64(c, offset, t->name)) return -1;
    t->type = xi_qtype_get((int)type);
    if (!t->type)
        return xi_errf(c->err, c->errlen, "%s: tensor %s: unknown ggml type %u", c->path, t->name,
                       type);
    if (t->ne[0] % t->type->block)
        return xi_errf(c->err, c->errlen,
                       "%s: tensor %s: row of %lld values is not a whole number of %s blocks of %d",
                       c->path, t->name, (long long)t->ne[0], t->type->name, t->type->block);
    uint64_t bytes;
    if (__builtin_mul_overflow(numel / (uint64_t)t->type->block, (uint64_t)t->type->block_bytes,
                               &bytes) || bytes > SIZE_MAX)
        return xi_errf(c->err, c->errlen, "%s: tensor %s: size overflows", c->path, t->name);
    t->nbytes = (size_t)bytes;
    return 0;
}

typedef struct span {
    uint64_t begin, end;
    int tensor;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* split.no / split.count, when present, must agree with the file's name. */
static int check_split(const xi_gguf *meta, const char *path, int no, int count, char *err,
                       size_t errlen) {
    int64_t v;
    if (xi_gguf_get_i64(meta, "split.count", &v) == 0 && v != count)
        return xi_errf(err, errlen, "%s: key split.count: %lld, but the name says %d parts", path,
                       (long long)v, count);
    if (xi_gguf_get_i64(meta, "split.no", &v) == 0 && v != no)
        return xi_errf(err, errlen, "%s: key split.no: %lld, but the name says part %d", path,
                       (long long)v, no + 1);
    return 0;
}

/* Parse file fi (part fi of count); its metadata becomes the set's when it is the first. */
static int load_file(xi_gguf *g, int fi, int count, char *err, size_t errlen) {
    int keep_kv = fi == 0;
    const gg_file *f = &g->files[fi];
    cur c = {f->map, f->size, 0, f->path, err, errlen};
    if (f->size < 4 || memcmp(f->map, "GGUF", 4))
        return xi_errf(err, errlen, "%s: not a GGUF file (no GGUF magic)", f->path);
    c.at = 4;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (rd_u32(&c, &version, "version")) return -1;
    if (version != 2 && version != 3) {
        if (version == 0x02000000u || version == 0x03000000u)
            return xi_errf(err, errlen, "%s: big-endian GGUF is not supported", f->path);
        return xi_errf(err, errlen, "%s: GGUF version %u is not supported (2 and 3 are)", f->path,
                       version);
    }
    if (fi == 0) g->version = version;
    if (rd_u64(&c, &n_tensors, "tensor count") || rd_u64(&c, &n_kv, "metadata count")) return -1;
    /* A tensor info takes at least 8 + 1 + 4 + 8 + 4 + 8 bytes, a key-value 8 + 1 + 4 + 1. */
    if (n_tensors > (f->size - c.at) / 33 || n_kv > (f->size - c.at) / 14)
        return xi_errf(err, errlen, "%s: %llu tensors and %llu metadata entries cannot fit in "
                       "%zu bytes", f->path, (unsigned long long)n_tensors,
                       (unsigned long long)n_kv, f->size);
    if (n_tensors > INT32_MAX - (uint64_t)g->n_tensors)
        return xi_errf(err, errlen, "%s: too many tensors", f->path);
    xi_gguf tmp = {0}; /* a later split's metadata is read and checked, then dropped */
    xi_gguf *meta = keep_kv ? g : &tmp;
    int rc = read_metadata(meta, &c, n_kv, 1);
    uint64_t align = GGUF_DEFAULT_ALIGN;
    if (!rc) {
        const xi_gguf_kv *a = xi_gguf_find_kv(meta, "general.alignment");
        int64_t av;
        if (a && (xi_gguf_get_i64(meta, "general.alignment", &av) || av <= 0 || av > 65536 ||
                  (av & (av - 1))))
            rc = xi_errf(err, errlen, "%s: key general.alignment: not a power of two up to 65536",
                         f->path);
        else if (a)
            align = (uint64_t)av;
    }
    if (!rc && count > 1) rc = check_split(meta, f->path, fi, count, err, errlen);
    if (!keep_kv) {
        for (int i = 0; i < tmp.n_kv; i++) {
            free((char *)tmp.kv[i].key);
            free((char *)tmp.kv[i].str);
            free((uint64_t *)tmp.kv[i].str_off);
        }
        free(tmp.kv);
    }
    if (rc) return -1;

    span *spans = xi_calloc(n_tensors ? n_tensors : 1, sizeof *spans);
    if (!spans) return xi_errf(err, errlen, "%s: out of memory", f->path);
    for (uint64_t i = 0; i < n_tensors && !rc; i++) {
        uint64_t off;
        rc = rd_tensor_info(&c, g, f->path, &off);
        if (!rc) spans[i] = (span){off, 0, g->n_tensors - 1};
    }
    uint64_t data_start = (c.at + align - 1) / align * align;
    if (!rc && n_tensors && data_start > f->size)
        rc = xi_errf(err, errlen, "%s: truncated: the data section would start at %llu, past the "
                     "end (%zu bytes)", f->path, (unsigned long long)data_start, f->size);
    uint64_t data_size = data_start <= f->size ? f->size - data_start : 0;
    for (uint64_t i = 0; i < n_tensors && !rc; i++) {
        xi_gguf_tensor *t = &g->tensors[spans[i].tensor];
        uint64_t off = spans[i].begin;
        if (off % align)
            rc = xi_errf(err, errlen, "%s: tensor %s: offset %llu is not a multiple of the "
                         "alignment %llu", f->path, t->name, (unsigned long long)off,
                         (unsigned long long)align);
        else if (off > data_size || t->nbytes > data_size - off)
            rc = xi_errf(err, errlen, "%s: tensor %s: %zu bytes at offset %llu exceed the data "
                         "section (%llu bytes; truncated?)", f->path, t->name, t->nbytes,
                         (unsigned long long)off, (unsigned long long)data_size);
        else {
            t->data = f->map + data_start + off;
            spans[i].end = off + t->nbytes;
        }
    }
    if (!rc && n_tensors > 1) {
        qsort(spans, (size_t)n_tensors, sizeof *spans, cmp_span);
        for (uint64_t i = 1; i < n_tensors && !rc; i++)
            if (spans[i].begin < spans[i - 1].end)
                rc = xi_errf(err, errlen, "%s: tensor %s: data overlaps tensor %s", f->path,
                             g->tensors[spans[i].tensor].name,
                             g->tensors[spans[i - 1].tensor].name);
    }
    free(spans);
    return rc;
}

static int build_index(xi_gguf *g, char *err, size_t errlen) {
    int dup[2];
    g->by_name = xi_name_index(g->tensors, g->n_tensors, sizeof *g->tensors,
                               offsetof(xi_gguf_tensor, name), dup);
    if (!g->by_name) return xi_errf(err, errlen, "out of memory");
    if (dup[0] >= 0) {
        const xi_gguf_tensor *t = &g->tensors[dup[1]];
        return xi_errf(err, errlen, "%s: tensor %s: defined twice (also in %s)", t->file, t->name,
                       g->tensors[dup[0]].file);
    }
    return 0;
}

/* "…-00001-of-00003.gguf": the part number's offset in path and the count, or -1. */
static int split_pattern(const char *path, size_t *at, int *count) {
    size_t n = strlen(path);
    const char *tail = "-00000-of-00000.gguf";
    size_t tl = strlen(tail);
    if (n < tl) return -1;
    const char *s = path + n - tl;
    for (size_t i = 0; i < tl; i++) {
        int digit = tail[i] == '0';
        if (digit ? (s[i] < '0' || s[i] > '9') : s[i] != tail[i]) return -1;
    }
    *at = (size_t)(s - path) + 1;
    *count = atoi(s + 10);
    return atoi(s + 1) >= 1 && *count >= 1 ? 0 : -1;
}

xi_gguf *xi_gguf_open(const char *path, char *err, size_t errlen) {
    xi_gguf *g = xi_calloc(1, sizeof *g);
    if (!g) {
        xi_errf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    size_t at;
    int count = 1;
    int split = split_pattern(path, &at, &count) == 0;
    if (split && atoi(path + at) != 1) {
        xi_errf(err, errlen, "%s: open the first part of a split GGUF (-00001-of-%05d)", path,
                count);
        goto fail;
    }
    if (split && count > GGUF_MAX_SPLITS) {
        xi_errf(err, errlen, "%s: too many parts", path);
        goto fail;
    }
    if (map_file(g, path, err, errlen) < 0 || load_file(g, 0, count, err, errlen)) goto fail;
    if (!split) {
        int64_t v;
        if (xi_gguf_get_i64(g, "split.count", &v) == 0 && v > 1) {
            xi_errf(err, errlen, "%s: key split.count: %lld parts, but the file is not named "
                    "NAME-00001-of-%05lld.gguf", path, (long long)v, (long long)v);
            goto fail;
        }
    }
    for (int i = 2; split && i <= count; i++) {
        char *p = xi_strdup(path);
        if (!p) {
            xi_errf(err, errlen, "%s: out of memory", path);
            goto fail;
        }
        char num[16];
        snprintf(num, sizeof num, "%05d", i);
        memcpy(p + at, num, 5);
        int fi = map_file(g, p, err, errlen);
        free(p);
        if (fi < 0 || load_file(g, fi, count, err, errlen)) goto fail;
    }
    if (build_index(g, err, errlen)) goto fail;
    return g;
fail:
    xi_gguf_close(g);
    return NULL;
}

uint32_t xi_gguf_version(const xi_gguf *g) { return g->version; }
int xi_gguf_n_files(const xi_gguf *g) { return g->n_files; }
int xi_gguf_tensor_count(const xi_gguf *g) { return g->n_tensors; }

const xi_gguf_tensor *xi_gguf_tensor_at(const xi_gguf *g, int i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const xi_gguf_tensor *xi_gguf_find_tensor(const xi_gguf *g, const char *name) {
    int i = xi_name_index_find(g->by_name, g->tensors, g->n_tensors, sizeof *g->tensors,
                               offsetof(xi_gguf_tensor, name), name);
    return i < 0 ? NULL : &g->tensors[i];
}

int64_t xi_gguf_tensor_numel(const xi_gguf_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    return n;
}

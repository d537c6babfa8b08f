/* model/safetensors: read-only access to .safetensors files over mmap, single or sharded
 * (model.safetensors.index.json). Every header length, dtype, shape and [begin, end) offset
 * is validated against the file before any tensor is exposed; errors name the file and the
 * tensor. Different sets may be opened and closed from different threads; lookups on an open
 * set are read-only and may be shared. data pointers are only as aligned as the file makes
 * them (8 + header length + begin): read through memcpy or check before vector loads. */
#ifndef XI_SAFETENSORS_H
#define XI_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor/dtype.h"

#define XI_ST_MAX_DIMS 8

typedef struct xi_st_tensor {
    const char *name;          /* owned by the set */
    const char *file;          /* path of the file holding it, owned by the set */
    xi_dtype dtype;
    int n_dims;
    int64_t shape[XI_ST_MAX_DIMS];
    const void *data;          /* inside the mmap; valid until xi_st_close */
    size_t nbytes;
    const struct xi_qtype *qtype; /* dtype GGML (a GGUF tensor kept as stored): its block type */
} xi_st_tensor;

typedef struct xi_st_set xi_st_set;

/* Open every safetensors file of a model folder: model.safetensors.index.json when present
 * (each shard once), else model.safetensors, else every *.safetensors in the folder. */
xi_st_set *xi_st_open_dir(const char *dir, char *err, size_t errlen);
/* Open one file. */
xi_st_set *xi_st_open_file(const char *path, char *err, size_t errlen);
void xi_st_close(xi_st_set *s);

int xi_st_count(const xi_st_set *s);
/* Tensors in file order, and within a file in data-offset order. */
const xi_st_tensor *xi_st_at(const xi_st_set *s, int i);
/* O(log n) by name; NULL when absent. */
const xi_st_tensor *xi_st_find(const xi_st_set *s, const char *name);
/* Value of a string entry in a file's __metadata__ (first file that has it), or NULL. */
const char *xi_st_metadata(const xi_st_set *s, const char *key);

/* ---- writing: the streaming writer behind tools/genmodel and the tests ----
 * The header is written first from the full tensor list; the caller then appends each
 * tensor's bytes in list order (offsets are contiguous), so a model never sits in memory. */
typedef struct xi_st_spec {
    const char *name;
    xi_dtype dtype;            /* a type with a safetensors spelling (not XI_Q4_AWQ / XI_Q8) */
    int n_dims;
    int64_t shape[XI_ST_MAX_DIMS];
} xi_st_spec;

/* Bytes of the spec's data; 0 for a bad dtype. */
uint64_t xi_st_spec_nbytes(const xi_st_spec *t);
/* Write the 8-byte header length and the JSON header (space-padded to a multiple of 8) to f.
 * meta_kv holds n_meta key/value pairs for __metadata__ (NULL when n_meta is 0). Returns the
 * number of data bytes that must follow, or -1 with err set. */
int64_t xi_st_write_header(FILE *f, const xi_st_spec *specs, int n, const char *const *meta_kv,
                           int n_meta, char *err, size_t errlen);

#endif

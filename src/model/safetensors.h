/* model/safetensors: read-only access to .safetensors files over mmap, single or sharded
 * (model.safetensors.index.json). Every header length, dtype, shape and [begin, end) offset
 * is validated against the file before any tensor is exposed. Not thread-safe to open/close;
 * lookups on an open set are read-only and may be shared. */
#ifndef XI_SAFETENSORS_H
#define XI_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

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
} xi_st_tensor;

typedef struct xi_st_set xi_st_set;

/* Open every safetensors file of a model folder: model.safetensors.index.json when present
 * (each shard once), else model.safetensors, else every *.safetensors in the folder. */
xi_st_set *xi_st_open_dir(const char *dir, char *err, size_t errlen);
/* Open one file. */
xi_st_set *xi_st_open_file(const char *path, char *err, size_t errlen);
void xi_st_close(xi_st_set *s);

int xi_st_count(const xi_st_set *s);
const xi_st_tensor *xi_st_at(const xi_st_set *s, int i);
/* NULL when absent. */
const xi_st_tensor *xi_st_find(const xi_st_set *s, const char *name);
/* Value of a string entry in a file's __metadata__ (first file that has it), or NULL. */
const char *xi_st_metadata(const xi_st_set *s, const char *key);

#endif

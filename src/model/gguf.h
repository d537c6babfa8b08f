/* model/gguf: read-only access to GGUF (v2, v3) files over mmap, single or split
 * (NAME-00001-of-0000N.gguf), and the writer the tests and tools use.
 *
 * Every string length, array count, value type, tensor dimension, type, offset and alignment
 * is checked against the file before anything is exposed; a bad file is one error line naming
 * the file and the key or tensor. Tensor types are ggml ids (kernels/qtypes.h); a type xinfer
 * cannot compute with is still read (and named), the loader refuses it. An open set is
 * immutable and may be shared between threads. Data pointers are aligned as the file says
 * (general.alignment, default 32) relative to the mapping, which is page aligned. */
#ifndef XI_GGUF_H
#define XI_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/qtypes.h"

#define XI_GGUF_MAX_DIMS 4

/* Metadata value types, as numbered in the file. */
typedef enum xi_gguf_vtype {
    XI_GGUF_U8 = 0,
    XI_GGUF_I8,
    XI_GGUF_U16,
    XI_GGUF_I16,
    XI_GGUF_U32,
    XI_GGUF_I32,
    XI_GGUF_F32,
    XI_GGUF_BOOL,
    XI_GGUF_STR,
    XI_GGUF_ARR,
    XI_GGUF_U64,
    XI_GGUF_I64,
    XI_GGUF_F64,
    XI_GGUF_VTYPE_COUNT
} xi_gguf_vtype;

typedef struct xi_gguf_kv {
    const char *key;        /* NUL-terminated copy, owned by the set */
    xi_gguf_vtype type;
    xi_gguf_vtype arr_type; /* element type when type is XI_GGUF_ARR */
    uint64_t n;             /* elements of an array (1 for a scalar) */
    const void *data;       /* scalar / array elements in the file (little-endian, unaligned);
                               for a string: its bytes; for a string array: see xi_gguf_arr_str */
    const char *str;        /* a string value as a NUL-terminated copy, owned; else NULL */
    const uint64_t *str_off;/* string array: [n] offsets of each element's u64 length in the map */
} xi_gguf_kv;

typedef struct xi_gguf_tensor {
    const char *name;       /* owned by the set */
    const char *file;       /* path of the file holding it */
    const xi_qtype *type;   /* never NULL: unknown ids are rejected at open */
    int n_dims;
    int64_t ne[XI_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous (row) dimension */
    const void *data;       /* inside the mapping, valid until xi_gguf_close */
    size_t nbytes;
} xi_gguf_tensor;

typedef struct xi_gguf xi_gguf;

/* 1 when path is a regular file that starts with the GGUF magic (.gguf files and Ollama's
 * extension-less blobs alike). */
int xi_gguf_is_file(const char *path);
/* Open a GGUF file; a split's first part (…-00001-of-0000N.gguf) opens every part. */
xi_gguf *xi_gguf_open(const char *path, char *err, size_t errlen);
void xi_gguf_close(xi_gguf *g);

uint32_t xi_gguf_version(const xi_gguf *g);
int xi_gguf_n_files(const xi_gguf *g);

/* Metadata of the first file (later splits repeat only split.*), in file order. */
int xi_gguf_kv_count(const xi_gguf *g);
const xi_gguf_kv *xi_gguf_kv_at(const xi_gguf *g, int i);
const xi_gguf_kv *xi_gguf_find_kv(const xi_gguf *g, const char *key);
/* Typed lookups: 0 when found with a convertible type (any integer type into int64 / uint64
 * when in range, f32 / f64 into double, bool), -1 when absent or of another type. */
int xi_gguf_get_i64(const xi_gguf *g, const char *key, int64_t *out);
int xi_gguf_get_f64(const xi_gguf *g, const char *key, double *out);
int xi_gguf_get_bool(const xi_gguf *g, const char *key, int *out);
/* A string value, or NULL when absent or not a string. */
const char *xi_gguf_get_str(const xi_gguf *g, const char *key);
/* Element i of a string array: bytes (not NUL-terminated) and length. */
const char *xi_gguf_arr_str(const xi_gguf_kv *kv, uint64_t i, uint64_t *len);
/* Element i of a numeric array as double / int64 (bools as 0/1). */
double xi_gguf_arr_f64(const xi_gguf_kv *kv, uint64_t i);
int64_t xi_gguf_arr_i64(const xi_gguf_kv *kv, uint64_t i);
/* Name of a value type ("u32", "string", "array"). */
const char *xi_gguf_vtype_name(xi_gguf_vtype t);

/* Tensors in file order. */
int xi_gguf_tensor_count(const xi_gguf *g);
const xi_gguf_tensor *xi_gguf_tensor_at(const xi_gguf *g, int i);
/* O(log n) by name; NULL when absent. */
const xi_gguf_tensor *xi_gguf_find_tensor(const xi_gguf *g, const char *name);
int64_t xi_gguf_tensor_numel(const xi_gguf_tensor *t);

/* ---- writing (gguf_write.c): metadata and tensors are collected, then written in one go.
 * Tensor data is borrowed until xi_gguf_writer_write returns; a tensor added with data NULL is
 * streamed at write time by xi_gguf_writer_write_fill's callback (models larger than memory). */
typedef struct xi_gguf_writer xi_gguf_writer;
xi_gguf_writer *xi_gguf_writer_new(uint32_t alignment); /* 0: the default 32 */
void xi_gguf_writer_free(xi_gguf_writer *w);
/* A scalar of any numeric type or bool; val points to a value of that type's C size. */
int xi_gguf_write_scalar(xi_gguf_writer *w, const char *key, xi_gguf_vtype type, const void *val);
int xi_gguf_write_str(xi_gguf_writer *w, const char *key, const char *s);
int xi_gguf_write_u32(xi_gguf_writer *w, const char *key, uint32_t v);
int xi_gguf_write_f32(xi_gguf_writer *w, const char *key, float v);
/* A numeric array: n packed values of the element type's C size. */
int xi_gguf_write_arr(xi_gguf_writer *w, const char *key, xi_gguf_vtype elem, uint64_t n,
                      const void *vals);
int xi_gguf_write_arr_str(xi_gguf_writer *w, const char *key, uint64_t n,
                          const char *const *strs, const uint32_t *lens /* NULL: strlen */);
/* A tensor of ggml type id with ne[0..n_dims) (row dimension first), its bytes at data
 * (NULL: made by the fill callback at write time). */
int xi_gguf_write_tensor(xi_gguf_writer *w, const char *name, int type, int n_dims,
                         const int64_t *ne, const void *data);
/* A tensor given as f32 values, stored as type F32, F16, BF16 or Q8_0 (rounded as llama.cpp's
 * converter and quantizer do); the writer keeps its own copy. -1 for another type or a row
 * that is not whole blocks. */
int xi_gguf_write_tensor_f32(xi_gguf_writer *w, const char *name, int type, int n_dims,
                             const int64_t *ne, const float *x);
/* Write the file (version 3); -1 with err. */
int xi_gguf_writer_write(xi_gguf_writer *w, const char *path, char *err, size_t errlen);
/* The same; fill(ctx, i, f) writes the bytes of tensor i (in the order added) when its data is
 * NULL: exactly xi_qtype_row_bytes(type, ne[0]) x rows bytes, else the write fails naming it.
 * fill returns 0, or -1 to fail the write. */
typedef int (*xi_gguf_fill_fn)(void *ctx, int index, FILE *f);
int xi_gguf_writer_write_fill(xi_gguf_writer *w, const char *path, xi_gguf_fill_fn fill,
                              void *ctx, char *err, size_t errlen);

#endif

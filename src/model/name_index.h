/* model/name_index: a sorted index over the names of an array of structs (the tensors of a
 * safetensors set or a GGUF file), for O(log n) lookup and duplicate detection. Sorting
 * (name, index) pairs keeps qsort free of global context, so sets may be built concurrently. */
#ifndef XI_NAME_INDEX_H
#define XI_NAME_INDEX_H

#include <stddef.h>

/* Item indices sorted by the string pointer at items + i * stride + name_off (malloc'ed, [n]),
 * or NULL when out of memory. dup[0] / dup[1] get the indices of the first two items sharing
 * a name, or -1. */
int *xi_name_index(const void *items, int n, size_t stride, size_t name_off, int dup[2]);
/* Item index of name, or -1. */
int xi_name_index_find(const int *index, const void *items, int n, size_t stride,
                       size_t name_off, const char *name);

#endif

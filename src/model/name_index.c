/* model/name_index: sorted name index shared by the safetensors and GGUF readers. */
#include "model/name_index.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

typedef struct name_ref {
    const char *name;
    int index;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

static const char *name_at(const void *items, size_t stride, size_t name_off, int i) {
    const char *name;
    memcpy(&name, (const char *)items + (size_t)i * stride + name_off, sizeof name);
    return name;
}

int *xi_name_index(const void *items, int n, size_t stride, size_t name_off, int dup[2]) {
    size_t cap = n > 0 ? (size_t)n : 1;
    name_ref *refs = xi_calloc(cap, sizeof *refs);
    int *index = xi_calloc(cap, sizeof *index);
    dup[0] = dup[1] = -1;
    if (!refs || !index) {
        free(refs);
        free(index);
        return NULL;
    }
    for (int i = 0; i < n; i++) refs[i] = (name_ref){name_at(items, stride, name_off, i), i};
    qsort(refs, (size_t)n, sizeof *refs, cmp_name_ref);
    for (int i = 0; i < n; i++) {
        index[i] = refs[i].index;
        if (dup[0] < 0 && i > 0 && !strcmp(refs[i - 1].name, refs[i].name))
            dup[0] = refs[i - 1].index, dup[1] = refs[i].index;
    }
    free(refs);
    return index;
}

int xi_name_index_find(const int *index, const void *items, int n, size_t stride,
                       size_t name_off, const char *name) {
    int lo = 0, hi = n - 1;
    while (index && name && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name_at(items, stride, name_off, index[mid]), name);
        if (!c) return index[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

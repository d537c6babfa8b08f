/* kernels/dispatch: pick the op table for this CPU at start-up. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"

int xi_ops_available(const xi_ops **out, int max) {
    int n = 0;
    if (n < max) out[n++] = xi_ops_ref();
    return n;
}

const xi_ops *xi_ops_select(const char *name, char *err, size_t errlen) {
    const xi_ops *all[8];
    int n = xi_ops_available(all, 8);
    if (!name || !*name) name = getenv("XINFER_KERNELS");
    if (!name || !*name || !strcmp(name, "auto")) return all[n - 1]; /* best is last */
    for (int i = 0; i < n; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    xi_errf(err, errlen, "XINFER_KERNELS=%s: this build or CPU has no such kernel variant", name);
    return NULL;
}

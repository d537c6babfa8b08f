/* xinfer --version and xi_build_info: the same facts, and the kernel variants it names are
 * the ones this build can dispatch to. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "test.h"
#include "xinfer.h"

TEST(test_version_names_commit_date_compiler_and_every_dispatchable_kernel) {
    const xi_build_info *b = xi_build_info_get();
    CHECK_STR(b->version, XINFER_VERSION);
    CHECKF(strlen(b->commit) >= 7 && strcmp(b->commit, "unknown"), "commit '%s'", b->commit);
    CHECKF(strlen(b->date) == 20 && b->date[10] == 'T' && b->date[19] == 'Z', "date '%s'", b->date);
    CHECKF(!strncmp(b->compiler, "gcc ", 4) || !strncmp(b->compiler, "clang ", 6), "%s", b->compiler);
    /* every variant this CPU may dispatch to is one the build says it compiled in */
    const xi_ops *ops[8];
    const int n = xi_ops_available(ops, 8);
    CHECK(n >= 1);
    for (int i = 0; i < n; i++) {
        char word[64];
        snprintf(word, sizeof word, " %s ", ops[i]->name);
        char padded[128];
        snprintf(padded, sizeof padded, " %s ", b->kernels);
        CHECKF(strstr(padded, word), "'%s' is not in '%s'", ops[i]->name, b->kernels);
    }
    /* the binary prints the same facts (it is built from the same commit in `make test`) */
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s --version", xi_test_bin());
    CHECK(xi_test_run(cmd, &out) == 0);
    char want[256];
    snprintf(want, sizeof want, "xinfer %s\n", b->version);
    CHECKF(!strncmp(out, want, strlen(want)), "%s", out);
    snprintf(want, sizeof want, "kernels:  %s\n", b->kernels);
    CHECKF(strstr(out, want), "%s", out);
    snprintf(want, sizeof want, "compiler: %s\n", b->compiler);
    CHECKF(strstr(out, want), "%s", out);
    CHECKF(strstr(out, "commit:   ") && strstr(out, "built:    "), "%s", out);
}

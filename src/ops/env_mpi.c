/* ops/env_mpi: is -tp > 1 possible here: mpirun on PATH and the xinfer-mpi.so plugin. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/env.h"

void xi_env_probe_mpi(xi_env_mpi *m, const char *exe) {
    memset(m, 0, sizeof *m);
    m->probed = 1;
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        const int n = end ? (int)(end - path) : (int)strlen(path);
        snprintf(m->mpirun, sizeof m->mpirun, "%.*s/mpirun", n, path);
        if (n && !access(m->mpirun, X_OK)) break;
        m->mpirun[0] = 0;
        path = end ? end + 1 : NULL;
    }
    const char *env = getenv("XINFER_MPI_PLUGIN");
    char dir[PATH_MAX] = ".";
    ssize_t len = exe ? readlink(exe, dir, sizeof dir - 1) : -1;
    if (len > 0) {
        dir[len] = 0;
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
    }
    if (env && *env) snprintf(m->plugin, sizeof m->plugin, "%s", env);
    else snprintf(m->plugin, sizeof m->plugin, "%.490s/xinfer-mpi.so", dir);
    m->plugin_ok = !access(m->plugin, R_OK);
}

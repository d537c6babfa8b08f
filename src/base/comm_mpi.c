/* base/comm_mpi: find and open the MPI plugin. The release binary links no MPI (it must run
 * on a box without it); xinfer-mpi.so is built against the system's OpenMPI and loaded only
 * when -tp > 1. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/comm.h"

typedef xi_comm *(*open_fn)(int tp, char *err, size_t errlen);

int xi_comm_mpi_world_size(void) {
    const char *keys[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = getenv(keys[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 0;
}

/* XINFER_MPI_PLUGIN, else xinfer-mpi.so in the executable's folder (a build tree), else in
 * ../lib/xinfer beside it (the packages: /usr/bin/xinfer, /usr/lib/xinfer/xinfer-mpi.so).
 * buf gets the first that exists, or the last one tried. */
static void plugin_path(char *buf, size_t n) {
    const char *env = getenv("XINFER_MPI_PLUGIN");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(buf, n, "xinfer-mpi.so");
        return;
    }
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(buf, n, "%s/xinfer-mpi.so", exe);
    if (!access(buf, R_OK)) return;
    snprintf(buf, n, "%s/../lib/xinfer/xinfer-mpi.so", exe);
}

xi_comm *xi_comm_mpi_open(int tp, char *err, size_t errlen) {
    char path[PATH_MAX + 32];
    plugin_path(path, sizeof path);
    if (access(path, R_OK)) {
        xi_errf(err, errlen,
                "-tp %d needs the MPI plugin %s, which is missing (the packages carry it; from "
                "source it is built by make when OpenMPI's development files are installed: "
                "apt-get install libopenmpi-dev openmpi-bin; or set XINFER_MPI_PLUGIN)", tp, path);
        return NULL;
    }
    /* RTLD_GLOBAL: OpenMPI's own components dlopen later and need libmpi's symbols */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        xi_errf(err, errlen, "-tp %d: cannot load the MPI plugin (is OpenMPI 4 installed and its "
                "libmpi.so.40 on the library path? Debian, UOS, Kylin: apt-get install "
                "openmpi-bin; openEuler: dnf install openmpi, then module load mpi): %s", tp,
                dlerror());
        return NULL;
    }
    open_fn f = (open_fn)(uintptr_t)dlsym(h, "xi_mpi_plugin_open");
    if (!f) {
        xi_errf(err, errlen, "%s: no xi_mpi_plugin_open: %s", path, dlerror());
        dlclose(h);
        return NULL;
    }
    /* the plugin stays loaded: libmpi cannot be unloaded and reinitialised */
    return f(tp, err, errlen);
}

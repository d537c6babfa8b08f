/* api/build_info: what `xinfer --version` and GET /version report. The Makefile passes the
 * commit and date to this file only, so a new commit recompiles one small object. */
#include "xinfer.h"

#ifndef XI_GIT_COMMIT
#define XI_GIT_COMMIT "unknown"
#endif
#ifndef XI_BUILD_DATE
#define XI_BUILD_DATE "unknown"
#endif

#if defined(__clang__)
#define XI_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define XI_COMPILER "gcc " __VERSION__
#else
#define XI_COMPILER "unknown"
#endif

/* The variants the Makefile compiles for this architecture (src/kernels/dispatch.c picks
 * among them at run time, from what the CPU reports). */
#if defined(__x86_64__)
#define XI_KERNELS "ref avx2 avx512 avx512bf16"
#elif defined(__aarch64__)
#define XI_KERNELS "ref neon"
#else
#define XI_KERNELS "ref"
#endif

#ifdef XI_STATIC_RELEASE
#define XI_LINKAGE "static libraries, glibc >= 2.28"
#else
#define XI_LINKAGE "shared libraries"
#endif

const xi_build_info *xi_build_info_get(void) {
    static const xi_build_info info = {XINFER_VERSION, XI_GIT_COMMIT, XI_BUILD_DATE, XI_COMPILER,
                                       XI_KERNELS, XI_LINKAGE};
    return &info;
}

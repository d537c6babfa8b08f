/* dist/glibc228: the release binary runs on glibc 2.28 and later (Kylin V10, UOS 20 and
 * openEuler 22.03 ship 2.28 to 2.34). Linked against a newer glibc, a call binds to the
 * newest version of its symbol: the pthread_* and dl* functions that moved into libc at
 * 2.34, __libc_start_main at 2.34, pthread_sigmask at 2.32, stat/fstat/lstat (functions of
 * libc only since 2.33), exp/log/pow at 2.29. The Makefile links the release binary with
 * --wrap=NAME for every name listed in PINS, so each such call, ours and those inside the
 * static libraries alike, lands on __wrap_NAME here, which jumps to the oldest version of
 * the symbol; every later glibc keeps those versions for old binaries. .ci/packaging.sh
 * checks with objdump -T that no reference newer than GLIBC_2.28 is left. */
#include <stddef.h>
#include <sys/stat.h>

/* PIN(name, version on x86-64). aarch64's glibc starts at 2.17, so there every old version
 * is GLIBC_2.17. The Makefile reads the names from this list. */
#define PINS(PIN)                                                                            \
    PIN(pthread_create, GLIBC_2.2.5)                                                         \
    PIN(pthread_join, GLIBC_2.2.5)                                                           \
    PIN(pthread_detach, GLIBC_2.2.5)                                                         \
    PIN(pthread_key_create, GLIBC_2.2.5)                                                     \
    PIN(pthread_key_delete, GLIBC_2.2.5)                                                     \
    PIN(pthread_getspecific, GLIBC_2.2.5)                                                    \
    PIN(pthread_setspecific, GLIBC_2.2.5)                                                    \
    PIN(pthread_once, GLIBC_2.2.5)                                                           \
    PIN(pthread_rwlock_init, GLIBC_2.2.5)                                                    \
    PIN(pthread_rwlock_destroy, GLIBC_2.2.5)                                                 \
    PIN(pthread_rwlock_rdlock, GLIBC_2.2.5)                                                  \
    PIN(pthread_rwlock_wrlock, GLIBC_2.2.5)                                                  \
    PIN(pthread_rwlock_unlock, GLIBC_2.2.5)                                                  \
    PIN(pthread_mutexattr_init, GLIBC_2.2.5)                                                 \
    PIN(pthread_mutexattr_destroy, GLIBC_2.2.5)                                              \
    PIN(pthread_mutexattr_settype, GLIBC_2.2.5)                                              \
    PIN(pthread_mutex_trylock, GLIBC_2.2.5)                                                  \
    PIN(pthread_attr_setstacksize, GLIBC_2.2.5)                                              \
    PIN(pthread_attr_setaffinity_np, GLIBC_2.3.4)                                            \
    PIN(pthread_setaffinity_np, GLIBC_2.3.4)                                                 \
    PIN(pthread_setname_np, GLIBC_2.12)                                                      \
    PIN(pthread_sigmask, GLIBC_2.2.5)                                                        \
    PIN(dlopen, GLIBC_2.2.5)                                                                 \
    PIN(dlsym, GLIBC_2.2.5)                                                                  \
    PIN(dlclose, GLIBC_2.2.5)                                                                \
    PIN(dlerror, GLIBC_2.2.5)                                                                \
    PIN(dladdr, GLIBC_2.2.5)                                                                 \
    PIN(exp, GLIBC_2.2.5)                                                                    \
    PIN(log, GLIBC_2.2.5)                                                                    \
    PIN(pow, GLIBC_2.2.5)

#if defined(__x86_64__)
#define OLD(v) #v
#define JUMP(target) "jmp " target "@PLT\n"
#define STAT_VER 1 /* _STAT_VER_LINUX of glibc's x86-64 __xstat */
#elif defined(__aarch64__)
#define OLD(v) "GLIBC_2.17"
#define JUMP(target) "b " target "\n"
#define STAT_VER 0 /* _STAT_VER of glibc's generic (aarch64) __xstat */
#else
#error "the glibc 2.28 release build is for x86-64 and aarch64"
#endif

/* __wrap_NAME: a tail jump to NAME@OLD, whatever NAME's signature. */
#define TRAMPOLINE(name, version)                                                            \
    __asm__(".symver xi_old_" #name ", " #name "@" OLD(version) "\n"                         \
            ".text\n.globl __wrap_" #name "\n.type __wrap_" #name ", %function\n"            \
            "__wrap_" #name ":\n" JUMP("xi_old_" #name)                                      \
            ".size __wrap_" #name ", .-__wrap_" #name "\n");
PINS(TRAMPOLINE)

/* ---- start-up: glibc 2.34's crt1.o leaves running the constructors to libc -------------- */

/* Before 2.34, __libc_start_main ran none of the program's own constructors: crt1.o
 * passed __libc_csu_init for that. Newer crt1.o passes NULL, so the old entry point gets
 * this function, which does what __libc_csu_init did. glibc 2.34 and later call it as
 * they call the init of any old binary, instead of running the arrays themselves. */
typedef void (*init_fn)(int, char **, char **);
extern init_fn __preinit_array_start[] __attribute__((visibility("hidden")));
extern init_fn __preinit_array_end[] __attribute__((visibility("hidden")));
extern init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern init_fn __init_array_end[] __attribute__((visibility("hidden")));
extern void _init(void);

static void run_constructors(int argc, char **argv, char **envp) {
    for (init_fn *f = __preinit_array_start; f < __preinit_array_end; f++) (*f)(argc, argv, envp);
    _init();
    for (init_fn *f = __init_array_start; f < __init_array_end; f++) (*f)(argc, argv, envp);
}

typedef int (*main_fn)(int, char **, char **);
int xi_old_libc_start_main(main_fn main, int argc, char **argv, init_fn init, void (*fini)(void),
                           void (*rtld_fini)(void), void *stack_end);
__asm__(".symver xi_old_libc_start_main, __libc_start_main@" OLD(GLIBC_2.2.5));

int __wrap___libc_start_main(main_fn main, int argc, char **argv, init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
int __wrap___libc_start_main(main_fn main, int argc, char **argv, init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
    (void)init, (void)fini;
    return xi_old_libc_start_main(main, argc, argv, run_constructors, NULL, rtld_fini, stack_end);
}

/* ---- stat: before 2.33 an inline function of sys/stat.h calling __xstat ----------------- */

int xi_old_xstat(int ver, const char *path, struct stat *st);
int xi_old_lxstat(int ver, const char *path, struct stat *st);
int xi_old_fxstat(int ver, int fd, struct stat *st);
__asm__(".symver xi_old_xstat, __xstat@" OLD(GLIBC_2.2.5));
__asm__(".symver xi_old_lxstat, __lxstat@" OLD(GLIBC_2.2.5));
__asm__(".symver xi_old_fxstat, __fxstat@" OLD(GLIBC_2.2.5));

int __wrap_stat(const char *path, struct stat *st);
int __wrap_lstat(const char *path, struct stat *st);
int __wrap_fstat(int fd, struct stat *st);
int __wrap_stat(const char *path, struct stat *st) { return xi_old_xstat(STAT_VER, path, st); }
int __wrap_lstat(const char *path, struct stat *st) { return xi_old_lxstat(STAT_VER, path, st); }
int __wrap_fstat(int fd, struct stat *st) { return xi_old_fxstat(STAT_VER, fd, st); }

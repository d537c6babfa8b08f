/* kernels/dispatch: pick the op table for this CPU at start-up, from what the CPU reports
 * (cpuid + XCR0 on x86, HWCAP on aarch64), never from what the build machine had. */
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "base/base.h"
#include "kernels/kernels.h"

#if defined(__x86_64__)
/* AVX2 + FMA + F16C, and the OS saves the ymm state (XCR0 bits 1 and 2). */
static int cpu_has_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned need1 = (1u << 12) | (1u << 27) | (1u << 28) | (1u << 29); /* fma osxsave avx f16c */
    if ((c & need1) != need1) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 6) != 6) return 0;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1;
}

/* AVX-512 F, BW, VL and VNNI (cpuid 7: ebx bits 16, 30, 31, ecx bit 11), and the OS saves the
 * opmask and zmm state as well as the ymm state (XCR0 bits 5, 6, 7 and 1, 2). The avx512
 * table is the avx2 one with a VNNI matmul_gq, so it needs avx2 too (the caller checks). */
static int cpu_has_avx512_vnni(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned need_b = (1u << 16) | (1u << 30) | (1u << 31);
    if ((b & need_b) != need_b || !((c >> 11) & 1)) return 0;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    return (xlo & 0xe6) == 0xe6;
}

/* AVX-512 BF16 (cpuid 7.1: eax bit 5), on top of cpu_has_avx512_vnni. */
static int cpu_has_avx512_bf16(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (a < 1) return 0; /* the highest subleaf of leaf 7 */
    __cpuid_count(7, 1, a, b, c, d);
    return (a >> 5) & 1;
}
#endif

#if defined(__aarch64__)
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
/* The neon table is built with armv8.2-a+fp16+dotprod, so it needs all of them. */
static int cpu_has_neon(void) {
    const unsigned long need = HWCAP_ASIMD | HWCAP_FPHP | HWCAP_ASIMDHP | HWCAP_ASIMDDP;
    return (getauxval(AT_HWCAP) & need) == need;
}
#endif

const xi_ops *xi_ops_precision(const xi_ops *ops, const char *precision, char *err,
                              size_t errlen) {
    if (!ops) return NULL;
    if (!precision || !*precision || !strcmp(precision, "auto"))
        precision = getenv("XINFER_KERNEL_PRECISION");
    if (!precision || !*precision || !strcmp(precision, "auto")) precision = "int8";
    if (strcmp(precision, "int8") && strcmp(precision, "exact")) {
        xi_errf(err, errlen, "kernel precision %s: expected int8 or exact", precision);
        return NULL;
    }
    return strcmp(ops->precision, precision) ? ops->twin : ops;
}

int xi_ops_available(const xi_ops **out, int max) {
    int n = 0;
    if (n < max) out[n++] = xi_ops_ref();
#if defined(__x86_64__)
    if (n < max && cpu_has_avx2()) {
        out[n++] = xi_ops_avx2();
        if (n < max && cpu_has_avx512_vnni()) {
            out[n++] = xi_ops_avx512();
            if (n < max && cpu_has_avx512_bf16()) out[n++] = xi_ops_avx512bf16();
        }
    }
#endif
#if defined(__aarch64__)
    if (n < max && cpu_has_neon()) out[n++] = xi_ops_neon();
#endif
    for (int i = 0; i < n; i++) {
        const xi_ops *p = xi_ops_precision(out[i], NULL, NULL, 0);
        if (p) out[i] = p; /* an unknown XINFER_KERNEL_PRECISION: xi_ops_select says so */
    }
    return n;
}

const xi_ops *xi_ops_select(const char *name, char *err, size_t errlen) {
    const xi_ops *all[8];
    int n = xi_ops_available(all, 8);
    if (!name || !*name) name = getenv("XINFER_KERNELS");
    if (!name || !*name || !strcmp(name, "auto")) /* best is last */
        return xi_ops_precision(all[n - 1], NULL, err, errlen);
    for (int i = 0; i < n; i++)
        if (!strcmp(all[i]->name, name)) return xi_ops_precision(all[i], NULL, err, errlen);
    xi_errf(err, errlen, "XINFER_KERNELS=%s: this build or CPU has no such kernel variant", name);
    return NULL;
}

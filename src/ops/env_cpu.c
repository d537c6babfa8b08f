/* ops/env_cpu: CPU model, SIMD features, NUMA nodes and memory from /proc and /sys.
 * The model is read from the MIDR fields on ARM (Kunpeng servers print no model name), the
 * features from the Features (ARM) or flags (x86) line, never assumed from the model. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "ops/env.h"
#include "ops/rootfs.h"

/* MIDR implementer/part ids (reference §1.5, §1.6): 0x48 = HiSilicon. */
const char *xi_cpu_part_name(unsigned implementer, unsigned part) {
    if (implementer == 0x48 && part == 0xd01) return "Kunpeng 920 (HiSilicon TSV110 / hip08)";
    if (implementer == 0x48 && part == 0xd02)
        return "Kunpeng 920B / 930 (HiSilicon hip09: SVE, i8mm, bf16)";
    return NULL;
}

static const char *implementer_name(unsigned implementer) {
    switch (implementer) {
    case 0x41: return "Arm";
    case 0x48: return "HiSilicon";
    case 0x51: return "Qualcomm";
    case 0x61: return "Apple";
    case 0x70: return "Phytium";
    default: return NULL;
    }
}

/* Value after "key<blanks>:" on the first line that starts with key. */
static int cpuinfo_get(const char *text, const char *key, char *out, size_t outlen) {
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (!strncmp(line, key, klen)) {
            const char *p = line + klen;
            while (p < end && (*p == ' ' || *p == '\t')) p++;
            if (p < end && *p == ':') {
                p++;
                while (p < end && *p == ' ') p++;
                size_t n = (size_t)(end - p);
                if (n >= outlen) n = outlen - 1;
                memcpy(out, p, n);
                out[n] = 0;
                return 1;
            }
        }
        line = *end ? end + 1 : end;
    }
    return 0;
}

static int count_lines_starting(const char *text, const char *key) {
    int n = 0;
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        if (!strncmp(line, key, klen) && (line[klen] == ' ' || line[klen] == '\t' ||
                                          line[klen] == ':'))
            n++;
        const char *end = strchr(line, '\n');
        line = end ? end + 1 : NULL;
    }
    return n;
}

/* Whole-word test in a blank-separated feature list. */
static int has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == '\t') && (p[n] == 0 || isspace((unsigned char)p[n])))
            return 1;
    return 0;
}

static int64_t meminfo_bytes(const char *text, const char *key) {
    char v[64];
    if (!text || !cpuinfo_get(text, key, v, sizeof v)) return -1;
    long long kb = strtoll(v, NULL, 10); /* meminfo counts kB = KiB */
    /* A corrupt figure must not overflow the conversion to bytes: it counts as unknown. */
    if (kb < 0 || kb > INT64_MAX / 1024) return -1;
    return kb * 1024;
}

static void pick_kernels(xi_env_cpu *c) {
    /* Mirrors kernels/dispatch: avx512 is the avx2 table with an AVX-512 VNNI matmul (F, BW,
     * VL and VNNI); the neon variant is built for armv8.2-a+fp16+dotprod. */
    const char *k = "ref";
    if (!strcmp(c->arch, "x86_64")) {
        if (c->avx2 && c->fma && c->avx512f && c->avx512bw && c->avx512vl && c->avx512_vnni) k = "avx512";
        else if (c->avx2 && c->fma) k = "avx2";
    } else if (!strcmp(c->arch, "aarch64")) {
        if (c->asimd && c->asimddp && c->asimdhp) k = "neon";
    }
    xi_copy_str(c->kernels, sizeof c->kernels, k);
}

void xi_env_probe_cpu(xi_env_cpu *c, const char *root) {
    memset(c, 0, sizeof *c);
    c->mem_total = c->mem_available = -1;
    int native = !root || !*root || !strcmp(root, "/");
    char *info = xi_rootfs_read(root, "/proc/cpuinfo");
    char v[4096];
    if (info) {
        c->n_cpus = count_lines_starting(info, "processor");
        if (cpuinfo_get(info, "CPU implementer", v, sizeof v)) c->implementer = (unsigned)strtoul(v, NULL, 0);
        if (cpuinfo_get(info, "CPU part", v, sizeof v)) c->part = (unsigned)strtoul(v, NULL, 0);
        if (cpuinfo_get(info, "Features", v, sizeof v)) {
            /* "CPU architecture: 7" is a 32-bit ARM core (or a 64-bit one in AArch32 mode). */
            char archv[16] = "8";
            cpuinfo_get(info, "CPU architecture", archv, sizeof archv);
            xi_copy_str(c->arch, sizeof c->arch, atoi(archv) >= 8 ? "aarch64" : "armv7l");
            c->asimd = has_word(v, "asimd");
            c->asimddp = has_word(v, "asimddp");
            c->asimdhp = has_word(v, "asimdhp");
            c->sve = has_word(v, "sve");
            c->i8mm = has_word(v, "i8mm");
            c->bf16 = has_word(v, "bf16");
        }
        if (cpuinfo_get(info, "flags", v, sizeof v)) {
            xi_copy_str(c->arch, sizeof c->arch, has_word(v, "lm") ? "x86_64" : "i686");
            c->avx2 = has_word(v, "avx2");
            c->fma = has_word(v, "fma");
            c->f16c = has_word(v, "f16c");
            c->avx512f = has_word(v, "avx512f");
            c->avx512bw = has_word(v, "avx512bw");
            c->avx512vl = has_word(v, "avx512vl");
            c->avx512_vnni = has_word(v, "avx512_vnni");
            c->avx512_bf16 = has_word(v, "avx512_bf16");
        }
        if (cpuinfo_get(info, "model name", v, sizeof v)) xi_copy_str(c->model, sizeof c->model, v);
        free(info);
    }
    if (native) {
        /* The running kernel knows its machine; cpuinfo only guessed it. */
        struct utsname u;
        if (uname(&u) == 0) xi_copy_str(c->arch, sizeof c->arch, u.machine);
    }
    const char *part = xi_cpu_part_name(c->implementer, c->part);
    if (part) {
        xi_copy_str(c->model, sizeof c->model, part);
    } else if (!c->model[0] && c->implementer) {
        const char *impl = implementer_name(c->implementer);
        if (impl) snprintf(c->model, sizeof c->model, "%s part 0x%03x", impl, c->part);
        else snprintf(c->model, sizeof c->model, "implementer 0x%02x part 0x%03x", c->implementer, c->part);
    }
    c->n_numa = xi_rootfs_count_numbered(root, "/sys/devices/system/node", "node");

    char *mem = xi_rootfs_read(root, "/proc/meminfo");
    c->mem_total = meminfo_bytes(mem, "MemTotal");
    c->mem_available = meminfo_bytes(mem, "MemAvailable");
    free(mem);
    pick_kernels(c);
}

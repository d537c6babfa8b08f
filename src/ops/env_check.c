/* ops/env_check: turn what env probing found into ✔/!/✘ checks and a verdict.
 * Policy: only what stops xinfer on the CPU is a failure (a 32-bit CPU, less than 2 GiB of
 * memory). Every Ascend finding is a warning while xinfer has no Ascend backend, and a
 * driver/toolkit pair no table covers is "unknown", never a failure. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ops/env.h"
#include "ops/rootfs.h"

const char *xi_check_status_name(xi_check_status s) {
    static const char *const names[] = {"info", "ok", "warn", "fail"};
    return names[s];
}

static void add(xi_env_report *r, xi_check_status st, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add(xi_env_report *r, xi_check_status st, const char *id, const char *fmt, ...) {
    if (r->n == XI_ENV_MAX_CHECKS) return;
    xi_env_check *c = &r->checks[r->n++];
    c->status = st;
    xi_copy_str(c->id, sizeof c->id, id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    if (st == XI_CHECK_WARN) r->n_warn++;
}

static int is_32bit(const char *arch) {
    static const char *const names[] = {"i386", "i486", "i586", "i686", "armv6l", "armv7l",
                                        "armv8l", "arm", "mips", "mipsel", "ppc"};
    for (size_t i = 0; i < XI_ARRAY_LEN(names); i++)
        if (!strcmp(arch, names[i])) return 1;
    return 0;
}

static void check_cpu(const xi_env *e, xi_env_report *r) {
    const xi_env_cpu *c = &e->cpu;
    /* xinfer's reference kernels are portable C, so any 64-bit CPU runs it; a 32-bit one
     * cannot map a model of a few GB into one address space. */
    if (!c->arch[0])
        add(r, XI_CHECK_WARN, "cpu_arch", "CPU architecture unknown (no /proc/cpuinfo)");
    else if (is_32bit(c->arch))
        add(r, XI_CHECK_FAIL, "cpu_arch", "CPU architecture %s is 32-bit: xinfer needs a 64-bit CPU",
            c->arch);
    else if (strcmp(c->arch, "x86_64") && strcmp(c->arch, "aarch64"))
        add(r, XI_CHECK_WARN, "cpu_arch", "CPU architecture %s: only the portable reference kernels",
            c->arch);
    else
        add(r, XI_CHECK_OK, "cpu_arch", "CPU architecture %s", c->arch);

    char numa[64] = "";
    if (c->n_numa) snprintf(numa, sizeof numa, ", %d NUMA node%s", c->n_numa, c->n_numa == 1 ? "" : "s");
    add(r, XI_CHECK_INFO, "cpu", "CPU %s, %d logical CPUs%s", c->model[0] ? c->model : "(model unknown)",
        c->n_cpus, numa);

    char feat[200];
    int x86 = !strcmp(c->arch, "x86_64") || (c->arch[0] == 'i' && strstr(c->arch, "86"));
    if (!x86)
        snprintf(feat, sizeof feat, "NEON %s, asimddp %s, asimdhp %s, SVE %s, i8mm %s, bf16 %s",
                 c->asimd ? "yes" : "no", c->asimddp ? "yes" : "no", c->asimdhp ? "yes" : "no",
                 c->sve ? "yes" : "no", c->i8mm ? "yes" : "no", c->bf16 ? "yes" : "no");
    else
        snprintf(feat, sizeof feat, "AVX2 %s, FMA %s, F16C %s, AVX-512F %s, AVX-512 VNNI %s, AVX-512 BF16 %s",
                 c->avx2 ? "yes" : "no", c->fma ? "yes" : "no", c->f16c ? "yes" : "no",
                 c->avx512f ? "yes" : "no", c->avx512_vnni ? "yes" : "no", c->avx512_bf16 ? "yes" : "no");
    if (!strcmp(c->kernels, "ref"))
        add(r, XI_CHECK_WARN, "simd", "SIMD: %s — no SIMD kernel variant fits, the reference "
            "kernels run (several times slower)", feat);
    else
        add(r, XI_CHECK_OK, "simd", "SIMD: %s", feat);
    if (e->kernels_dispatch)
        add(r, XI_CHECK_INFO, "kernels", "kernel variant: %s (picked by xinfer's dispatcher)",
            e->kernels_dispatch);
    else
        add(r, XI_CHECK_INFO, "kernels", "kernel variant: %s (implied by the CPU features)", c->kernels);

    double gib = (double)c->mem_total / (1 << 30);
    if (c->mem_total < 0)
        add(r, XI_CHECK_WARN, "memory", "memory unknown (no /proc/meminfo)");
    else if (c->mem_total < XI_ENV_MIN_MEMORY)
        add(r, XI_CHECK_FAIL, "memory", "memory %.1f GiB: xinfer needs at least 2 GiB", gib);
    else if (c->mem_total < (8LL << 30))
        add(r, XI_CHECK_WARN, "memory", "memory %.1f GiB: enough for models up to ~1.5B parameters", gib);
    else
        add(r, XI_CHECK_OK, "memory", "memory %.1f GiB (%.1f GiB available)", gib,
            c->mem_available >= 0 ? (double)c->mem_available / (1 << 30) : gib);
    if (c->n_numa > 1)
        add(r, XI_CHECK_INFO, "numa", "%d NUMA nodes: pin a server to one node (numactl "
            "--cpunodebind=N --membind=N) for decode bandwidth", c->n_numa);
}

static void check_python(const xi_env *e, const char *cann, xi_env_report *r) {
    const xi_env_python *p = &e->python;
    if (!p->probed || (!p->torch[0] && !p->torch_npu[0] && !p->vllm_ascend[0])) return;
    add(r, XI_CHECK_INFO, "python", "optional python stack (only for vllm-ascend; xinfer needs none): "
        "torch %s, torch_npu %s, vllm %s, vllm-ascend %s", p->torch[0] ? p->torch : "-",
        p->torch_npu[0] ? p->torch_npu : "-", p->vllm[0] ? p->vllm : "-",
        p->vllm_ascend[0] ? p->vllm_ascend : "-");
    const struct { const char *id, *pkg, *ver, *want; } rows[] = {
        {"python_torch_npu", "torch_npu", p->torch_npu, xi_torch_npu_cann(p->torch_npu)},
        {"python_vllm_ascend", "vllm-ascend", p->vllm_ascend, xi_vllm_ascend_cann(p->vllm_ascend)},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(rows); i++) {
        if (!rows[i].ver[0]) continue;
        int ok = 0;
        if (!rows[i].want)
            add(r, XI_CHECK_WARN, rows[i].id, "optional: %s %s is not in the compatibility matrix",
                rows[i].pkg, rows[i].ver);
        else if (!cann || !*cann)
            add(r, XI_CHECK_WARN, rows[i].id, "optional: %s %s needs CANN %s; no toolkit found",
                rows[i].pkg, rows[i].ver, rows[i].want);
        else if (xi_cann_version_cmp(cann, rows[i].want, &ok) != 0 || !ok)
            add(r, XI_CHECK_WARN, rows[i].id, "optional: %s %s is built for CANN %s, installed %s",
                rows[i].pkg, rows[i].ver, rows[i].want, cann);
        else
            add(r, XI_CHECK_OK, rows[i].id, "optional: %s %s matches CANN %s", rows[i].pkg,
                rows[i].ver, cann);
    }
}

static void check_ascend(const xi_env *e, xi_env_report *r) {
    const xi_env_ascend *a = &e->ascend;
    int any = a->driver_found || a->toolkit_found || a->n_davinci || a->npu_smi_found;
    if (!any) {
        add(r, XI_CHECK_INFO, "ascend", "no Ascend driver, toolkit or device: a CPU-only node");
        check_python(e, NULL, r);
        return;
    }
    add(r, XI_CHECK_INFO, "ascend", "Ascend stack found; xinfer has no Ascend backend yet, so the "
        "findings below are warnings and xinfer serves on the CPU");
    if (!e->os.ascend_listed)
        add(r, XI_CHECK_WARN, "os_not_listed_for_ascend", "OS %s is not on Huawei's list for Atlas "
            "300I Duo / 300I Pro / 800I A2 (Kylin V10 SP3/V11, UOS 20, openEuler 22.03/24.03, "
            "Ubuntu 20.04-24.04, ...)", e->os.label);
    if (a->driver_found)
        add(r, XI_CHECK_OK, "ascend_driver", "driver %s (%s)", a->driver_version[0] ? a->driver_version : "?",
            a->driver_path);
    else
        add(r, XI_CHECK_WARN, "no_driver", "no Ascend driver (%s missing)",
            "/usr/local/Ascend/driver/version.info");

    if (a->toolkit_found) {
        add(r, XI_CHECK_OK, "ascend_toolkit", "CANN toolkit %s (%s layout, %s)", a->toolkit_version,
            a->toolkit_layout, a->toolkit_source);
        int ok = 0;
        int cmp = xi_cann_version_cmp(a->toolkit_version, "8.5.1", &ok);
        if (!ok)
            add(r, XI_CHECK_WARN, "cann_version_unparsed", "CANN version '%s' not understood; "
                "cannot compare with the 8.5.1 requirement", a->toolkit_version);
        else if (cmp < 0)
            add(r, XI_CHECK_WARN, "cann_older_than_8.5.1", "CANN %s is older than 8.5.1, the minimum "
                "for xinfer's planned Ascend backend (vllm-ascend v0.18/v0.19 also pair with 8.5.1)",
                a->toolkit_version);
        else
            add(r, XI_CHECK_OK, "cann_version", "CANN %s meets the 8.5.1 requirement", a->toolkit_version);
    } else if (a->driver_found) {
        add(r, XI_CHECK_WARN, "no_toolkit", "no CANN toolkit ($ASCEND_TOOLKIT_HOME, "
            "/usr/local/Ascend/cann, /usr/local/Ascend/ascend-toolkit/latest)");
    }

    switch (a->pair) {
    case XI_PAIR_DOCUMENTED:
    case XI_PAIR_RULE: add(r, XI_CHECK_OK, "driver_toolkit_pair", "%s", a->pair_note); break;
    case XI_PAIR_KNOWN_BAD: add(r, XI_CHECK_WARN, "driver_toolkit_pair_known_bad", "%s", a->pair_note); break;
    case XI_PAIR_UNKNOWN:
        add(r, XI_CHECK_WARN, "driver_toolkit_pair_unknown", "unknown pair: %s (not an error; "
            "check Huawei's version mapping)", a->pair_note);
        break;
    case XI_PAIR_NONE: break;
    }
    if (a->inner_consistent == 0)
        add(r, XI_CHECK_WARN, "driver_toolkit_inner", "toolkit innerversion %s is not in the driver's "
            "compatible_version %s (an inference from samples, not a documented rule)",
            a->toolkit_inner, a->driver_compat);

    if (a->n_davinci)
        add(r, XI_CHECK_OK, "davinci_devices", "%d /dev/davinci device%s", a->n_davinci,
            a->n_davinci == 1 ? "" : "s");
    else if (a->toolkit_found || a->driver_found)
        add(r, XI_CHECK_WARN, a->toolkit_found ? "toolkit_without_device" : "no_device",
            "no /dev/davinci* device: %s", a->toolkit_found ? "a toolkit without an NPU (build or "
            "container host?)" : "driver installed but no device node");

    if (a->npu_smi_found) {
        char list[240] = "";
        size_t len = 0;
        int unhealthy = 0;
        for (int i = 0; i < a->smi.n_npus && len < sizeof list; i++) {
            const xi_npu *n = &a->smi.npus[i];
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d %s %s %lld/%lld MB",
                                    i ? "; " : "", n->id, n->name, n->health,
                                    (long long)n->mem_used_mb, (long long)n->mem_total_mb);
            if (strcmp(n->health, "OK")) unhealthy++;
        }
        add(r, XI_CHECK_OK, "npu_smi", "npu-smi %s: %d NPU%s: %s", a->smi.version, a->smi.n_npus,
            a->smi.n_npus == 1 ? "" : "s", list);
        if (unhealthy)
            add(r, XI_CHECK_WARN, "npu_health", "%d NPU%s not healthy (npu-smi Health != OK)", unhealthy,
                unhealthy == 1 ? "" : "s");
    }
    check_python(e, a->toolkit_found ? a->toolkit_version : NULL, r);
}

/* -tp > 1 needs mpirun and the plugin; -tp 1 needs neither, so never a warning. */
static void check_mpi(const xi_env *e, xi_env_report *r) {
    const xi_env_mpi *m = &e->mpi;
    if (!m->probed) return;
    if (m->mpirun[0] && m->plugin_ok)
        add(r, XI_CHECK_OK, "mpi", "MPI present (%s, %s): -tp N runs N ranks%s", m->mpirun, m->plugin,
            e->cpu.n_numa > 1 ? ", one per NUMA node when N <= nodes" : "");
    else
        add(r, XI_CHECK_INFO, "mpi", "MPI absent (%s%s%s): -tp > 1 needs openmpi-bin and "
            "xinfer-mpi.so (built with libopenmpi-dev); -tp 1 does not",
            m->mpirun[0] ? "" : "no mpirun", !m->mpirun[0] && !m->plugin_ok ? ", " : "",
            m->plugin_ok ? "" : "no plugin");
}

void xi_env_evaluate(const xi_env *e, xi_env_report *r) {
    memset(r, 0, sizeof *r);
    if (e->os.family == XI_OS_UNKNOWN)
        add(r, XI_CHECK_WARN, "os", "OS unknown (no /etc/os-release)");
    else
        add(r, XI_CHECK_OK, "os", "OS %s", e->os.label);
    add(r, e->os.kernel[0] ? XI_CHECK_INFO : XI_CHECK_WARN, "kernel", "kernel %s",
        e->os.kernel[0] ? e->os.kernel : "unknown");
    check_cpu(e, r);
    check_mpi(e, r);
    check_ascend(e, r);

    r->can_run = 1;
    const char *why = NULL;
    for (int i = 0; i < r->n; i++)
        if (r->checks[i].status == XI_CHECK_FAIL) {
            r->can_run = 0;
            if (!why) why = r->checks[i].msg;
        }
    const char *k = e->kernels_dispatch ? e->kernels_dispatch : e->cpu.kernels;
    if (r->can_run)
        snprintf(r->verdict, sizeof r->verdict, "READY: xinfer can serve on this CPU (%s kernels), %d warning%s",
                 k, r->n_warn, r->n_warn == 1 ? "" : "s");
    else
        snprintf(r->verdict, sizeof r->verdict, "NOT READY: %s", why);
}

/* ---- python ---------------------------------------------------------------------------- */

void xi_env_probe_python(xi_env_python *p) {
    memset(p, 0, sizeof *p);
    if (!xi_on_path("python3")) return;
    /* importlib.metadata reads the installed dist-info only: no torch import, well under a
     * second even with torch installed. */
    FILE *f = popen("python3 -c 'import importlib.metadata as m\n"
                    "for n in (\"torch\",\"torch_npu\",\"vllm\",\"vllm_ascend\"):\n"
                    "  try: print(n, m.version(n))\n"
                    "  except Exception: print(n, \"-\")' 2>/dev/null", "r");
    if (!f) return;
    p->probed = 1;
    char line[160], name[40], ver[40];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%39s %39s", name, ver) != 2 || !strcmp(ver, "-")) continue;
        char *dst = !strcmp(name, "torch")         ? p->torch
                    : !strcmp(name, "torch_npu")   ? p->torch_npu
                    : !strcmp(name, "vllm")        ? p->vllm
                    : !strcmp(name, "vllm_ascend") ? p->vllm_ascend
                                                   : NULL;
        if (dst) xi_copy_str(dst, 32, ver);
    }
    pclose(f);
}

/* Fuzz the text parsers behind `xinfer env`. Input byte 0 picks:
 *   0: `npu-smi info` output for xi_npu_smi_parse;
 *   1: a whole machine as NUL-separated files (see root_files) probed from a root folder,
 *      then evaluated into checks;
 *   2: two CANN / driver version strings (NUL-separated): ordering and pair classification.
 * Properties: counts stay within their arrays, strings stay NUL-terminated, a rejected
 * npu-smi text says why, and the version order is antisymmetric. */
#include <sys/stat.h>

#include "fuzz_util.h"
#include "ops/env.h"

static const char *const root_files[] = {
    "etc/os-release",
    "etc/kylin-release",
    "etc/uos-release",
    "etc/os-version",
    "proc/sys/kernel/osrelease",
    "proc/cpuinfo",
    "proc/meminfo",
    "etc/ascend_install.info",
    "usr/local/Ascend/driver/version.info",
    "usr/local/Ascend/cann/aarch64-linux/ascend_toolkit_install.info",
    "usr/local/Ascend/ascend-toolkit/latest/version.cfg",
};
#define N_ROOT (int)(sizeof root_files / sizeof root_files[0])

static void mkdirs(const char *rel) {
    char p[512];
    fuzz_path(rel, p, sizeof p);
    for (char *s = p + strlen(fuzz_dir()) + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0700);
            *s = '/';
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < N_ROOT; i++) mkdirs(root_files[i]);
    mkdirs("dev/x");
    fuzz_write("dev/davinci0", "", 0);
    return 0;
}

static void check_smi(int n, const xi_npu_smi *s) {
    if (n < 0) return;
    if (n != s->n_npus || n > XI_NPU_MAX) fuzz_fail("npu count %d / %d", n, s->n_npus);
    if (!memchr(s->version, 0, sizeof s->version)) fuzz_fail("version not terminated");
    for (int i = 0; i < n; i++) {
        const xi_npu *p = &s->npus[i];
        if (p->n_chips < 0 || p->n_chips > XI_NPU_MAX_CHIPS) fuzz_fail("chips %d", p->n_chips);
        if (!memchr(p->name, 0, sizeof p->name) || !memchr(p->health, 0, sizeof p->health))
            fuzz_fail("npu %d strings not terminated", i);
        for (int c = 0; c < p->n_chips; c++)
            if (!memchr(p->chips[c].bus_id, 0, sizeof p->chips[c].bus_id))
                fuzz_fail("bus id not terminated");
    }
}

static int sign(int x) { return (x > 0) - (x < 0); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) return 0;
    int mode = data[0] % 3;
    char *parts[N_ROOT + 1];
    size_t lens[N_ROOT + 1];
    if (mode == 0) {
        char *text = malloc(size);
        memcpy(text, data + 1, size - 1);
        text[size - 1] = 0;
        xi_npu_smi s;
        char err[256] = "";
        int n = xi_npu_smi_parse(text, &s, err, sizeof err);
        if (n < 0 && !err[0]) fuzz_fail("rejected without a reason");
        check_smi(n, &s);
        free(text);
    } else if (mode == 1) {
        int n = fuzz_split(data + 1, size - 1, parts, lens, N_ROOT + 1);
        for (int i = 0; i < N_ROOT; i++)
            fuzz_write(root_files[i], i < n ? parts[i] : NULL, i < n ? lens[i] : (size_t)-1);
        xi_env *e = calloc(1, sizeof *e);
        xi_env_probe_os(&e->os, fuzz_dir());
        xi_env_probe_cpu(&e->cpu, fuzz_dir());
        xi_env_ascend_opts o = {.root = fuzz_dir(), .npu_smi_text = n > N_ROOT ? parts[N_ROOT] : NULL};
        xi_env_probe_ascend(&e->ascend, &o);
        if (e->ascend.npu_smi_found) check_smi(e->ascend.smi.n_npus, &e->ascend.smi);
        if (!memchr(e->os.label, 0, sizeof e->os.label) || !memchr(e->cpu.model, 0, sizeof e->cpu.model))
            fuzz_fail("probe strings not terminated");
        xi_env_report *r = calloc(1, sizeof *r);
        xi_env_evaluate(e, r);
        if (r->n < 0 || r->n > XI_ENV_MAX_CHECKS) fuzz_fail("%d checks", r->n);
        free(r);
        free(e);
        fuzz_parts_free(parts, n);
    } else {
        int n = fuzz_split(data + 1, size - 1, parts, lens, 2);
        const char *a = parts[0], *b = n > 1 ? parts[1] : "8.0.0";
        int ok1 = 0, ok2 = 0, ok3 = 0;
        int ab = xi_cann_version_cmp(a, b, &ok1), ba = xi_cann_version_cmp(b, a, &ok2);
        int aa = xi_cann_version_cmp(a, a, &ok3);
        if (ok1 != ok2) fuzz_fail("ok differs with argument order");
        if (ok1 && sign(ab) != -sign(ba)) fuzz_fail("cmp(%s, %s) not antisymmetric", a, b);
        if (ok3 && aa != 0) fuzz_fail("cmp(%s, itself) = %d", a, aa);
        char note[200];
        (void)xi_ascend_pair(a, b, note, sizeof note);
        (void)xi_torch_npu_cann(a);
        (void)xi_vllm_ascend_cann(b);
        fuzz_parts_free(parts, n);
    }
    return 0;
}

/* cli/env: `xinfer env` — is this machine ready to serve? Prints one line per check
 * (✔ ok, ! warning, ✘ failure, · information) and a verdict, or the same as JSON.
 * Exit 0 when xinfer can serve on this CPU, 1 when it cannot or the arguments are wrong.
 * --root and --npu-smi-output make a saved tree and a saved npu-smi output stand in for the
 * machine, which is how the tests and an engineer with a customer's dump use it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "ops/env.h"
#include "ops/rootfs.h"
#include "xinfer.h"

/* The kernel dispatcher may not be linked into every build: resolve it weakly. */
#pragma weak xi_kernels_default_name

static void usage(FILE *f) {
    fprintf(f,
            "usage: xinfer env [--json] [--root DIR] [--npu-smi-output FILE] [--no-python]\n\n"
            "Checks the OS, CPU (SIMD level, cores, NUMA, memory) and the Ascend stack (driver,\n"
            "CANN toolkit, /dev/davinci*, npu-smi) and says whether xinfer can serve here.\n\n"
            "  --json                 machine-readable report\n"
            "  --root DIR             read every file under DIR instead of / (no commands are run)\n"
            "  --npu-smi-output FILE  parse a saved `npu-smi info` output instead of running it\n"
            "  --no-python            skip the optional torch/torch_npu/vllm-ascend version check\n\n"
            "Exit status: 0 when xinfer can run on this CPU, 1 when it cannot (32-bit CPU, less\n"
            "than 2 GiB of memory) or on bad arguments. Ascend findings are warnings.\n");
}

static char *run_npu_smi(void) {
    FILE *f = popen("npu-smi info 2>/dev/null", "r");
    if (!f) return NULL;
    xi_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) xi_buf_append(&b, chunk, n);
    pclose(f);
    return b.data;
}

static const char *mark(xi_check_status s) {
    switch (s) {
    case XI_CHECK_OK: return "✔";
    case XI_CHECK_WARN: return "!";
    case XI_CHECK_FAIL: return "✘";
    default: return "·";
    }
}

static json_t *json_npus(const xi_npu_smi *s) {
    json_t *arr = json_array();
    for (int i = 0; i < s->n_npus; i++) {
        const xi_npu *n = &s->npus[i];
        json_t *chips = json_array();
        for (int c = 0; c < n->n_chips; c++) {
            const xi_npu_chip *ch = &n->chips[c];
            json_array_append_new(chips, json_pack("{s:i, s:i, s:s, s:I, s:I}", "chip", ch->chip,
                                                   "device", ch->device, "bus_id", ch->bus_id,
                                                   "memory_used_mb", (json_int_t)ch->mem_used_mb,
                                                   "memory_total_mb", (json_int_t)ch->mem_total_mb));
        }
        json_array_append_new(arr, json_pack("{s:i, s:s, s:s, s:i, s:I, s:I, s:o}", "id", n->id, "name",
                                             n->name, "health", n->health, "chip_count", n->n_chips,
                                             "memory_used_mb", (json_int_t)n->mem_used_mb,
                                             "memory_total_mb", (json_int_t)n->mem_total_mb,
                                             "chips", chips));
    }
    return arr;
}

static json_t *json_report(const xi_env *e, const xi_env_report *r) {
    static const char *const families[] = {"unknown", "other", "kylin", "uos", "openeuler"};
    static const char *const pairs[] = {"none", "documented", "rule_of_thumb", "known_bad", "unknown"};
    const xi_env_os *o = &e->os;
    const xi_env_cpu *c = &e->cpu;
    const xi_env_ascend *a = &e->ascend;
    json_t *os = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b}", "family",
                           families[o->family], "id", o->id, "name", o->name, "version_id",
                           o->version_id, "major", o->major, "minor", o->minor, "edition", o->edition,
                           "pretty_name", o->pretty, "label", o->label, "kernel", o->kernel,
                           "ascend_listed", o->ascend_listed);
    json_t *feat = json_pack("{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b}", "neon",
                             c->asimd, "asimddp", c->asimddp, "asimdhp", c->asimdhp, "sve", c->sve,
                             "i8mm", c->i8mm, "bf16", c->bf16, "avx2", c->avx2, "fma", c->fma, "f16c",
                             c->f16c, "avx512f", c->avx512f, "avx512_vnni", c->avx512_vnni,
                             "avx512_bf16", c->avx512_bf16);
    char impl[16], part[16];
    snprintf(impl, sizeof impl, "0x%02x", c->implementer);
    snprintf(part, sizeof part, "0x%03x", c->part);
    json_t *cpu = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:o, s:s, s:s}", "arch", c->arch,
                            "model", c->model, "implementer", impl, "part", part, "cpus", c->n_cpus,
                            "numa_nodes", c->n_numa, "memory_bytes", (json_int_t)c->mem_total,
                            "memory_available_bytes", (json_int_t)c->mem_available, "features", feat,
                            "kernels_implied", c->kernels, "kernels",
                            e->kernels_dispatch ? e->kernels_dispatch : c->kernels);
    json_t *driver = a->driver_found
                         ? json_pack("{s:s, s:s, s:s, s:s}", "path", a->driver_path, "version",
                                     a->driver_version, "innerversion", a->driver_inner,
                                     "compatible_version", a->driver_compat)
                         : json_null();
    json_t *toolkit = a->toolkit_found
                          ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "path", a->toolkit_path,
                                      "layout", a->toolkit_layout, "version", a->toolkit_version,
                                      "innerversion", a->toolkit_inner, "source", a->toolkit_source,
                                      "ops_package", a->ops_package)
                          : json_null();
    json_t *ascend = json_pack("{s:o, s:o, s:i, s:s, s:o, s:s, s:s}", "driver", driver, "toolkit",
                               toolkit, "davinci_devices", a->n_davinci, "npu_smi_version",
                               a->npu_smi_found ? a->smi.version : "", "npus", json_npus(&a->smi),
                               "driver_toolkit_pair", pairs[a->pair], "pair_note", a->pair_note);
    json_t *python = e->python.probed
                         ? json_pack("{s:b, s:s, s:s, s:s, s:s}", "optional", 1, "torch", e->python.torch,
                                     "torch_npu", e->python.torch_npu, "vllm", e->python.vllm,
                                     "vllm_ascend", e->python.vllm_ascend)
                         : json_null();
    json_t *checks = json_array(), *flags = json_array();
    for (int i = 0; i < r->n; i++) {
        const xi_env_check *k = &r->checks[i];
        json_array_append_new(checks, json_pack("{s:s, s:s, s:s}", "id", k->id, "status",
                                                xi_check_status_name(k->status), "message", k->msg));
        if (k->status == XI_CHECK_WARN || k->status == XI_CHECK_FAIL)
            json_array_append_new(flags, json_string(k->id));
    }
    return json_pack("{s:s, s:b, s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "verdict", r->verdict, "can_run",
                     r->can_run, "exit_code", r->can_run ? 0 : 1, "os", os, "cpu", cpu, "ascend",
                     ascend, "python", python, "checks", checks, "flags", flags);
}

int cmd_env(int argc, char **argv) {
    const char *root = NULL, *smi_file = NULL, *v;
    int as_json = 0, python = 1;
    for (int i = 1; i < argc; i++) {
        int got;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--no-python")) {
            python = 0;
        } else if ((got = xi_arg_value(argc, argv, &i, "--root", &v)) != 0) {
            if (got < 0) goto missing;
            root = v;
        } else if ((got = xi_arg_value(argc, argv, &i, "--npu-smi-output", &v)) != 0) {
            if (got < 0) goto missing;
            smi_file = v;
        } else {
            fprintf(stderr, "xinfer env: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 1;
        }
        continue;
    missing:
        fprintf(stderr, "xinfer env: %s needs a value\n", argv[i]);
        return 1;
    }
    if (root && !xi_dir_exists(root)) {
        fprintf(stderr, "xinfer env: --root %s: not a directory\n", root);
        return 1;
    }

    char err[256] = "";
    char *smi_text = NULL;
    if (smi_file) {
        smi_text = xi_read_file(smi_file, NULL, err, sizeof err);
        if (!smi_text) {
            fprintf(stderr, "xinfer env: --npu-smi-output: %s\n", err);
            return 1;
        }
        xi_npu_smi probe;
        if (xi_npu_smi_parse(smi_text, &probe, err, sizeof err) < 0) {
            fprintf(stderr, "xinfer env: %s: %s\n", smi_file, err);
            free(smi_text);
            return 1;
        }
    } else if (!root && xi_on_path("npu-smi")) {
        smi_text = run_npu_smi();
    }

    xi_env *e = xi_calloc(1, sizeof *e);
    xi_env_report *r = xi_calloc(1, sizeof *r);
    if (!e || !r) {
        fprintf(stderr, "xinfer env: out of memory\n");
        return 1;
    }
    xi_env_probe_os(&e->os, root);
    xi_env_probe_cpu(&e->cpu, root);
    xi_env_ascend_opts ao = {root, getenv("ASCEND_TOOLKIT_HOME"), getenv("ASCEND_HOME_PATH"),
                             getenv("HOME"), smi_text};
    xi_env_probe_ascend(&e->ascend, &ao);
    /* The python probe and the dispatcher describe this machine, never a saved tree. */
    if (!root && python) xi_env_probe_python(&e->python);
    if (!root && xi_kernels_default_name) e->kernels_dispatch = xi_kernels_default_name();
    if (!root) xi_env_probe_mpi(&e->mpi, "/proc/self/exe");
    xi_env_evaluate(e, r);

    if (as_json) {
        json_t *j = json_report(e, r);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s) puts(s);
        free(s);
        json_decref(j);
    } else {
        printf("xinfer env%s%s\n\n", root ? " --root " : "", root ? root : "");
        for (int i = 0; i < r->n; i++) printf("  %s %s\n", mark(r->checks[i].status), r->checks[i].msg);
        printf("\n%s\n", r->verdict);
    }
    int rc = r->can_run ? 0 : 1;
    free(smi_text);
    free(e);
    free(r);
    return rc;
}

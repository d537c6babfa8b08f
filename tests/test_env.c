/* xinfer env: every fixture tree under tests/fixtures/env stands in for a machine through
 * --root, with saved npu-smi outputs (texts from reference ascend.md §3). */
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/base.h"
#include "ops/env.h"
#include "test.h"
#include "xinfer.h"

#define FIX "tests/fixtures/env/"

static char *smi_text(const char *name) {
    char path[256];
    snprintf(path, sizeof path, FIX "npu-smi/%s.txt", name);
    return xi_read_file(path, NULL, NULL, 0);
}

/* Probe a fixture like `xinfer env --root` does, without the environment of the test run. */
static void probe(xi_env *e, xi_env_report *r, const char *tree, const char *smi, const char *tk_home) {
    char root[256];
    snprintf(root, sizeof root, FIX "%s", tree);
    memset(e, 0, sizeof *e);
    char *text = smi ? smi_text(smi) : NULL;
    xi_env_probe_os(&e->os, root);
    xi_env_probe_cpu(&e->cpu, root);
    xi_env_ascend_opts o = {root, tk_home, NULL, NULL, text};
    xi_env_probe_ascend(&e->ascend, &o);
    xi_env_evaluate(e, r);
    free(text);
}

static const xi_env_check *find_check(const xi_env_report *r, const char *id) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->checks[i].id, id)) return &r->checks[i];
    return NULL;
}

static int has_flag(const xi_env_report *r, const char *id) {
    const xi_env_check *c = find_check(r, id);
    return c && (c->status == XI_CHECK_WARN || c->status == XI_CHECK_FAIL);
}

TEST(test_env_kylin_910b3_old_layout_flags_cann_before_8_5_1) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "kylin-v10-910b3", "910b3", NULL);
    CHECK_EQ(e.os.family, XI_OS_KYLIN);
    CHECK_STR(e.os.major, "V10");
    CHECK_STR(e.os.edition, "server");
    CHECK_STR(e.os.release_line, "Kylin Linux Advanced Server release V10 (Lance)");
    CHECK_STR(e.os.kernel, "4.19.90-52.22.v2207.ky10.aarch64");
    CHECK(e.os.ascend_listed);
    CHECK_STR(e.cpu.arch, "aarch64");
    CHECK_EQ(e.cpu.implementer, 0x48);
    CHECK_EQ(e.cpu.part, 0xd01);
    CHECK(strstr(e.cpu.model, "Kunpeng 920") != NULL);
    CHECK_EQ(e.cpu.n_cpus, 16);
    CHECK_EQ(e.cpu.n_numa, 4);
    CHECK_EQ(e.cpu.mem_total, 535822336LL * 1024);
    CHECK(e.cpu.asimd && e.cpu.asimddp && e.cpu.asimdhp);
    CHECK(!e.cpu.sve && !e.cpu.i8mm && !e.cpu.bf16);
    CHECK_STR(e.cpu.kernels, "neon");

    const xi_env_ascend *a = &e.ascend;
    CHECK(a->driver_found);
    CHECK_STR(a->driver_version, "24.1.0");
    CHECK_STR(a->driver_inner, "V100R001C19SPC002B226");
    CHECK(a->toolkit_found);
    CHECK_STR(a->toolkit_version, "8.0.0");
    CHECK_STR(a->toolkit_layout, "ascend-toolkit");
    CHECK_STR(a->toolkit_source, "/usr/local/Ascend/ascend-toolkit/latest/version.cfg");
    CHECK_EQ(a->n_davinci, 2); /* davinci_manager is not a device */
    CHECK(a->npu_smi_found);
    CHECK_STR(a->smi.version, "23.0.7");
    CHECK_EQ(a->smi.n_npus, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(a->smi.npus[i].id, i);
        CHECK_STR(a->smi.npus[i].name, "910B3");
        CHECK_STR(a->smi.npus[i].health, "OK");
        CHECK_EQ(a->smi.npus[i].n_chips, 1);
        CHECK_EQ(a->smi.npus[i].mem_total_mb, 65536); /* the HBM pair, not the DDR "0 / 0" */
    }
    CHECK_EQ(a->smi.npus[0].mem_used_mb, 3338);
    CHECK_STR(a->smi.npus[1].chips[0].bus_id, "0000:C2:00.0");
    CHECK_EQ(a->pair, XI_PAIR_RULE); /* 8.0.x on 24.1.x; the documented pair is 24.1.rc2 */

    CHECK(has_flag(&r, "cann_older_than_8.5.1"));
    CHECK(strstr(find_check(&r, "cann_older_than_8.5.1")->msg, "8.5.1") != NULL);
    CHECK(!has_flag(&r, "driver_toolkit_pair_unknown"));
    CHECK(!has_flag(&r, "no_driver") && !has_flag(&r, "toolkit_without_device"));
    CHECK_EQ(r.n_warn, 1);
    CHECK(r.can_run);
    CHECK(!strncmp(r.verdict, "READY", 5));
}

TEST(test_env_openeuler_cann85_layout_and_unknown_pair_is_not_failure) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "openeuler-910b3-cann85", "910b3", NULL);
    CHECK_EQ(e.os.family, XI_OS_OPENEULER);
    CHECK_STR(e.os.major, "22.03");
    CHECK_EQ(e.cpu.part, 0xd02);
    CHECK(strstr(e.cpu.model, "920B") != NULL);
    CHECK(e.cpu.sve && e.cpu.i8mm && e.cpu.bf16);
    CHECK_STR(e.ascend.toolkit_version, "8.5.1");
    CHECK_STR(e.ascend.toolkit_layout, "cann");
    CHECK_STR(e.ascend.ops_package, "Ascend-cann-910b-ops");
    CHECK_STR(e.ascend.toolkit_source, "/usr/local/Ascend/cann/aarch64-linux/ascend_toolkit_install.info");
    CHECK_STR(e.ascend.driver_version, "25.3.rc1");
    CHECK_EQ(e.ascend.pair, XI_PAIR_UNKNOWN);
    CHECK_EQ(e.ascend.inner_consistent, 1);
    CHECK(has_flag(&r, "driver_toolkit_pair_unknown"));
    CHECK(!has_flag(&r, "cann_older_than_8.5.1"));
    CHECK(find_check(&r, "cann_version") && find_check(&r, "cann_version")->status == XI_CHECK_OK);
    CHECK(r.can_run);
}

TEST(test_env_uos_300i_duo_merges_two_chips_into_one_npu) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "uos-20-300i-duo", "300i-duo", NULL);
    CHECK_EQ(e.os.family, XI_OS_UOS);
    CHECK_STR(e.os.major, "20");
    CHECK_STR(e.os.minor, "1001");
    CHECK_STR(e.os.edition, "server");
    CHECK_STR(e.os.release_line, "UnionTech OS Server release 20 (kongzi)");
    CHECK_STR(e.ascend.toolkit_version, "8.3.RC2");
    CHECK_STR(e.ascend.toolkit_inner, "V100R001C23SPC002B210");
    CHECK_STR(e.ascend.toolkit_layout, "ascend-toolkit");
    CHECK(strstr(e.ascend.toolkit_source, "aarch64-linux/ascend_toolkit_install.info") != NULL);
    const xi_npu_smi *s = &e.ascend.smi;
    CHECK_STR(s->version, "25.2.0");
    CHECK_EQ(s->n_npus, 1);
    CHECK_EQ(s->npus[0].id, 2);
    CHECK_STR(s->npus[0].name, "310P3");
    CHECK_EQ(s->npus[0].n_chips, 2);
    CHECK_EQ(s->npus[0].chips[0].device, 0);
    CHECK_EQ(s->npus[0].chips[1].chip, 1);
    CHECK_EQ(s->npus[0].chips[1].device, 1);
    CHECK_EQ(s->npus[0].chips[0].mem_total_mb, 44280);
    CHECK_EQ(s->npus[0].chips[1].mem_total_mb, 43693);
    CHECK_EQ(s->npus[0].mem_used_mb, 1529 + 1412);
    CHECK_EQ(s->npus[0].mem_total_mb, 44280 + 43693);
    CHECK(has_flag(&r, "cann_older_than_8.5.1"));
    CHECK(has_flag(&r, "driver_toolkit_pair_unknown")); /* 25.2 is outside "8.3.x on 25.0/25.1" */
    CHECK_EQ(r.n_warn, 2);
    CHECK(r.can_run);
}

TEST(test_env_toolkit_home_first_and_toolkit_without_device_or_driver) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "kylin-v11-toolkit-only", NULL, "/opt/cann");
    CHECK_EQ(e.os.family, XI_OS_KYLIN);
    CHECK_STR(e.os.major, "V11");
    CHECK_STR(e.os.edition, "server");
    CHECK_STR(e.cpu.arch, "x86_64");
    CHECK(strstr(e.cpu.model, "Xeon") != NULL);
    CHECK(e.cpu.avx2 && e.cpu.fma && e.cpu.avx512f && e.cpu.avx512bw && e.cpu.avx512vl && e.cpu.avx512_vnni &&
          !e.cpu.avx512_bf16);
    CHECK_STR(e.cpu.kernels, "avx512");
    CHECK(e.ascend.toolkit_found);
    CHECK_STR(e.ascend.toolkit_version, "9.1.0");
    CHECK_STR(e.ascend.toolkit_path, "/opt/cann");
    CHECK(!e.ascend.driver_found);
    CHECK(has_flag(&r, "no_driver"));
    CHECK(has_flag(&r, "toolkit_without_device"));
    CHECK(!has_flag(&r, "cann_older_than_8.5.1"));
    CHECK(r.can_run);

    /* Without $ASCEND_TOOLKIT_HOME the standard paths hold nothing on this tree. */
    probe(&e, &r, "kylin-v11-toolkit-only", NULL, NULL);
    CHECK(!e.ascend.toolkit_found);
    CHECK(find_check(&r, "ascend") && find_check(&r, "ascend")->status == XI_CHECK_INFO);
    CHECK_EQ(r.n_warn, 0);
}

/* The avx512 variant needs AVX-512 F, BW, VL and VNNI beside AVX2 + FMA (kernels/dispatch):
 * a Skylake-SP-like core (F, BW, VL, no VNNI) or one with VNNI but no AVX2 gets what it can run. */
TEST(test_env_avx512_without_vnni_or_avx2_is_not_the_avx512_variant) {
    const char *flags[][2] = {
        {"fpu lm avx2 fma f16c avx512f avx512bw avx512vl avx512cd", "avx2"},
        {"fpu lm avx2 fma f16c avx512f avx512vl avx512_vnni", "avx2"}, /* no BW */
        {"fpu lm fma avx512f avx512bw avx512vl avx512_vnni", "ref"},
        {"fpu lm avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni", "avx512"},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(flags); i++) {
        char dir[512], path[600];
        snprintf(dir, sizeof dir, "%s/r%zu", xi_test_tmpdir(), i);
        snprintf(path, sizeof path, "%s/proc", dir);
        CHECK(mkdir(dir, 0755) == 0 && mkdir(path, 0755) == 0);
        snprintf(path, sizeof path, "%s/proc/cpuinfo", dir);
        FILE *f = fopen(path, "w");
        CHECK(f);
        fprintf(f, "processor\t: 0\nmodel name\t: test\nflags\t\t: %s\n", flags[i][0]);
        fclose(f);
        xi_env_cpu c;
        xi_env_probe_cpu(&c, dir);
        CHECKF(!strcmp(c.kernels, flags[i][1]), "%s: %s, expected %s", flags[i][0], c.kernels, flags[i][1]);
    }
}

TEST(test_env_kylin_desktop_without_dotprod_gets_reference_kernels) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "kylin-v10-desktop-phytium", NULL, NULL);
    CHECK_EQ(e.os.family, XI_OS_KYLIN);
    CHECK_STR(e.os.major, "V10"); /* desktop writes "v10" */
    CHECK_STR(e.os.edition, "desktop");
    CHECK_STR(e.os.minor, "SP1");
    CHECK_STR(e.cpu.model, "Phytium part 0x662");
    CHECK(e.cpu.asimd && !e.cpu.asimddp);
    CHECK_STR(e.cpu.kernels, "ref");
    CHECK(has_flag(&r, "simd"));
    CHECK(has_flag(&r, "memory")); /* 7.5 GiB: a warning, not a failure */
    CHECK_EQ(find_check(&r, "memory")->status, XI_CHECK_WARN);
    CHECK_EQ(e.cpu.n_numa, 0);
    CHECK(r.can_run);
}

TEST(test_env_32bit_cpu_and_1gib_cannot_run) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "armv7-1g", NULL, NULL);
    CHECK_EQ(e.os.family, XI_OS_OTHER);
    CHECK_STR(e.cpu.arch, "armv7l");
    CHECK_EQ(find_check(&r, "cpu_arch")->status, XI_CHECK_FAIL);
    CHECK_EQ(find_check(&r, "memory")->status, XI_CHECK_FAIL);
    CHECK(!r.can_run);
    CHECK(!strncmp(r.verdict, "NOT READY", 9));
}

TEST(test_env_missing_root_files_are_unknown_not_failures) {
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "npu-smi", NULL, NULL); /* a folder with no OS files at all */
    CHECK_EQ(e.os.family, XI_OS_UNKNOWN);
    CHECK_EQ(e.cpu.mem_total, -1);
    CHECK(has_flag(&r, "os") && has_flag(&r, "memory") && has_flag(&r, "cpu_arch"));
    CHECK(r.can_run);
}

TEST(test_npu_smi_skips_process_rows_and_keeps_unhealthy_npu) {
    char *text = smi_text("910b3-busy");
    CHECK(text);
    static xi_npu_smi s;
    int n = xi_npu_smi_parse(text, &s, NULL, 0);
    free(text);
    CHECK_EQ(n, 2); /* the "| 0  0 | 19334 | VLLMWorker_TP |" process row is no NPU */
    CHECK_EQ(s.npus[0].mem_used_mb, 61810);
    CHECK_STR(s.npus[1].health, "Warning");
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "kylin-v10-910b3", "910b3-busy", NULL);
    CHECK(has_flag(&r, "npu_health"));
}

TEST(test_npu_smi_old_310p_layout_non_contiguous_ids) {
    char *text = smi_text("310p-old");
    CHECK(text);
    static xi_npu_smi s;
    int n = xi_npu_smi_parse(text, &s, NULL, 0);
    free(text);
    CHECK_EQ(n, 2);
    CHECK_EQ(s.npus[0].id, 0);
    CHECK_EQ(s.npus[1].id, 64);
    CHECK_EQ(s.npus[0].mem_used_mb, 3841);
    CHECK_EQ(s.npus[0].mem_total_mb, 21527);
    CHECK_EQ(s.npus[1].mem_used_mb, 1460); /* "1460/ 21527": no blank before the slash */
    CHECK_EQ(s.npus[1].chips[0].device, 1);
    char err[128] = "";
    CHECK_EQ(xi_npu_smi_parse("NAME=\"Kylin\"\n", &s, err, sizeof err), -1);
    CHECK(strstr(err, "npu-smi") != NULL);
}

TEST(test_cann_versions_order_rc_before_release) {
    const char *order[] = {"7.0.0", "8.0.T63", "8.0.RC1", "8.0.RC2.alpha002", "8.0.RC2", "8.0.RC3",
                           "8.0.0", "8.1.RC1", "8.3.RC2", "8.5.0", "8.5.1", "9.0.1", "9.1.0"};
    for (size_t i = 0; i + 1 < XI_ARRAY_LEN(order); i++) {
        int ok = 0;
        CHECKF(xi_cann_version_cmp(order[i], order[i + 1], &ok) < 0 && ok, "%s < %s", order[i], order[i + 1]);
        CHECKF(xi_cann_version_cmp(order[i + 1], order[i], &ok) > 0 && ok, "%s > %s", order[i + 1], order[i]);
    }
    int ok = 1;
    CHECK_EQ(xi_cann_version_cmp("8.5.1", "8.5.1", &ok), 0);
    CHECK(ok);
    xi_cann_version_cmp("latest", "8.5.1", &ok);
    CHECK(!ok);
    xi_cann_version_cmp("8.x.1", "8.5.1", &ok);
    CHECK(!ok);
}

TEST(test_driver_toolkit_pairs_documented_rule_bad_unknown) {
    char note[200];
    CHECK_EQ(xi_ascend_pair("24.1.rc2", "8.0.RC3", note, sizeof note), XI_PAIR_DOCUMENTED);
    CHECK_EQ(xi_ascend_pair("25.0.rc1.1", "8.2.RC1", note, sizeof note), XI_PAIR_DOCUMENTED);
    CHECK_EQ(xi_ascend_pair("23.0.3", "7.0.0", note, sizeof note), XI_PAIR_DOCUMENTED);
    CHECK_EQ(xi_ascend_pair("24.1.0", "8.3.RC1", note, sizeof note), XI_PAIR_KNOWN_BAD);
    CHECK(strstr(note, "Invalid opp version") != NULL);
    CHECK_EQ(xi_ascend_pair("25.1.0", "8.3.RC2", note, sizeof note), XI_PAIR_RULE);
    CHECK_STR(note, "rule of thumb: CANN 8.3.x runs on driver 25.1.x");
    CHECK_EQ(xi_ascend_pair("24.1.rc1", "8.2.RC1", note, sizeof note), XI_PAIR_UNKNOWN);
    CHECK_EQ(xi_ascend_pair("", "8.2.RC1", note, sizeof note), XI_PAIR_NONE);
}

TEST(test_python_stack_matrix_flags_mismatched_cann) {
    CHECK_STR(xi_torch_npu_cann("2.5.1"), "8.1.RC1");
    CHECK_STR(xi_torch_npu_cann("2.10.0.post4"), "9.1.0");
    CHECK_STR(xi_vllm_ascend_cann("v0.18.0"), "8.5.1");
    CHECK(xi_torch_npu_cann("1.0") == NULL);
    static xi_env e;
    static xi_env_report r;
    probe(&e, &r, "kylin-v10-910b3", NULL, NULL); /* CANN 8.0.0 */
    e.python.probed = 1;
    strcpy(e.python.torch_npu, "2.5.1");
    strcpy(e.python.vllm_ascend, "0.8.4rc2");
    xi_env_evaluate(&e, &r);
    CHECK(has_flag(&r, "python_torch_npu"));             /* built for 8.1.RC1 */
    CHECK_EQ(find_check(&r, "python_vllm_ascend")->status, XI_CHECK_OK); /* built for 8.0.0 */
    CHECK(strstr(find_check(&r, "python")->msg, "optional") != NULL);
}

/* ---- the CLI ----------------------------------------------------------------------------- */

static json_t *run_json(const char *args, int *rc) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env -u ASCEND_TOOLKIT_HOME -u ASCEND_HOME_PATH %s env --json %s",
             xi_test_bin(), args);
    char *out = NULL;
    *rc = xi_test_run(cmd, &out);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return j;
}

static int json_flag(json_t *j, const char *id) {
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "flags"), i, v) if (!strcmp(json_string_value(v), id)) return 1;
    return 0;
}

TEST(test_env_cli_json_on_910b3_fixture) {
    int rc;
    json_t *j = run_json("--root " FIX "kylin-v10-910b3 --npu-smi-output " FIX "npu-smi/910b3.txt", &rc);
    CHECK(j);
    CHECK_EQ(rc, 0);
    CHECK(json_is_true(json_object_get(j, "can_run")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "os"), "family")), "kylin");
    json_t *cpu = json_object_get(j, "cpu");
    CHECK_STR(json_string_value(json_object_get(cpu, "part")), "0xd01");
    CHECK_STR(json_string_value(json_object_get(cpu, "kernels")), "neon"); /* --root: never this host's */
    CHECK(json_is_true(json_object_get(json_object_get(cpu, "features"), "asimddp")));
    json_t *asc = json_object_get(j, "ascend");
    CHECK_STR(json_string_value(json_object_get(json_object_get(asc, "toolkit"), "version")), "8.0.0");
    CHECK_STR(json_string_value(json_object_get(json_object_get(asc, "driver"), "version")), "24.1.0");
    json_t *npus = json_object_get(asc, "npus");
    CHECK_EQ(json_array_size(npus), 2);
    CHECK_EQ(json_integer_value(json_object_get(json_array_get(npus, 1), "memory_total_mb")), 65536);
    CHECK(json_is_null(json_object_get(j, "python"))); /* skipped under --root */
    CHECK(json_flag(j, "cann_older_than_8.5.1"));
    CHECK(!json_flag(j, "no_driver"));
    json_decref(j);
}

TEST(test_env_cli_exit_codes_and_bad_arguments) {
    int rc;
    json_t *j = run_json("--root " FIX "armv7-1g", &rc);
    CHECK(j);
    CHECK_EQ(rc, 1);
    CHECK(json_is_false(json_object_get(j, "can_run")));
    CHECK(json_flag(j, "memory") && json_flag(j, "cpu_arch"));
    json_decref(j);

    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s env --root " FIX "uos-20-300i-duo --npu-smi-output " FIX
             "npu-smi/300i-duo.txt", xi_test_bin());
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    CHECK(strstr(out, "✔ OS UOS 20") != NULL);
    CHECK(strstr(out, "! CANN 8.3.RC2 is older than 8.5.1") != NULL);
    CHECK(strstr(out, "2 310P3 OK 2941/87973 MB") != NULL);
    CHECK(strstr(out, "\nREADY") != NULL);
    free(out);

    const char *bad[] = {"--bogus", "--root", "--root /nonexistent/dir",
                         "--root " FIX "armv7-1g --npu-smi-output " FIX "armv7-1g/etc/os-release",
                         "--npu-smi-output /nonexistent"};
    for (size_t i = 0; i < XI_ARRAY_LEN(bad); i++) {
        snprintf(cmd, sizeof cmd, "%s env %s 2>&1", xi_test_bin(), bad[i]);
        out = NULL;
        CHECKF(xi_test_run(cmd, &out) == 1, "xinfer env %s should exit 1", bad[i]);
        CHECKF(out && strstr(out, "xinfer env:"), "xinfer env %s: error line, got: %s", bad[i], out);
        free(out);
    }
}

TEST(test_env_cli_live_machine_reports_dispatcher_variant) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s env --json --no-python", xi_test_bin());
    int rc = xi_test_run(cmd, &out);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    CHECK(j);
    /* exit status and verdict agree, whatever this machine is */
    CHECK_EQ(rc, json_is_true(json_object_get(j, "can_run")) ? 0 : 1);
    CHECK_EQ(rc, json_integer_value(json_object_get(j, "exit_code")));
    /* without --root the variant is the one the kernel dispatcher picks */
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "cpu"), "kernels")),
              xi_kernels_default_name());
    CHECK(json_is_null(json_object_get(j, "python")));
    json_decref(j);
}

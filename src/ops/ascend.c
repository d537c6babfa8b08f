/* ops/ascend: the Ascend software stack as files on disk — driver version.info, the CANN
 * toolkit in both layouts, /dev/davinci* — and the version tables of reference §3–§4.
 * Nothing here loads Ascend libraries: a box without them must be inspectable too. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "ops/env.h"
#include "ops/rootfs.h"

/* ---- versions -------------------------------------------------------------------------- */

/* A CANN release as a sortable key: major.minor.patch, then stage (alpha/test < RC < final),
 * then the RC number, then a pre-release suffix on an RC (8.0.RC2.alpha002 < 8.0.RC2). */
typedef struct { int major, minor, patch, stage, rc, sub; } cann_key;

static int parse_cann(const char *s, cann_key *k) {
    memset(k, 0, sizeof *k);
    char *end;
    k->major = (int)strtol(s, &end, 10);
    if (end == s || *end != '.') return 0;
    s = end + 1;
    k->minor = (int)strtol(s, &end, 10);
    if (end == s) return 0;
    s = end;
    k->stage = 3; /* "8.0" alone reads as a final release */
    if (*s == 0) return 1;
    if (*s++ != '.') return 0;
    if (isdigit((unsigned char)*s)) {
        k->patch = (int)strtol(s, &end, 10);
        s = end;
    } else if (!strncasecmp(s, "RC", 2) && isdigit((unsigned char)s[2])) {
        k->stage = 2;
        k->rc = (int)strtol(s + 2, &end, 10);
        s = end;
    } else if (toupper((unsigned char)*s) == 'T' || !strncasecmp(s, "alpha", 5) ||
               !strncasecmp(s, "beta", 4)) {
        k->stage = 1; /* test builds (8.0.T63) precede the RCs of their line */
        while (*s && *s != '.') s++;
    } else {
        return 0;
    }
    if (*s == '.') {
        s++;
        if (!strncasecmp(s, "alpha", 5) || !strncasecmp(s, "beta", 4)) k->sub = -1;
        else if (isdigit((unsigned char)*s)) k->sub = atoi(s); /* 8.2.RC1.1-style updates */
        else return 0;
    }
    return 1;
}

int xi_cann_version_cmp(const char *a, const char *b, int *ok) {
    cann_key x, y;
    int good = a && b && parse_cann(a, &x) && parse_cann(b, &y);
    if (ok) *ok = good;
    if (!good) return 0;
    int dx[6] = {x.major, x.minor, x.patch, x.stage, x.rc, x.sub};
    int dy[6] = {y.major, y.minor, y.patch, y.stage, y.rc, y.sub};
    for (int i = 0; i < 6; i++)
        if (dx[i] != dy[i]) return dx[i] < dy[i] ? -1 : 1;
    return 0;
}

static int starts_ci(const char *s, const char *prefix) {
    return !strncasecmp(s, prefix, strlen(prefix));
}

/* Length of the "major.minor." prefix of a version ("8.0.0" -> 4, "24.1.rc2" -> 5). */
static int line_len(const char *v) {
    const char *dot = strchr(v, '.');
    dot = dot ? strchr(dot + 1, '.') : NULL;
    return dot ? (int)(dot - v + 1) : (int)strlen(v);
}

/* Pairs recorded by the Ascend PyTorch docs (reference §3.3, zheliuyu/docs-dev package_info.js):
 * same for 910b and 310p. A driver matches when it starts with the listed version. */
static const struct { const char *cann, *driver; } documented_pairs[] = {
    {"8.2.RC1", "25.0.rc1"}, {"8.1.RC1", "24.1.rc2"}, {"8.0.0", "24.1.rc2"},
    {"8.0.RC3", "24.1.rc2"}, {"8.0.RC2", "24.1.rc1"}, {"8.0.RC1", "24.1.rc1"},
    {"7.0.", "23.0.3"},      {"7.0.", "23.0.1"},
};

xi_pair_status xi_ascend_pair(const char *driver, const char *cann, char *note, size_t notelen) {
    if (!driver || !*driver || !cann || !*cann) {
        xi_copy_str(note, notelen, "driver or toolkit missing");
        return XI_PAIR_NONE;
    }
    for (size_t i = 0; i < XI_ARRAY_LEN(documented_pairs); i++) {
        const char *c = documented_pairs[i].cann;
        int cann_match = c[strlen(c) - 1] == '.' ? starts_ci(cann, c) : !strcasecmp(cann, c);
        if (cann_match && starts_ci(driver, documented_pairs[i].driver)) {
            snprintf(note, notelen, "documented pair: CANN %s with driver %s", cann,
                     documented_pairs[i].driver);
            return XI_PAIR_DOCUMENTED;
        }
    }
    /* A user note (reference §3.3): 8.0.x/8.1.x run on 24.0.x/24.1.x, 8.3.x on 25.0.x/25.1.x,
     * and 8.3.RC1 on driver 24.1.0 failed with "Invalid opp version". */
    int cann_80_81 = starts_ci(cann, "8.0.") || starts_ci(cann, "8.1.");
    int cann_83 = starts_ci(cann, "8.3.");
    int drv_24 = starts_ci(driver, "24.0.") || starts_ci(driver, "24.1.");
    int drv_25 = starts_ci(driver, "25.0.") || starts_ci(driver, "25.1.");
    if (cann_83 && starts_ci(driver, "24.")) {
        snprintf(note, notelen, "known bad: CANN 8.3.x on driver 24.x failed (\"Invalid opp version\"); "
                 "use a 25.0/25.1 driver");
        return XI_PAIR_KNOWN_BAD;
    }
    if ((cann_80_81 && drv_24) || (cann_83 && drv_25)) {
        snprintf(note, notelen, "rule of thumb: CANN %.*sx runs on driver %.*sx", line_len(cann), cann,
                 line_len(driver), driver);
        return XI_PAIR_RULE;
    }
    snprintf(note, notelen, "CANN %s with driver %s is in no table known to xinfer", cann, driver);
    return XI_PAIR_UNKNOWN;
}

/* ---- python stack matrix (reference §4.1, §4.2) ---------------------------------------- */

static const struct { const char *version, *cann; } torch_npu_rows[] = {
    {"2.12.0", "9.1.0"},       {"2.11.0", "9.1.0"},       {"2.10.0.post4", "9.1.0"},
    {"2.9.0.post6", "9.1.0"},  {"2.7.1.post8", "9.1.0"},  {"2.9.0.post2", "9.0.0"},
    {"2.8.0.post4", "9.0.0"},  {"2.7.1.post4", "9.0.0"},  {"2.9.0", "8.5.0"},
    {"2.8.0.post2", "8.5.0"},  {"2.7.1.post2", "8.5.0"},  {"2.6.0.post5", "8.5.0"},
    {"2.8.0", "8.3.RC1"},      {"2.7.1", "8.3.RC1"},      {"2.6.0.post3", "8.3.RC1"},
    {"2.1.0.post17", "8.3.RC1"}, {"2.6.0", "8.2.RC1"},    {"2.5.1.post1", "8.2.RC1"},
    {"2.1.0.post13", "8.2.RC1"}, {"2.5.1", "8.1.RC1"},    {"2.4.0.post4", "8.1.RC1"},
    {"2.3.1.post6", "8.1.RC1"}, {"2.1.0.post12", "8.1.RC1"}, {"2.4.0.post2", "8.0.0"},
    {"2.3.1.post4", "8.0.0"},  {"2.1.0.post10", "8.0.0"}, {"2.4.0", "8.0.RC3"},
    {"2.3.1.post2", "8.0.RC3"}, {"2.1.0.post8", "8.0.RC3"}, {"2.3.1", "8.0.RC2"},
    {"2.2.0.post2", "8.0.RC2"}, {"2.1.0.post6", "8.0.RC2"},
};

static const struct { const char *version, *cann; } vllm_ascend_rows[] = {
    {"0.23.0rc1", "9.0.1"}, {"0.23.0", "9.1.0"},   {"0.22.1rc1", "9.0.0"}, {"0.21.0rc1", "9.0.0"},
    {"0.20.2rc1", "9.0.0"}, {"0.19.1rc1", "8.5.1"}, {"0.18.0", "8.5.1"},   {"0.13.0rc1", "8.3.RC2"},
    {"0.13.0", "8.5.0"},    {"0.12.0rc1", "8.3.RC2"}, {"0.11.0", "8.3.RC2"}, {"0.9.1", "8.2.RC1"},
    {"0.8.4rc2", "8.0.0"},  {"0.7.3", "8.1.RC1"},
};

const char *xi_torch_npu_cann(const char *v) {
    if (!v) return NULL;
    for (size_t i = 0; i < XI_ARRAY_LEN(torch_npu_rows); i++)
        if (!strcmp(v, torch_npu_rows[i].version)) return torch_npu_rows[i].cann;
    return NULL;
}

const char *xi_vllm_ascend_cann(const char *v) {
    if (!v) return NULL;
    if (v[0] == 'v') v++;
    for (size_t i = 0; i < XI_ARRAY_LEN(vllm_ascend_rows); i++)
        if (!strcmp(v, vllm_ascend_rows[i].version)) return vllm_ascend_rows[i].cann;
    return NULL;
}

/* ---- driver ---------------------------------------------------------------------------- */

static void probe_driver(xi_env_ascend *a, const char *root) {
    char dir[200] = "/usr/local/Ascend";
    char *inst = xi_rootfs_read(root, "/etc/ascend_install.info");
    if (inst) {
        /* The runtime itself trusts this file for where the driver went. */
        char p[160];
        if (xi_kv_get(inst, "Driver_Install_Path_Param", p, sizeof p) && p[0] == '/')
            xi_copy_str(dir, sizeof dir, p);
        free(inst);
    }
    snprintf(a->driver_path, sizeof a->driver_path, "%s/driver/version.info", dir);
    char *text = xi_rootfs_read(root, a->driver_path);
    if (!text && strcmp(dir, "/usr/local/Ascend")) {
        xi_copy_str(a->driver_path, sizeof a->driver_path, "/usr/local/Ascend/driver/version.info");
        text = xi_rootfs_read(root, a->driver_path);
    }
    if (!text) return;
    a->driver_found = 1;
    if (!xi_kv_get(text, "Version", a->driver_version, sizeof a->driver_version))
        xi_kv_get(text, "package_version", a->driver_version, sizeof a->driver_version);
    xi_kv_get(text, "Innerversion", a->driver_inner, sizeof a->driver_inner);
    xi_kv_get(text, "compatible_version", a->driver_compat, sizeof a->driver_compat);
    free(text);
}

/* ---- toolkit --------------------------------------------------------------------------- */

/* version.cfg: "<component>_running_version=[<inner build>:<CANN version>]" (§3.1). */
static int version_cfg(const char *text, char *out, size_t outlen) {
    static const char *const keys[] = {"toolkit_running_version", "runtime_running_version",
                                       "compiler_running_version", "opp_running_version"};
    char v[128];
    for (size_t i = 0; i < XI_ARRAY_LEN(keys); i++) {
        if (!xi_kv_get(text, keys[i], v, sizeof v)) continue;
        char *colon = strchr(v, ':');
        if (!colon) continue;
        char *close = strchr(colon, ']');
        if (close) *close = 0;
        xi_copy_str(out, outlen, colon + 1);
        return out[0] != 0;
    }
    return 0;
}

/* Look for a toolkit in dir (a path inside root). */
static int probe_toolkit_dir(xi_env_ascend *a, const char *root, const char *dir) {
    static const char *const arches[] = {"aarch64-linux", "x86_64-linux"};
    char path[512], v[64];
    for (size_t i = 0; i < XI_ARRAY_LEN(arches); i++) {
        snprintf(path, sizeof path, "%s/%s/ascend_toolkit_install.info", dir, arches[i]);
        char *text = xi_rootfs_read(root, path);
        if (!text) continue;
        int ok = xi_kv_get(text, "version", v, sizeof v);
        if (ok) {
            xi_copy_str(a->toolkit_version, sizeof a->toolkit_version, v);
            xi_kv_get(text, "innerversion", a->toolkit_inner, sizeof a->toolkit_inner);
            xi_copy_str(a->toolkit_source, sizeof a->toolkit_source, path);
        }
        free(text);
        snprintf(path, sizeof path, "%s/%s/ascend_ops_install.info", dir, arches[i]);
        text = xi_rootfs_read(root, path);
        if (text) {
            xi_kv_get(text, "package_name", a->ops_package, sizeof a->ops_package);
            free(text);
        }
        if (ok) break;
    }
    if (!a->toolkit_version[0]) {
        snprintf(path, sizeof path, "%s/version.cfg", dir);
        char *text = xi_rootfs_read(root, path);
        if (text && version_cfg(text, v, sizeof v)) {
            xi_copy_str(a->toolkit_version, sizeof a->toolkit_version, v);
            xi_copy_str(a->toolkit_source, sizeof a->toolkit_source, path);
        }
        free(text);
    }
    if (!a->toolkit_version[0]) return 0;
    a->toolkit_found = 1;
    xi_copy_str(a->toolkit_path, sizeof a->toolkit_path, dir);
    /* CANN >= 8.5 installs under .../cann (or cann-<ver>) and ships a separate ops package. */
    int new_layout = a->ops_package[0] || strstr(dir, "/cann") != NULL;
    xi_copy_str(a->toolkit_layout, sizeof a->toolkit_layout, new_layout ? "cann" : "ascend-toolkit");
    return 1;
}

static void probe_toolkit(xi_env_ascend *a, const xi_env_ascend_opts *o) {
    /* Order of reference §3.2: the environment first (set_env.sh was sourced), then the
     * system-wide layouts, new before old, then a non-root install in $HOME. */
    const char *env_dirs[] = {o->toolkit_home, o->home_path};
    for (size_t i = 0; i < XI_ARRAY_LEN(env_dirs); i++)
        if (env_dirs[i] && *env_dirs[i] && probe_toolkit_dir(a, o->root, env_dirs[i])) return;
    if (probe_toolkit_dir(a, o->root, "/usr/local/Ascend/cann")) return;
    if (probe_toolkit_dir(a, o->root, "/usr/local/Ascend/ascend-toolkit/latest")) return;
    if (o->home && *o->home) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/Ascend/cann", o->home);
        if (probe_toolkit_dir(a, o->root, dir)) return;
        snprintf(dir, sizeof dir, "%s/Ascend/ascend-toolkit/latest", o->home);
        probe_toolkit_dir(a, o->root, dir);
    }
}

/* "V100R001C23SPC002B210" -> "C23"; 0 when absent. */
static int inner_release(const char *inner, char *out, size_t outlen) {
    const char *c = inner ? strstr(inner, "R001C") : NULL;
    if (!c) return 0;
    c += 4;
    size_t n = 1;
    while (isdigit((unsigned char)c[n])) n++;
    if (n < 2 || n >= outlen) return 0;
    memcpy(out, c, n);
    out[n] = 0;
    return 1;
}

void xi_env_probe_ascend(xi_env_ascend *a, const xi_env_ascend_opts *o) {
    memset(a, 0, sizeof *a);
    a->inner_consistent = -1;
    probe_driver(a, o->root);
    probe_toolkit(a, o);
    a->n_davinci = xi_rootfs_count_numbered(o->root, "/dev", "davinci"); /* not davinci_manager */
    if (o->npu_smi_text && xi_npu_smi_parse(o->npu_smi_text, &a->smi, NULL, 0) >= 0)
        a->npu_smi_found = 1;
    a->pair = xi_ascend_pair(a->driver_version, a->toolkit_version, a->pair_note, sizeof a->pair_note);
    /* An inference from the samples, not a documented rule (§3.3): the toolkit's C<NN>
     * release should be listed in the driver's compatible_version. */
    char rel[16], tag[24];
    if (a->driver_compat[0] && inner_release(a->toolkit_inner, rel, sizeof rel)) {
        snprintf(tag, sizeof tag, "R001%s]", rel);
        a->inner_consistent = strstr(a->driver_compat, tag) != NULL;
    }
}

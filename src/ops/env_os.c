/* ops/env_os: which operating system and kernel. 信创 systems are recognised by ID in
 * os-release (reference §3.5): Kylin server is RPM-based (ID_LIKE rhel/fedora or "Advanced
 * Server" in NAME), Kylin desktop is Debian-based; UOS keeps its edition in /etc/os-version. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include "ops/env.h"
#include "ops/rootfs.h"

static void first_line(const char *text, char *out, size_t outlen) {
    out[0] = 0;
    if (!text) return;
    size_t n = strcspn(text, "\r\n");
    if (n >= outlen) n = outlen - 1;
    memcpy(out, text, n);
    out[n] = 0;
}

static void upper_v(char *s) {
    /* Kylin desktop writes "v10", server "V10": compare one spelling. */
    if (s[0] == 'v') s[0] = 'V';
}

/* Huawei's OS list for 300I Duo / 300I Pro / 800I A2 (reference §3.5). */
static int ascend_listed(const xi_env_os *o) {
    switch (o->family) {
    case XI_OS_KYLIN: return !strcmp(o->major, "V10") || !strcmp(o->major, "V11");
    case XI_OS_UOS: return !strcmp(o->major, "20");
    case XI_OS_OPENEULER: return !strncmp(o->major, "22.03", 5) || !strncmp(o->major, "24.03", 5);
    default: break;
    }
    if (!strcasecmp(o->id, "ubuntu"))
        return !strcmp(o->version_id, "20.04") || !strcmp(o->version_id, "22.04") ||
               !strcmp(o->version_id, "24.04");
    if (!strcasecmp(o->id, "euleros") || !strcasecmp(o->id, "ctyunos") ||
        !strcasecmp(o->id, "bclinux"))
        return 1;
    return 0;
}

static void detect_edition(xi_env_os *o, const char *text) {
    char us[128] = "";
    xi_kv_get(text, "VERSION_US", us, sizeof us);
    if (xi_contains_ci(o->name, "desktop") || xi_contains_ci(o->pretty, "desktop") ||
        xi_contains_ci(us, "desktop"))
        xi_copy_str(o->edition, sizeof o->edition, "desktop");
    else if (xi_contains_ci(o->name, "server") || xi_contains_ci(o->pretty, "server") ||
             xi_contains_ci(us, "server"))
        xi_copy_str(o->edition, sizeof o->edition, "server");
    else if (o->family == XI_OS_KYLIN && xi_contains_ci(o->id_like, "debian"))
        xi_copy_str(o->edition, sizeof o->edition, "desktop"); /* Kylin desktop is Debian-based */
    else if (o->family == XI_OS_KYLIN && (xi_contains_ci(o->id_like, "rhel") ||
                                          xi_contains_ci(o->id_like, "fedora")))
        xi_copy_str(o->edition, sizeof o->edition, "server");
    else if (o->family == XI_OS_UOS && !strcasecmp(o->name, "uos"))
        xi_copy_str(o->edition, sizeof o->edition, "desktop"); /* desktop images: NAME="uos" */
}

void xi_env_probe_os(xi_env_os *o, const char *root) {
    memset(o, 0, sizeof *o);
    char *text = xi_rootfs_read(root, "/etc/os-release");
    if (!text) text = xi_rootfs_read(root, "/usr/lib/os-release");
    if (text) {
        xi_kv_get(text, "ID", o->id, sizeof o->id);
        xi_kv_get(text, "ID_LIKE", o->id_like, sizeof o->id_like);
        xi_kv_get(text, "NAME", o->name, sizeof o->name);
        xi_kv_get(text, "VERSION_ID", o->version_id, sizeof o->version_id);
        xi_kv_get(text, "PRETTY_NAME", o->pretty, sizeof o->pretty);
        o->family = !strcasecmp(o->id, "kylin")       ? XI_OS_KYLIN
                    : !strcasecmp(o->id, "uos")       ? XI_OS_UOS
                    : !strcasecmp(o->id, "openeuler") ? XI_OS_OPENEULER
                                                      : XI_OS_OTHER;
        xi_copy_str(o->major, sizeof o->major, o->version_id);
        upper_v(o->major);
        detect_edition(o, text);
    }

    char *rel = NULL;
    if (o->family == XI_OS_KYLIN) rel = xi_rootfs_read(root, "/etc/kylin-release");
    if (o->family == XI_OS_UOS) rel = xi_rootfs_read(root, "/etc/uos-release");
    first_line(rel, o->release_line, sizeof o->release_line);
    free(rel);
    if (o->family == XI_OS_KYLIN) {
        /* The service pack lives in the release line or in PRETTY_NAME ("Kylin V10 SP1"). */
        const char *sp = strstr(o->pretty, "SP");
        if (!sp) sp = strstr(o->release_line, "SP");
        if (sp && isdigit((unsigned char)sp[2])) {
            size_t n = 2;
            while (isdigit((unsigned char)sp[n])) n++;
            if (n < sizeof o->minor) memcpy(o->minor, sp, n), o->minor[n] = 0;
        }
    }
    if (o->family == XI_OS_UOS) {
        char *ver = xi_rootfs_read(root, "/etc/os-version");
        char product[32] = "";
        if (ver) xi_kv_get(ver, "MinorVersion", o->minor, sizeof o->minor);
        /* os-release may not name the edition; os-version's ProductType does. */
        if (ver && !o->edition[0] && xi_kv_get(ver, "ProductType", product, sizeof product))
            xi_copy_str(o->edition, sizeof o->edition, !strcasecmp(product, "Server") ? "server" : "desktop");
        free(ver);
    }

    static const char *const family_names[] = {"unknown", "", "Kylin", "UOS", "openEuler"};
    if (o->family == XI_OS_UNKNOWN)
        xi_copy_str(o->label, sizeof o->label, "unknown (no /etc/os-release)");
    else if (o->family == XI_OS_OTHER)
        xi_copy_str(o->label, sizeof o->label, o->pretty[0] ? o->pretty : o->name);
    else
        snprintf(o->label, sizeof o->label, "%s %s%s%s%s%s (%.100s)", family_names[o->family],
                 o->major, o->minor[0] ? " " : "", o->minor, o->edition[0] ? " " : "",
                 o->edition, o->pretty[0] ? o->pretty : o->name);
    o->ascend_listed = ascend_listed(o);
    free(text);

    char *kernel = xi_rootfs_read(root, "/proc/sys/kernel/osrelease");
    if (kernel) {
        first_line(kernel, o->kernel, sizeof o->kernel);
        free(kernel);
    } else if (!root || !*root || !strcmp(root, "/")) {
        struct utsname u;
        if (uname(&u) == 0) xi_copy_str(o->kernel, sizeof o->kernel, u.release);
    }
}

/* ops/env: what `xinfer env` finds on a machine — OS, CPU, memory, the Ascend stack — and the
 * checks it derives from that. Probing reads files under an optional root (see rootfs.h) so a
 * saved tree can stand in for the machine; nothing here decides an exit code.
 * Not thread-safe per xi_env; separate xi_env values may be probed from any thread. */
#ifndef XI_OPS_ENV_H
#define XI_OPS_ENV_H

#include <stddef.h>
#include <stdint.h>

/* ---- operating system ------------------------------------------------------------------ */

typedef enum { XI_OS_UNKNOWN, XI_OS_OTHER, XI_OS_KYLIN, XI_OS_UOS, XI_OS_OPENEULER } xi_os_family;

typedef struct xi_env_os {
    xi_os_family family;
    char id[32], id_like[64], name[96], version_id[32], pretty[128];
    char edition[16];           /* "server", "desktop" or "" when not told */
    char major[16];             /* normalised release: "V10", "V11", "20", "22.03" */
    char minor[32];             /* UOS MinorVersion (/etc/os-version), Kylin SP or "" */
    char release_line[160];     /* first line of /etc/kylin-release or /etc/uos-release */
    char label[192];            /* "Kylin V10 server (Kylin Linux Advanced Server V10 (Lance))" */
    char kernel[128];           /* "4.19.90-52.22.v2207.ky10.aarch64", "" when unknown */
    int ascend_listed;          /* on Huawei's OS list for 300I Duo / 300I Pro / 800I A2 */
} xi_env_os;

/* Fills o from root/etc/os-release (or /usr/lib/os-release), kylin-release, uos-release,
 * os-version and proc/sys/kernel/osrelease; with no root the kernel falls back to uname. */
void xi_env_probe_os(xi_env_os *o, const char *root);

/* ---- CPU and memory -------------------------------------------------------------------- */

typedef struct xi_env_cpu {
    char arch[16];              /* "aarch64", "x86_64", ... ("" unknown) */
    char model[128];            /* "Kunpeng 920 (HiSilicon TSV110)", x86 "model name" */
    unsigned implementer, part; /* ARM MIDR fields from /proc/cpuinfo, 0 when absent */
    int n_cpus;                 /* logical CPUs ("processor" entries) */
    int n_numa;                 /* /sys/devices/system/node/node*, 0 when unknown */
    int64_t mem_total;          /* bytes, -1 when unknown */
    int64_t mem_available;      /* bytes, -1 when unknown */
    /* SIMD features xinfer's kernels use (1 = present in Features / flags) */
    int asimd, asimddp, asimdhp, sve, i8mm, bf16;
    int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512_vnni, avx512_bf16;
    char kernels[16];           /* kernel variant these features imply: avx512/avx2/neon/ref */
} xi_env_cpu;

/* root NULL: the kernel's own files and uname for the architecture. */
void xi_env_probe_cpu(xi_env_cpu *c, const char *root);
/* Name of a CPU from its MIDR implementer/part, or NULL when the table does not know it. */
const char *xi_cpu_part_name(unsigned implementer, unsigned part);

/* ---- Ascend ---------------------------------------------------------------------------- */

#define XI_NPU_MAX_CHIPS 4
#define XI_NPU_MAX 64

typedef struct xi_npu_chip {
    int chip;                   /* chip index inside the NPU (restarts at 0) */
    int device;                 /* logical device id (310P / A3 second column), -1 absent */
    char bus_id[24];
    int64_t mem_used_mb, mem_total_mb; /* HBM when npu-smi shows it, else the DDR pair */
} xi_npu_chip;

typedef struct xi_npu {
    int id;                     /* NPU id from the header row (may be non-contiguous) */
    char name[32];              /* "910B3", "310P3", "Ascend910" */
    char health[16];            /* "OK", "Warning", ... */
    int n_chips;
    xi_npu_chip chips[XI_NPU_MAX_CHIPS];
    int64_t mem_used_mb, mem_total_mb; /* sums over the chips */
} xi_npu;

typedef struct xi_npu_smi {
    char version[32];           /* driver version printed on line 2 */
    int n_npus;
    xi_npu npus[XI_NPU_MAX];
} xi_npu_smi;

/* Parse `npu-smi info` text (910B, 310P and A3 layouts). Returns the NPU count, or -1 when the
 * text is not an npu-smi table (err says why). */
int xi_npu_smi_parse(const char *text, xi_npu_smi *out, char *err, size_t errlen);

typedef enum {
    XI_PAIR_NONE,               /* driver or toolkit missing: nothing to compare */
    XI_PAIR_DOCUMENTED,         /* a pair the Ascend docs list */
    XI_PAIR_RULE,               /* inside the published rule of thumb (major lines agree) */
    XI_PAIR_KNOWN_BAD,          /* a pair reported to fail */
    XI_PAIR_UNKNOWN,            /* outside every table: not a failure, just not known */
} xi_pair_status;

typedef struct xi_env_ascend {
    int driver_found;
    char driver_path[256];      /* the version.info read, as inside the root */
    char driver_version[32];    /* Version= */
    char driver_inner[64];      /* Innerversion= */
    char driver_compat[256];    /* compatible_version= list */
    int toolkit_found;
    char toolkit_path[256];     /* install folder, as inside the root */
    char toolkit_layout[16];    /* "cann" (>= 8.5 layout) or "ascend-toolkit" */
    char toolkit_version[32];   /* CANN release: "8.0.0", "8.3.RC2", "8.5.1" */
    char toolkit_inner[64];     /* innerversion= (V100R001C23...) when known */
    char toolkit_source[256];   /* file the version came from */
    char ops_package[64];       /* ascend_ops_install.info package_name (new layout) */
    int n_davinci;              /* /dev/davinci<N> entries */
    int npu_smi_found;          /* smi holds a parsed table */
    xi_npu_smi smi;
    xi_pair_status pair;
    char pair_note[200];        /* which table row or rule decided `pair` */
    int inner_consistent;       /* 1/0: toolkit C<NN> in the driver's compatible list; -1 n/a */
} xi_env_ascend;

typedef struct xi_env_ascend_opts {
    const char *root;
    const char *toolkit_home;   /* $ASCEND_TOOLKIT_HOME, searched first (path inside root) */
    const char *home_path;      /* $ASCEND_HOME_PATH */
    const char *home;           /* $HOME for non-root installs */
    const char *npu_smi_text;   /* saved or captured `npu-smi info` output, or NULL */
} xi_env_ascend_opts;

void xi_env_probe_ascend(xi_env_ascend *a, const xi_env_ascend_opts *o);

/* CANN release order: 8.0.RC1 < 8.0.RC2.alpha002 < 8.0.RC2 < 8.0.RC3 < 8.0.0 < 8.5.1 < 9.1.0.
 * Returns <0, 0, >0; *ok = 0 when either string is not a CANN version. */
int xi_cann_version_cmp(const char *a, const char *b, int *ok);
/* Classify a driver/toolkit pair against the reference tables; note says why. */
xi_pair_status xi_ascend_pair(const char *driver, const char *cann, char *note, size_t notelen);

/* ---- optional Python stack (vllm-ascend users only; xinfer needs none of it) ----------- */

typedef struct xi_env_python {
    int probed;                 /* a python3 was asked */
    char torch[32], torch_npu[32], vllm[32], vllm_ascend[32]; /* "" when not installed */
} xi_env_python;

/* Ask python3 (when on PATH) for installed package versions without importing them. */
void xi_env_probe_python(xi_env_python *p);
/* CANN release a torch_npu / vllm-ascend version was built for (reference §4), or NULL. */
const char *xi_torch_npu_cann(const char *torch_npu);
const char *xi_vllm_ascend_cann(const char *vllm_ascend);

/* ---- the whole machine, and the checks -------------------------------------------------- */

/* ---- MPI, for -tp > 1 (env_mpi.c) ------------------------------------------------------ */

typedef struct xi_env_mpi {
    int probed;
    char mpirun[256];           /* path of mpirun on PATH, "" when absent */
    char plugin[512];           /* where xinfer looks for xinfer-mpi.so */
    int plugin_ok;              /* it is there */
} xi_env_mpi;

/* mpirun on PATH and the plugin beside exe (XINFER_MPI_PLUGIN wins); this machine only. */
void xi_env_probe_mpi(xi_env_mpi *m, const char *exe);

typedef struct xi_env {
    xi_env_os os;
    xi_env_mpi mpi;
    xi_env_cpu cpu;
    xi_env_ascend ascend;
    xi_env_python python;
    const char *kernels_dispatch; /* variant the linked dispatcher picks, NULL when unknown */
} xi_env;

typedef enum { XI_CHECK_INFO, XI_CHECK_OK, XI_CHECK_WARN, XI_CHECK_FAIL } xi_check_status;

typedef struct xi_env_check {
    xi_check_status status;
    char id[40];                /* stable key for scripts: "memory", "cann_version", ... */
    char msg[320];
} xi_env_check;

#define XI_ENV_MAX_CHECKS 40
#define XI_ENV_MIN_MEMORY (2LL << 30) /* below this not even a 0.5B model plus KV fits */

typedef struct xi_env_report {
    int n;
    xi_env_check checks[XI_ENV_MAX_CHECKS];
    int can_run;                /* xinfer can serve on this CPU (no FAIL check) */
    int n_warn;
    char verdict[256];
} xi_env_report;

/* Turn findings into checks; a FAIL only for what stops xinfer on the CPU. */
void xi_env_evaluate(const xi_env *e, xi_env_report *r);
const char *xi_check_status_name(xi_check_status s); /* "info", "ok", "warn", "fail" */

#endif

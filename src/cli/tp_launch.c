/* cli/tp_launch: -tp N > 1 on the command line. Outside mpirun, the command re-executes
 * itself under `mpirun -np N`, one rank per NUMA node bound to it (or, on fewer nodes than
 * ranks, each rank bound to its share of the cores); under mpirun, rank 0 runs the command
 * and every other rank serves rank 0's steps. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hub/hub.h"
#include "ops/env.h"
#include "xinfer.h"

static pid_t child;
static void forward(int sig) {
    if (child > 0) kill(child, sig);
}

int xi_cli_tp_spawn(const char *cmd, int argc, char **argv, int tp) {
    xi_env_cpu cpu;
    xi_env_probe_cpu(&cpu, NULL);
    char exe[PATH_MAX], np[16], pe[48];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "xinfer %s: -tp %d: cannot find this executable\n", cmd, tp);
        return 1;
    }
    exe[n] = 0;
    snprintf(np, sizeof np, "%d", tp);
    const char **av = calloc((size_t)argc + 16, sizeof *av);
    if (!av) return 1;
    int k = 0;
    av[k++] = "mpirun";
    av[k++] = "-np";
    av[k++] = np;
    if (geteuid() == 0) av[k++] = "--allow-run-as-root";
    /* a rank that dies must not take rank 0 down with it: rank 0 fails its requests with a
     * 5xx, names the rank and exits itself (model/tp.c, comm/mpi_plugin.c) */
    av[k++] = "--enable-recovery";
    av[k++] = "-x";
    av[k++] = "XINFER_TP_STATUS";
    if (cpu.n_numa >= tp) {
        av[k++] = "--map-by";
        av[k++] = "numa";
        av[k++] = "--bind-to";
        av[k++] = "numa";
    } else if (cpu.n_cpus >= tp) {
        /* n_cpus counts logical CPUs, and so must mpirun: with SMT, PE counted in cores would
         * ask for twice the cores the box has */
        snprintf(pe, sizeof pe, "slot:PE=%d", cpu.n_cpus / tp);
        av[k++] = "--use-hwthread-cpus";
        av[k++] = "--map-by";
        av[k++] = pe;
        av[k++] = "--bind-to";
        av[k++] = "hwthread";
    } else {
        av[k++] = "--oversubscribe";
        av[k++] = "--bind-to";
        av[k++] = "none";
    }
    av[k++] = exe;
    for (int i = 0; i < argc; i++) av[k++] = argv[i];
    av[k] = NULL;
    fprintf(stderr, "xinfer %s: -tp %d: starting %d ranks:", cmd, tp, tp);
    for (int i = 0; i < k; i++) fprintf(stderr, " %s", av[i]);
    fputc('\n', stderr);
    fflush(stderr);
    /* With --enable-recovery mpirun's exit code no longer says how rank 0 ended, so rank 0
     * writes its exit code to a file this process reads once mpirun is done. */
    char status[64];
    snprintf(status, sizeof status, "/tmp/xinfer-tp-%d.status", (int)getpid());
    setenv("XINFER_TP_STATUS", status, 1);
    unlink(status);
    child = fork();
    if (child == 0) {
        execvp("mpirun", (char *const *)av);
        fprintf(stderr, "xinfer %s: -tp %d needs mpirun, which is not installed (apt-get install "
                "openmpi-bin)\n", cmd, tp);
        _exit(127);
    }
    free(av);
    if (child < 0) return 1;
    signal(SIGINT, forward);
    signal(SIGTERM, forward);
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {}
    int rc = WIFEXITED(st) && WEXITSTATUS(st) == 127 ? 127 : 1;
    FILE *f = fopen(status, "r");
    if (f) {
        if (fscanf(f, "%d", &rc) != 1) rc = 1;
        fclose(f);
        unlink(status);
    }
    return rc;
}

int xi_cli_tp_exit(int rc) {
    const char *status = getenv("XINFER_TP_STATUS");
    if (status && xi_tp_rank() == 0) {
        FILE *f = fopen(status, "w");
        if (f) {
            fprintf(f, "%d\n", rc);
            fclose(f);
        }
    }
    return rc;
}

int xi_cli_tp_other_rank(const char *cmd, xi_engine_params *ep, const char *download_dir) {
    char err[1024] = "";
    xi_hub_options ho;
    xi_hub_options_default(&ho);
    ho.cache_dir = download_dir;
    char *dir = xi_hub_resolve(ep->model_dir, &ho, err, sizeof err);
    int rc = 1;
    if (dir) {
        ep->model_dir = dir;
        rc = xi_engine_run_rank(ep, err, sizeof err) ? 1 : 0;
    }
    if (rc) fprintf(stderr, "xinfer %s: rank %d: %s\n", cmd, xi_tp_rank(), err);
    free(dir);
    return rc;
}

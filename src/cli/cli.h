/* cli: subcommands of the xinfer binary. Each returns the process exit code. */
#ifndef XI_CLI_H
#define XI_CLI_H

int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_inspect_gguf(const char *path, int as_json); /* cmd_inspect_gguf.c */
int cmd_serve(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_pull(int argc, char **argv);

/* -tp N > 1 (tp_launch.c). Not under mpirun: exec `mpirun -np N` with this command line
 * (argv[0] is the subcommand), one rank per NUMA node or per share of the cores; returns the
 * exit code only when that fails. Under mpirun, a rank other than 0: serve rank 0's steps
 * (ep->model_dir may be ORG/NAME); returns the exit code. */
struct xi_engine_params;
int xi_cli_tp_spawn(const char *cmd, int argc, char **argv, int tp);
int xi_cli_tp_other_rank(const char *cmd, struct xi_engine_params *ep, const char *download_dir);
/* A subcommand's exit code, which rank 0 under a spawning xinfer also reports to it. */
int xi_cli_tp_exit(int rc);

#endif

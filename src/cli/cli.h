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

#endif

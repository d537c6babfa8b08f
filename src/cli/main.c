/* xinfer: one binary, many subcommands. Only main() decides the exit code. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "xinfer.h"

/* A subcommand whose file is not part of this build resolves to NULL. */
#pragma weak cmd_generate
#pragma weak cmd_tokenize
#pragma weak cmd_inspect
#pragma weak cmd_serve
#pragma weak cmd_env
#pragma weak cmd_plan
#pragma weak cmd_bench
#pragma weak cmd_chat
#pragma weak cmd_pull

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (drop-in for `vllm serve`)"},
    {"generate", cmd_generate, "generate text from a prompt or a JSONL file of prompts"},
    {"chat", cmd_chat, "interactive chat in the terminal"},
    {"pull", cmd_pull, "download a model from Hugging Face or ModelScope into the cache"},
    {"tokenize", cmd_tokenize, "text to token ids, or ids back to text"},
    {"inspect", cmd_inspect, "print a model folder's architecture, dtypes and tensors"},
    {"env", cmd_env, "check whether this machine is ready (OS, CPU, Ascend stack)"},
    {"plan", cmd_plan, "which hardware a model needs and how many requests fit"},
    {"bench", cmd_bench, "load-test an OpenAI-compatible server"},
};

static void usage(FILE *f) {
    fprintf(f, "xinfer %s: LLM inference server for CPU edge nodes\n\nusage: xinfer COMMAND [ARGS]\n\n",
            XINFER_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].fn) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`xinfer COMMAND --help` describes a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        const xi_build_info *b = xi_build_info_get();
        printf("xinfer %s\ncommit:   %s\nbuilt:    %s\ncompiler: %s\nkernels:  %s\nlinkage:  %s\n",
               b->version, b->commit, b->date, b->compiler, b->kernels, b->linkage);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name) && commands[i].fn)
            return xi_cli_tp_exit(commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "xinfer: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 1;
}

/* cli/args: tiny helpers for vLLM-style flags: `--flag value` and `--flag=value`. */
#ifndef XI_CLI_ARGS_H
#define XI_CLI_ARGS_H

#include <stdint.h>

/* If argv[*i] is --name or --name=VALUE, store the value (advancing *i past a separate
 * value) and return 1; return -1 when the value is missing; 0 when argv[*i] is another flag. */
int xi_arg_value(int argc, char **argv, int *i, const char *name, const char **value);
/* Parse numbers strictly (the whole string); return -1 on junk. */
int xi_parse_int(const char *s, long long lo, long long hi, long long *out);
int xi_parse_float(const char *s, double lo, double hi, double *out);

#endif

/* server/config_file: `xinfer serve --config FILE`, vLLM's YAML config format. The file is a
 * mapping whose keys are the long flag names without the leading dashes (`max-model-len`,
 * or `max_model_len`), and it turns into the command-line tokens those flags would be:
 *   port: 8000                      --port 8000
 *   enable-log-requests: true       --enable-log-requests   (false: --no-NAME if there is one)
 *   served-model-name: [a, b]       --served-model-name a b
 *   api-key: [k1, k2]               --api-key k1 --api-key k2
 *   override-generation-config: {temperature: 0.5}    --override-generation-config '{"temperature": 0.5}'
 * Pure function of the file; any thread. */
#ifndef XI_CONFIG_FILE_H
#define XI_CONFIG_FILE_H

#include <stddef.h>

typedef enum {
    XI_CFG_UNKNOWN,   /* no such flag */
    XI_CFG_BOOL,      /* takes no value */
    XI_CFG_VALUE,     /* one value (a mapping becomes its JSON text) */
    XI_CFG_LIST,      /* several values after one flag (nargs "+") */
    XI_CFG_REPEAT,    /* the flag once per value */
} xi_cfg_kind;

/* Read FILE and append its tokens to out[0..max_out), copying their text into buf. kind()
 * says what a flag ("--name") takes. Returns the number of tokens, or -1 with err naming
 * the file and the line, key or keys that were wrong (every unknown key is named). */
int xi_config_file_tokens(const char *path, xi_cfg_kind (*kind)(const char *flag), char **out,
                          int max_out, char *buf, size_t bufsize, char *err, size_t errlen);

#endif

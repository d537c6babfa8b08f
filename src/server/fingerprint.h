/* server/fingerprint: the system_fingerprint of chat and completion answers, as vLLM's
 * --fingerprint-mode builds it: full and hash (no parallelism here, so the same) give
 * "xinfer-<version>-<hash8>", the hash over what changes answers (model folder, architecture,
 * dtype, quantization, an int8 lm_head, KV dtype, context length, kernels, build commit); custom gives
 * --fingerprint-value; none leaves it null. */
#ifndef XI_SERVER_FINGERPRINT_H
#define XI_SERVER_FINGERPRINT_H

#include <stddef.h>

#include "xinfer.h"

/* 1 when mode is one of full, hash, custom, none. */
int xi_fingerprint_mode_ok(const char *mode);
/* The fingerprint into out[cap] ("" for none). mode NULL means full. */
void xi_fingerprint_build(const char *mode, const char *value, const char *model_path,
                          const xi_engine_info *info, char *out, size_t cap);

#endif

/* server/fingerprint: system_fingerprint (see fingerprint.h). */
#include "server/fingerprint.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int xi_fingerprint_mode_ok(const char *mode) {
    return !strcmp(mode, "full") || !strcmp(mode, "hash") || !strcmp(mode, "custom") || !strcmp(mode, "none");
}

void xi_fingerprint_build(const char *mode, const char *value, const char *model_path,
                          const xi_engine_info *info, char *out, size_t cap) {
    out[0] = 0;
    if (mode && !strcmp(mode, "none")) return;
    if (mode && !strcmp(mode, "custom")) {
        snprintf(out, cap, "%s", value ? value : "");
        return;
    }
    const xi_build_info *b = xi_build_info_get();
    char what[2048];
    /* an int8 lm_head changes the outputs: it changes the fingerprint (16-bit adds nothing, so
     * fingerprints from before the option stay) */
    const int lm8 = info->lm_head_quantization && !strcmp(info->lm_head_quantization, "int8");
    snprintf(what, sizeof what, "%s|%s|%s|%s|%s|%s|%d|%s|%lld%s", model_path ? model_path : "", info->architecture,
             info->dtype, info->quantization, info->kv_cache_dtype, info->kernels, info->max_model_len, b->commit,
             (long long)info->n_params, lm8 ? "|lm_head int8" : "");
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a: an identity, not a secret */
    for (const unsigned char *p = (const unsigned char *)what; *p; p++) h = (h ^ *p) * 0x100000001b3ULL;
    snprintf(out, cap, "xinfer-%s-%08llx", b->version, (unsigned long long)(h >> 32));
}

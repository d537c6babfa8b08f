/* --quantization through the loader's table: each name loads the linears in its weight format
 * (a wformat row), refuses a checkpoint it does not fit with a message naming both, and an
 * unknown name lists the ones that exist. */
#include <stdlib.h>
#include <string.h>

#include "kernels/wformat.h"
#include "model/model_internal.h"
#include "test.h"

/* Load models/<rel> with --quantization q; the model, or NULL with the error in err. */
static xi_model *load(const char *rel, const char *q, char *err, size_t errlen) {
    char *dir = xi_test_data(rel);
    xi_model_params p = {.dir = dir, .quantization = q, .n_threads = 1};
    xi_model *m = xi_model_load(&p, err, errlen);
    free(dir);
    return m;
}

TEST(test_quantization_modes_load_their_format_and_refuse_the_wrong_checkpoint) {
    char err[512];
    static const struct {
        const char *rel, *q, *fmt, *quant; /* fmt NULL: refused with the error `quant` */
    } cases[] = {
        {"models/stories260K", NULL, "f32", "none"},
        {"models/stories260K", "none", "f32", "none"},
        {"models/stories260K", "int8", "int8", "int8"},
        {"models/stories260K-awq", NULL, "awq-int4", "awq"},
        {"models/stories260K-awq", "awq", "awq-int4", "awq"},
        {"models/stories260K", "awq", NULL, "--quantization awq: "},
        {"models/stories260K-awq", "int8", NULL, "is already an AWQ checkpoint"},
        {"models/stories260K-awq", "none", NULL, "is an AWQ checkpoint"},
        {"models/stories260K", "int4", NULL, "--quantization int4: expected auto, awq, int8 or none"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        xi_model *m = load(cases[i].rel, cases[i].q, err, sizeof err);
        if (!cases[i].fmt) {
            CHECKF(!m && strstr(err, cases[i].quant), "%s --quantization %s: %s", cases[i].rel, cases[i].q, err);
            if (cases[i].q && !strcmp(cases[i].q, "awq"))
                CHECKF(strstr(err, "has no AWQ quantization_config"), "%s", err);
            xi_model_free(m);
            continue;
        }
        CHECKF(m, "%s --quantization %s: %s", cases[i].rel, cases[i].q ? cases[i].q : "(auto)", err);
        if (!m) continue;
        const xi_wformat *f = xi_wformat_of(&m->layers[0].wq);
        CHECKF(!strcmp(xi_model_quantization(m), cases[i].quant) &&
                   (!strcmp(f->name, cases[i].fmt) ||
                    (!strcmp(cases[i].fmt, "f32") && f->act == XI_WACT_F32)),
               "%s --quantization %s: %s, q_proj %s; expected %s, %s", cases[i].rel, cases[i].q,
               xi_model_quantization(m), f->name, cases[i].quant, cases[i].fmt);
        xi_model_free(m);
    }
}

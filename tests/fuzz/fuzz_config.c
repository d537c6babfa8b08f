/* Fuzz the readers of a model folder's config.json: model/config (xi_config_load, with a
 * generation_config.json) and ops/plan (xi_plan_model_load, then a plan on every catalogue
 * device). Input: config.json NUL generation_config.json (absent when there is no NUL). */
#include "fuzz_util.h"
#include "model/config.h"
#include "ops/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *parts[2];
    size_t lens[2];
    int n = fuzz_split(data, size, parts, lens, 2);
    fuzz_write("config.json", parts[0], lens[0]);
    fuzz_write("generation_config.json", n > 1 ? parts[1] : NULL, n > 1 ? lens[1] : (size_t)-1);
    fuzz_parts_free(parts, n);

    char err[256] = "";
    xi_config c;
    if (xi_config_load(&c, fuzz_dir(), err, sizeof err) == 0) {
        if (c.n_eos < 0 || c.n_eos > XI_MAX_EOS) fuzz_fail("n_eos %d", c.n_eos);
        for (int i = 0; i < c.n_modules_to_not_convert; i++)
            if (!c.modules_to_not_convert[i]) fuzz_fail("module %d is NULL", i);
        xi_config_free(&c);
    } else if (!err[0]) {
        fuzz_fail("xi_config_load failed without an error line");
    }

    err[0] = 0;
    xi_plan_model m;
    if (xi_plan_model_load(fuzz_dir(), &m, err, sizeof err) == 0) {
        xi_plan_params p;
        xi_plan_params_default(&p);
        for (int i = 0; i < xi_plan_device_count(); i++) {
            xi_plan r;
            char perr[256];
            (void)xi_plan_compute(&m, xi_plan_device_at(i), &p, &r, perr, sizeof perr);
        }
    } else if (!err[0]) {
        fuzz_fail("xi_plan_model_load failed without an error line");
    }
    return 0;
}

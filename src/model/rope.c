/* model/rope: rotary frequencies, with the rope_scaling variants Hugging Face defines
 * (default, linear, llama3 for Llama-3.1/3.2, yarn for Qwen2.5 beyond 32K) and per-frequency
 * factors given as values (what a GGUF file stores as rope_freqs for Llama 3 instead of its
 * rope_scaling: the llama3 ramp precomputed, as llama.cpp applies it). */
#include <math.h>

#include "model/model_internal.h"

static double yarn_get_mscale(double scale, double mscale) {
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* Dimension index at which a frequency completes num_rotations turns over max_pos tokens. */
static double yarn_correction_dim(double num_rotations, int dim, double base, double max_pos) {
    return (dim * log(max_pos / (num_rotations * 2.0 * M_PI))) / (2.0 * log(base));
}

void xi_rope_frequencies(const xi_config *c, double *inv_freq, double *mscale) {
    const int dim = c->head_dim, half = dim / 2;
    const double base = c->rope_theta, factor = c->rope_factor;
    *mscale = 1.0;
    for (int i = 0; i < half; i++) inv_freq[i] = 1.0 / pow(base, (2.0 * i) / dim);
    if (c->rope_freq_factors)
        for (int i = 0; i < half; i++) inv_freq[i] /= c->rope_freq_factors[i];
    switch (c->rope_type) {
    case XI_ROPE_NONE: break;
    case XI_ROPE_LINEAR:
        for (int i = 0; i < half; i++) inv_freq[i] /= factor;
        break;
    case XI_ROPE_LLAMA3: {
        /* Long wavelengths are interpolated by factor, short ones kept, a smooth ramp between. */
        const double old_len = c->rope_original_max_pos;
        const double low_wl = old_len / c->rope_low_freq_factor;
        const double high_wl = old_len / c->rope_high_freq_factor;
        for (int i = 0; i < half; i++) {
            const double wl = 2.0 * M_PI / inv_freq[i];
            if (wl > low_wl) {
                inv_freq[i] /= factor;
            } else if (wl >= high_wl) {
                const double smooth = (old_len / wl - c->rope_low_freq_factor) /
                                      (c->rope_high_freq_factor - c->rope_low_freq_factor);
                inv_freq[i] = (1.0 - smooth) * inv_freq[i] / factor + smooth * inv_freq[i];
            }
        }
        break;
    }
    case XI_ROPE_YARN: {
        const double max_pos = c->rope_original_max_pos > 0 ? c->rope_original_max_pos
                                                            : c->max_position_embeddings;
        double low = floor(yarn_correction_dim(c->yarn_beta_fast, dim, base, max_pos));
        double high = ceil(yarn_correction_dim(c->yarn_beta_slow, dim, base, max_pos));
        if (low < 0) low = 0;
        if (high > dim - 1) high = dim - 1;
        if (low == high) high += 0.001;
        for (int i = 0; i < half; i++) {
            double ramp = (i - low) / (high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            const double extrap = 1.0 - ramp; /* weight of the original frequency */
            const double f = inv_freq[i];
            inv_freq[i] = f / factor * (1.0 - extrap) + f * extrap;
        }
        if (c->yarn_mscale > 0 && c->yarn_mscale_all_dim > 0)
            *mscale = yarn_get_mscale(factor, c->yarn_mscale) /
                      yarn_get_mscale(factor, c->yarn_mscale_all_dim);
        else
            *mscale = yarn_get_mscale(factor, 1.0);
        break;
    }
    }
}

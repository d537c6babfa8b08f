#include "base/base.h"
#include "base/pool.h"
#include "tensor/dtype.h"
#include "test.h"

TEST(test_f16_roundtrip_every_half) {
    /* Every finite half converts to f32 and back to itself. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        float f = xi_f16_to_f32((uint16_t)h);
        CHECKF(xi_f32_to_f16(f) == h, "half 0x%04x -> %g -> 0x%04x", h, f, xi_f32_to_f16(f));
    }
    CHECK_NEAR(xi_f16_to_f32(0x3c00), 1.0, 0);
    CHECK_NEAR(xi_f16_to_f32(0xc000), -2.0, 0);
    CHECK_EQ(xi_f32_to_f16(65520.0f), 0x7c00);          /* rounds up to inf */
    CHECK_EQ(xi_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
}

TEST(test_bf16_rounds_to_nearest_even) {
    CHECK_EQ(xi_f32_to_bf16(1.0f), 0x3f80);
    float f = xi_bf16_to_f32(0x3f81);
    CHECK_NEAR(f, 1.0078125, 0);
    uint32_t u = 0x3f808000; /* exactly halfway between 0x3f80 and 0x3f81 -> even */
    float h;
    memcpy(&h, &u, 4);
    CHECK_EQ(xi_f32_to_bf16(h), 0x3f80);
}

typedef struct {
    long n;
    int *hits;
} split_ctx;

static void mark(void *ctx, int ith, int nth) {
    split_ctx *c = ctx;
    long b, e;
    xi_split_range(c->n, ith, nth, 4, &b, &e);
    for (long i = b; i < e; i++) c->hits[i]++;
}

TEST(test_pool_covers_every_index_once) {
    for (int threads = 1; threads <= 3; threads++) {
        xi_pool *p = xi_pool_new(threads);
        CHECK(p);
        for (long n = 0; n < 50; n++) {
            int hits[64] = {0};
            split_ctx c = {n, hits};
            for (int rep = 0; rep < 3; rep++) xi_pool_run(p, mark, &c);
            for (long i = 0; i < n; i++) CHECKF(hits[i] == 3, "n=%ld i=%ld hits=%d", n, i, hits[i]);
        }
        xi_pool_free(p);
    }
}

TEST(test_big_alloc_is_zeroed_and_aligned) {
    size_t sizes[] = {1, 4096, (3u << 20) + 5};
    for (size_t i = 0; i < XI_ARRAY_LEN(sizes); i++) {
        unsigned char *p = xi_alloc_big(sizes[i]);
        CHECK(p);
        CHECK(((uintptr_t)p & 63) == 0);
        for (size_t j = 0; j < sizes[i]; j += 997) CHECK(p[j] == 0);
        p[sizes[i] - 1] = 1;
        xi_free_big(p, sizes[i]);
    }
}

/* comm/mpi_plugin: the xi_comm of base/comm.h over MPI, built as xinfer-mpi.so against the
 * system's OpenMPI and dlopened by xinfer only when -tp > 1 (the binary links no MPI).
 *
 * Every collective is point-to-point and non-blocking, polled against a deadline, so a rank
 * that died or hangs turns into an error naming it instead of a hang (blocking MPI
 * collectives would wait forever, and the default error handler would abort every rank):
 *   all-reduce  every rank sends its partial sums to every other and adds all of them in
 *               rank order, so all ranks hold the same bits whatever the arrival order
 *   bcast       rank 0 sends to each rank (the batch, once per step)
 *   gather      each rank sends its logits slice to rank 0
 * tp is 2..8 here, so (tp - 1) messages per rank per collective cost less than the latency
 * of a tree. The deadline is XINFER_TP_TIMEOUT seconds (5); a rank waiting for the next
 * batch waits twice that (rank 0 sends a heartbeat every idle second); the first all-reduce,
 * where the ranks meet once each has loaded its shard, has none (loading takes as long as
 * it takes). */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/comm.h"

enum { TAG_SUM = 11, TAG_BCAST = 12, TAG_GATHER = 13 };

typedef struct mpi_impl {
    float *tmp;            /* [tp - 1][n] the other ranks' partial sums */
    int64_t cap;
    MPI_Request *req;      /* [2 tp] */
    int *peer;             /* [2 tp] the rank each request talks to */
    double timeout;
    int met;               /* the first all-reduce (every rank loaded) has no deadline */
    int failed;
} mpi_impl;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Wait for n requests; spin a little, then back off to 50 us sleeps (an idle rank waiting for
 * the next batch must not burn its core). timeout <= 0: no deadline. */
static int wait_all(xi_comm *c, int n, double timeout, const char *what, char *err, size_t errlen) {
    mpi_impl *im = c->impl;
    const double t0 = now();
    long polls = 0;
    for (;;) {
        int done = 0;
        if (MPI_Testall(n, im->req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            im->failed = 1;
            return fail(err, errlen, "tensor parallel: rank %d: MPI error during %s", c->rank, what);
        }
        if (done) return 0;
        if (timeout > 0 && now() - t0 > timeout) {
            int who = -1;
            for (int i = 0; i < n && who < 0; i++) {
                int one = 0;
                if (im->req[i] != MPI_REQUEST_NULL) MPI_Test(&im->req[i], &one, MPI_STATUS_IGNORE);
                if (!one && im->req[i] != MPI_REQUEST_NULL) who = im->peer[i];
            }
            im->failed = 1;
            return fail(err, errlen,
                        "tensor parallel: rank %d did not answer rank %d's %s within %.0f s "
                        "(dead or stuck)", who, c->rank, what, timeout);
        }
        if (++polls > 20000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

static int m_allreduce(xi_comm *c, float *buf, int64_t n, char *err, size_t errlen) {
    mpi_impl *im = c->impl;
    if (im->failed) return fail(err, errlen, "tensor parallel: the ranks are gone");
    const double t0 = now();
    const int P = c->size;
    if (n > INT32_MAX) return fail(err, errlen, "tensor parallel: %lld floats in one all-reduce", (long long)n);
    if ((P - 1) * n > im->cap) {
        float *t = realloc(im->tmp, (size_t)((P - 1) * n) * sizeof *t);
        if (!t) return fail(err, errlen, "tensor parallel: out of memory");
        im->tmp = t;
        im->cap = (P - 1) * n;
    }
    int k = 0;
    for (int r = 0; r < P; r++) {
        if (r == c->rank) continue;
        float *slot = im->tmp + (int64_t)(r < c->rank ? r : r - 1) * n;
        im->peer[k] = r;
        MPI_Irecv(slot, (int)n, MPI_FLOAT, r, TAG_SUM, MPI_COMM_WORLD, &im->req[k++]);
        im->peer[k] = r;
        MPI_Isend(buf, (int)n, MPI_FLOAT, r, TAG_SUM, MPI_COMM_WORLD, &im->req[k++]);
    }
    if (wait_all(c, k, im->met ? im->timeout : 0, "all-reduce", err, errlen)) return -1;
    im->met = 1;
    const float *part[64];
    for (int r = 0; r < P && r < 64; r++)
        part[r] = r == c->rank ? buf : im->tmp + (int64_t)(r < c->rank ? r : r - 1) * n;
    for (int64_t i = 0; i < n; i++) {
        float s = part[0][i];
        for (int r = 1; r < P; r++) s += part[r][i];
        buf[i] = s;
    }
    c->bytes_sent += (int64_t)(P - 1) * n * (int64_t)sizeof(float);
    c->seconds += now() - t0;
    return 0;
}

static int m_bcast(xi_comm *c, void *buf, int64_t n, char *err, size_t errlen) {
    mpi_impl *im = c->impl;
    if (im->failed) return fail(err, errlen, "tensor parallel: the ranks are gone");
    if (n > INT32_MAX) return fail(err, errlen, "tensor parallel: a %lld-byte batch", (long long)n);
    int k = 0;
    if (c->rank == 0) {
        for (int r = 1; r < c->size; r++) {
            im->peer[k] = r;
            MPI_Isend(buf, (int)n, MPI_BYTE, r, TAG_BCAST, MPI_COMM_WORLD, &im->req[k++]);
        }
        c->bytes_sent += n * (c->size - 1);
    } else {
        im->peer[k] = 0;
        MPI_Irecv(buf, (int)n, MPI_BYTE, 0, TAG_BCAST, MPI_COMM_WORLD, &im->req[k++]);
    }
    /* the others wait for the next batch (rank 0 sends a heartbeat every idle second) up to
     * twice the deadline once the ranks have met */
    return wait_all(c, k, c->rank == 0 ? im->timeout : im->met ? 2 * im->timeout : 0,
                    c->rank == 0 ? "batch broadcast" : "next batch", err, errlen);
}

static int m_gather(xi_comm *c, const float *src, float *dst, const int64_t *counts, char *err,
                    size_t errlen) {
    mpi_impl *im = c->impl;
    if (im->failed) return fail(err, errlen, "tensor parallel: the ranks are gone");
    const double t0 = now();
    int k = 0;
    if (c->rank == 0) {
        int64_t off = counts[0];
        memcpy(dst, src, (size_t)counts[0] * sizeof *dst);
        for (int r = 1; r < c->size; r++) {
            im->peer[k] = r;
            MPI_Irecv(dst + off, (int)counts[r], MPI_FLOAT, r, TAG_GATHER, MPI_COMM_WORLD, &im->req[k++]);
            off += counts[r];
        }
    } else {
        im->peer[k] = 0;
        MPI_Isend((void *)src, (int)counts[c->rank], MPI_FLOAT, 0, TAG_GATHER, MPI_COMM_WORLD, &im->req[k++]);
        c->bytes_sent += counts[c->rank] * (int64_t)sizeof(float);
    }
    int rc = wait_all(c, k, im->timeout, "logits gather", err, errlen);
    c->seconds += now() - t0;
    return rc;
}

static void m_free(xi_comm *c) {
    if (!c) return;
    mpi_impl *im = c->impl;
    /* after a failure MPI_Finalize could wait for the dead rank: leave it to process exit */
    if (!im->failed) MPI_Finalize();
    free(im->tmp);
    free(im->req);
    free(im->peer);
    free(im);
    free(c);
}

xi_comm *xi_mpi_plugin_open(int tp, char *err, size_t errlen);

xi_comm *xi_mpi_plugin_open(int tp, char *err, size_t errlen) {
    int provided = 0, size = 0, rank = 0;
    /* SERIALIZED: rank 0's collectives run on the engine thread, not the one that called init */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fail(err, errlen, "-tp %d: MPI_Init_thread failed", tp);
        return NULL;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_SERIALIZED || size != tp || tp > 64) {
        if (size != tp)
            fail(err, errlen, "-tp %d: mpirun started %d rank(s); start it with -np %d", tp, size, tp);
        else
            fail(err, errlen, "-tp %d: this MPI lacks MPI_THREAD_SERIALIZED", tp);
        MPI_Finalize();
        return NULL;
    }
    xi_comm *c = calloc(1, sizeof *c);
    mpi_impl *im = calloc(1, sizeof *im);
    if (c && im) {
        im->req = calloc((size_t)(2 * tp), sizeof *im->req);
        im->peer = calloc((size_t)(2 * tp), sizeof *im->peer);
    }
    if (!c || !im || !im->req || !im->peer) {
        if (im) free(im->req), free(im->peer);
        free(im);
        free(c);
        fail(err, errlen, "out of memory");
        return NULL;
    }
    const char *t = getenv("XINFER_TP_TIMEOUT");
    im->timeout = t && atof(t) > 0 ? atof(t) : 5.0;
    *c = (xi_comm){.name = "mpi", .rank = rank, .size = size, .allreduce_sum = m_allreduce,
                   .bcast = m_bcast, .gather = m_gather, .free = m_free, .impl = im};
    return c;
}

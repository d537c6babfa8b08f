/* api/engine_tp: tensor parallelism over MPI ranks. Rank 0 runs the engine (its model sends
 * each step's batch to the others); every other rank loads its shard and runs those steps. */
#include <stdlib.h>

#include "api/engine_tp.h"
#include "base/base.h"
#include "model/model.h"
#include "xinfer.h"

int xi_tp_rank(void) {
    const char *keys[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    if (!xi_comm_mpi_world_size()) return -1;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = getenv(keys[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

xi_comm *xi_engine_tp_comm(int tp, int other_rank, char *err, size_t errlen) {
    if (!xi_comm_mpi_world_size()) {
        xi_errf(err, errlen, "-tp %d: this process was not started by mpirun (mpirun -np %d "
                "xinfer serve MODEL -tp %d; xinfer serve starts it itself)", tp, tp, tp);
        return NULL;
    }
    xi_comm *c = xi_comm_mpi_open(tp, err, errlen);
    if (c && (c->rank != 0) != (other_rank != 0)) {
        xi_errf(err, errlen, "-tp %d: rank %d %s", tp, c->rank,
                c->rank ? "serves steps (xi_engine_run_rank), it runs no engine" : "runs the engine");
        c->free(c);
        return NULL;
    }
    return c;
}

int xi_engine_run_rank(const xi_engine_params *p, char *err, size_t errlen) {
    const int tp = p->tensor_parallel_size;
    if (tp < 2) return xi_errf(err, errlen, "xi_engine_run_rank: -tp %d has no other ranks", tp);
    xi_comm *c = xi_engine_tp_comm(tp, 1, err, errlen);
    if (!c) return -1;
    xi_model_params mp = {.dir = p->model_dir, .dtype = p->dtype, .quantization = p->quantization,
                          .lm_head_quantization = p->lm_head_quantization,
                          .load_format = p->load_format, .kernels = p->kernels,
                          .kernel_precision = p->kernel_precision, .n_threads = p->n_threads, .comm = c};
    xi_model *m = xi_model_load(&mp, err, errlen);
    int rc = -1;
    if (m) {
        rc = xi_model_serve_rank(m, err, errlen);
        xi_model_free(m);
    }
    c->free(c);
    return rc;
}

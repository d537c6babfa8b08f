/* base/comm: the communicator tensor-parallel ranks meet in (the seam of ARCHITECTURE.md's
 * "Tensor parallelism"). The model calls it at the batch boundary and twice per layer; it
 * carries plain floats and bytes, never tensors, so a device backend can sit behind it.
 *
 * Implementations: "threads" (ranks are threads of one process; tests check the sharding
 * math with it) and "mpi" (a plugin, xinfer-mpi.so, loaded with dlopen only when -tp > 1, so
 * the binary never links libmpi). Every rank of a group calls the collectives in the same
 * order from one thread each. Errors (a rank that died, a timeout) return -1 with err naming
 * the rank; a collective that failed leaves the group unusable. */
#ifndef XI_COMM_H
#define XI_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct xi_comm xi_comm;

struct xi_comm {
    const char *name;          /* "threads", "mpi" */
    int rank, size;
    /* buf[0..n) on every rank becomes the sum over ranks 0, 1, ..., size-1 in that order,
     * so every rank gets the same bits and the result does not depend on timing. */
    int (*allreduce_sum)(xi_comm *c, float *buf, int64_t n, char *err, size_t errlen);
    /* rank 0's n bytes at buf are copied to buf on every other rank (which waits for them
     * as long as its implementation's idle limit allows). */
    int (*bcast)(xi_comm *c, void *buf, int64_t n, char *err, size_t errlen);
    /* Rank r contributes counts[r] floats from src; rank 0 gets them concatenated in rank
     * order at dst (dst is unused elsewhere). counts is the same on every rank. */
    int (*gather)(xi_comm *c, const float *src, float *dst, const int64_t *counts, char *err,
                  size_t errlen);
    /* Bytes this rank sent and seconds it spent in collectives, since it was made. */
    int64_t bytes_sent;
    double seconds;
    void (*free)(xi_comm *c);
    void *impl;
};

/* n communicators of one in-process group (ranks 0..n-1), each to be used by its own thread;
 * comms[i] is freed with comms[i]->free. -1 when out of memory. */
int xi_comm_threads_new(int n, xi_comm **comms);

/* The MPI communicator of this process (MPI_COMM_WORLD, whose size must be tp): dlopens
 * the plugin (XINFER_MPI_PLUGIN, else xinfer-mpi.so beside the executable) which needs
 * libmpi. NULL with err saying what is missing and how to get it. */
xi_comm *xi_comm_mpi_open(int tp, char *err, size_t errlen);
/* Is this process one of several started by mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE)? Its
 * world size, or 0. */
int xi_comm_mpi_world_size(void);

#endif

/* api/engine_tp: the MPI side of an engine (-tp > 1): the communicator of this process and
 * the loop of the ranks other than 0. Owner thread only. */
#ifndef XI_ENGINE_TP_H
#define XI_ENGINE_TP_H

#include <stddef.h>

#include "base/comm.h"

/* This process's communicator for -tp tp; its rank must be 0 (the engine's) unless
 * other_rank. NULL with err. */
xi_comm *xi_engine_tp_comm(int tp, int other_rank, char *err, size_t errlen);

#endif

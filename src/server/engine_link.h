/* server/engine_link: the library's engine functions are referenced weakly until src/api
 * implements them, so that the server (and the binary) link before the engine exists;
 * xi_server_engine_linked() tells at run time whether they are there. */
#ifndef XI_ENGINE_LINK_H
#define XI_ENGINE_LINK_H

#include "xinfer.h"

#pragma weak xi_engine_params_default
#pragma weak xi_engine_open
#pragma weak xi_engine_close
#pragma weak xi_engine_start
#pragma weak xi_engine_get_info
#pragma weak xi_finish_reason_name
#pragma weak xi_request_params_default
#pragma weak xi_engine_submit
#pragma weak xi_engine_abort
#pragma weak xi_engine_get_stats
#pragma weak xi_engine_tokenize
#pragma weak xi_engine_detokenize
#pragma weak xi_engine_apply_chat_template

static inline int xi_server_engine_linked(void) {
    return xi_engine_open != 0 && xi_engine_params_default != 0 && xi_engine_submit != 0;
}

#endif

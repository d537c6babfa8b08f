/* server/tokenizer_info: GET /tokenizer_info, served with --enable-tokenizer-info-endpoint as
 * vLLM serves it: the tokenizer's configuration (the model folder's tokenizer_config.json,
 * with "tokenizer_class" always present), so a client can build the same tokenizer. Off by
 * default (404), as it shows the chat template and special tokens. */
#ifndef XI_SERVER_TOKENIZER_INFO_H
#define XI_SERVER_TOKENIZER_INFO_H

#include <microhttpd.h>

#include "server/server.h"

/* The folder the engine loads from (borrowed: it must outlive the server). */
void xi_server_set_model_dir(xi_server *s, const char *dir);
enum MHD_Result xi_tokenizer_info_handle(xi_server *s, struct MHD_Connection *c);

#endif

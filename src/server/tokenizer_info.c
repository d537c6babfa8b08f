/* server/tokenizer_info: GET /tokenizer_info (see tokenizer_info.h). */
#include "server/tokenizer_info.h"

#include <jansson.h>
#include <stdio.h>

#include "server/server_internal.h"

void xi_server_set_model_dir(xi_server *s, const char *dir) { s->cfg.model_dir = dir; }

enum MHD_Result xi_tokenizer_info_handle(xi_server *s, struct MHD_Connection *c) {
    xi_oai_error e;
    if (!s->cfg.tokenizer_info) {
        xi_oai_fail(&e, 404, NULL, "Not found: /tokenizer_info (serve with --enable-tokenizer-info-endpoint)");
        return xi_srv_respond_error(c, &e);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", s->cfg.model_dir ? s->cfg.model_dir : ".");
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (o && !json_is_object(o)) json_decref(o), o = NULL;
    if (!o) o = json_object(); /* a GGUF model: its tokenizer is in the weights file */
    if (!json_is_string(json_object_get(o, "tokenizer_class")))
        json_object_set_new(o, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    if (!json_object_get(o, "model_max_length"))
        json_object_set_new(o, "model_max_length", json_integer(s->info.max_model_len));
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return xi_srv_respond(c, 200, "application/json", body);
}

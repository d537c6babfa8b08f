/* server/cors: the headers every answer carries, as vLLM's middleware adds them.
 *
 *   CORS        --allowed-origins / --allowed-methods / --allowed-headers (JSON lists, default
 *               ["*"]) and --allow-credentials, as Starlette's CORSMiddleware applies them: an
 *               allowed Origin gets Access-Control-Allow-Origin ("*" for any origin without
 *               credentials, else the origin itself with Vary: Origin); an OPTIONS request with
 *               Access-Control-Request-Method is a preflight, answered here (200 with the
 *               allowed methods and headers, or 400 "Disallowed CORS origin/method/headers").
 *   X-Request-Id  with --enable-request-id-headers: the client's X-Request-Id echoed, or one
 *               generated. A client's id (letters, digits, '-', '_', '.', at most 32) also
 *               names the request in logs and in the answer's "id", as vLLM names it.
 *
 * The request being answered on a thread is set when its handler is entered (the server
 * answers each request on the thread that runs its handler). */
#ifndef XI_SERVER_CORS_H
#define XI_SERVER_CORS_H

#include <microhttpd.h>

#include "server/server.h"

/* A list flag's value checked: a JSON array of strings. 0, or -1 with err naming flag. */
int xi_cors_check_list(const char *flag, const char *value, char *err, size_t errlen);

/* This thread now answers connection c of server s. */
void xi_http_enter(xi_server *s, struct MHD_Connection *c);
/* The client's X-Request-Id when it is a usable id, else NULL (this thread's request). */
const char *xi_http_client_request_id(void);
/* Add this thread's CORS and X-Request-Id headers to r, before it is queued. */
void xi_http_decorate(struct MHD_Response *r);
/* An OPTIONS preflight: answered into *ret (returns 1), or 0 when method/headers make it
 * no preflight. */
int xi_cors_preflight(xi_server *s, struct MHD_Connection *c, const char *method, enum MHD_Result *ret);

#endif

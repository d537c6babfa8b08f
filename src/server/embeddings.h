/* server/embeddings: POST /v1/embeddings (OpenAI's and vLLM's request and response) for a
 * model served with --runner pooling, and the sentence-transformers folder check that makes
 * `--runner auto` choose pooling. Not part of the server's interface beyond server.c and
 * cmd_serve. */
#ifndef XI_SERVER_EMBEDDINGS_H
#define XI_SERVER_EMBEDDINGS_H

#include <microhttpd.h>
#include <stddef.h>

typedef struct xi_server xi_server;
typedef struct emb_job emb_job;

/* Parse, submit one pooling request per input and answer once every vector is in, without
 * waiting on this thread: sets *job when the job outlives this call (the connection is then
 * suspended until the answer is ready); the connection passes it to xi_embeddings_resume when
 * resumed and to xi_embeddings_connection_done when the request ends. */
enum MHD_Result xi_embeddings_handle(xi_server *s, struct MHD_Connection *c, int http11,
                                     const char *body, size_t len, emb_job **job);
/* The connection of job was resumed: queue the answer when complete, else suspend again. */
enum MHD_Result xi_embeddings_resume(emb_job *job);
/* The connection holding job ended (ok: the response was sent completely). */
void xi_embeddings_connection_done(emb_job *job, int ok);
/* Watchdog: resume suspended embedding jobs whose client is gone, or all of them if closing. */
void xi_embeddings_watch(xi_server *s, int closing);

/* Choose the runner: "generate" → 0, "pooling" → 1, "auto" → 1 for a sentence-transformers
 * last-token folder, else 0; -1 with err for a folder whose pooling xinfer does not run. */
int xi_pooling_resolve(const char *runner, const char *dir, char *err, size_t errlen);
/* Before xi_server_set_engine: serve the model as a pooling model (or not). */
void xi_server_set_pooling(xi_server *s, int pooling);

/* Is dir a sentence-transformers model (modules.json with a Pooling module) with last-token
 * pooling? 1: yes; 0: not such a folder; -1: it is one, but with a pooling mode xinfer does
 * not run (err names the file and the mode). */
int xi_pooling_detect(const char *dir, char *err, size_t errlen);

#endif

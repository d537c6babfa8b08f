/* A fake OpenAI-compatible streaming server for the load generator's tests: libmicrohttpd on
 * loopback, one thread per connection so that delayed streams run side by side. It streams
 * completions or chat chunks with chosen delays and can fail on purpose: answer 500 (or any
 * status), cut a stream mid-way, omit [DONE], send a broken event, or answer without SSE. */
#ifndef XI_TEST_LOADGEN_FAKE_H
#define XI_TEST_LOADGEN_FAKE_H

typedef struct fake_oai_opts {
    int tokens;          /* content chunks per stream */
    int first_delay_ms;  /* before the first content chunk (a chat stream sends its role first) */
    int delay_ms;        /* between content chunks */
    int status_every;    /* every status_every-th request (1-based) answers `status`; 0 never */
    int status;          /* 500 when 0 */
    int cut_every;       /* every cut_every-th request: connection dropped after tokens/2 chunks */
    int no_done;         /* end without [DONE] and without a finish_reason */
    int bad_json_every;  /* every bad_json_every-th request sends a non-JSON event */
    int plain_json;      /* answer 200 with a non-streaming JSON body */
    int no_usage;        /* never send a usage chunk */
} fake_oai_opts;

typedef struct fake_oai fake_oai;

fake_oai *fake_oai_start(const fake_oai_opts *o);
/* "http://127.0.0.1:PORT" */
const char *fake_oai_url(const fake_oai *f);
int fake_oai_requests(fake_oai *f);
/* Most requests that were being answered at the same moment. */
int fake_oai_max_inflight(fake_oai *f);
/* Body, path and Authorization header of the latest request (copies; free them). */
char *fake_oai_last_body(fake_oai *f);
char *fake_oai_last_path(fake_oai *f);
char *fake_oai_last_auth(fake_oai *f);
void fake_oai_stop(fake_oai *f);

/* A loopback URL where nothing listens (a bound socket that never listens, so no other test
 * can take the port while it is in use). Close *fd afterwards. */
int fake_oai_refusing_url(char *url, int urllen, int *fd);

#endif

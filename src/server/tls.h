/* server/tls: HTTPS for `xinfer serve` (vLLM's --ssl-keyfile, --ssl-certfile, --ssl-ca-certs,
 * --ssl-cert-reqs) through libmicrohttpd's GnuTLS back end. The files are read and checked
 * once at start-up, so a bad file is one error naming it instead of a server that fails every
 * handshake; each connection then asks for (and checks) a client certificate as
 * --ssl-cert-reqs says. */
#ifndef XI_SERVER_TLS_H
#define XI_SERVER_TLS_H

#include <stddef.h>

/* --ssl-cert-reqs, as Python's ssl module numbers them (vLLM passes them to uvicorn). */
enum { XI_TLS_CERT_NONE = 0, XI_TLS_CERT_OPTIONAL = 1, XI_TLS_CERT_REQUIRED = 2 };

typedef struct xi_tls {
    char *key_pem;                   /* owned, NUL-terminated: the private key (PEM) */
    char *cert_pem;                  /* owned: the certificate chain, the server's first */
    char *ca_pem;                    /* owned: CAs that sign client certificates, or NULL */
    int cert_reqs;                   /* XI_TLS_CERT_*; > NONE only with ca_pem */
} xi_tls;

/* Read and check the files: certfile (with the key too when keyfile is NULL), keyfile, and
 * ca_file (may be NULL; needed when cert_reqs > NONE). The key must be unencrypted and match
 * the certificate. Returns 0, or -1 with a one-line err naming the flag and file. */
int xi_tls_load(xi_tls *t, const char *keyfile, const char *certfile, const char *ca_file,
                int cert_reqs, char *err, size_t errlen);
void xi_tls_free(xi_tls *t);

/* A connection was accepted (its TLS session is set up, no handshake yet): ask for a client
 * certificate as t->cert_reqs says, and fail the handshake on one the CAs did not sign.
 * session is libmicrohttpd's MHD_CONNECTION_INFO_GNUTLS_SESSION. */
void xi_tls_session_start(const xi_tls *t, void *session);

#endif

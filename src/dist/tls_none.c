/* dist/tls_none: the GnuTLS entry points of Debian's static libmicrohttpd and of
 * src/server/tls.c, for the release binary. GnuTLS has no static build of its own
 * dependencies (p11-kit), so the release binary links this TLS back end instead: plain HTTP
 * works, and --ssl-certfile fails at start-up with GNUTLS_E_UNIMPLEMENTED_FEATURE, which
 * server/tls.c reports as "this xinfer binary has no TLS" (the dynamic build serves HTTPS). */
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdlib.h>

#define NO_TLS GNUTLS_E_UNIMPLEMENTED_FEATURE

gnutls_alloc_function gnutls_malloc = malloc;

/* libmicrohttpd calls these two from its library constructor and destructor. */
int gnutls_global_init(void) { return 0; }
void gnutls_global_deinit(void) {}

const char *gnutls_strerror(int error) {
    (void)error;
    return "TLS is not compiled into this xinfer binary";
}

int gnutls_init(gnutls_session_t *session, unsigned int flags) {
    (void)flags;
    *session = NULL;
    return NO_TLS;
}
void gnutls_deinit(gnutls_session_t session) { (void)session; }
int gnutls_handshake(gnutls_session_t session) { (void)session; return NO_TLS; }
int gnutls_bye(gnutls_session_t session, gnutls_close_request_t how) {
    (void)session, (void)how;
    return NO_TLS;
}
ssize_t gnutls_record_recv(gnutls_session_t session, void *data, size_t data_size) {
    (void)session, (void)data, (void)data_size;
    return NO_TLS;
}
ssize_t gnutls_record_send(gnutls_session_t session, const void *data, size_t data_size) {
    (void)session, (void)data, (void)data_size;
    return NO_TLS;
}
size_t gnutls_record_check_pending(gnutls_session_t session) { (void)session; return 0; }
int gnutls_record_get_direction(gnutls_session_t session) { (void)session; return 0; }
void gnutls_session_set_ptr(gnutls_session_t session, void *ptr) { (void)session, (void)ptr; }
void *gnutls_session_get_ptr(gnutls_session_t session) { (void)session; return NULL; }
void gnutls_transport_set_int2(gnutls_session_t session, int r, int s) {
    (void)session, (void)r, (void)s;
}
gnutls_cipher_algorithm_t gnutls_cipher_get(gnutls_session_t session) {
    (void)session;
    return GNUTLS_CIPHER_UNKNOWN;
}
gnutls_protocol_t gnutls_protocol_get_version(gnutls_session_t session) {
    (void)session;
    return GNUTLS_VERSION_UNKNOWN;
}
int gnutls_alpn_set_protocols(gnutls_session_t session, const gnutls_datum_t *protocols,
                              unsigned protocols_size, unsigned flags) {
    (void)session, (void)protocols, (void)protocols_size, (void)flags;
    return NO_TLS;
}
int gnutls_priority_init(gnutls_priority_t *priority_cache, const char *priorities,
                         const char **err_pos) {
    (void)priorities, (void)err_pos;
    *priority_cache = NULL;
    return NO_TLS;
}
void gnutls_priority_deinit(gnutls_priority_t priority_cache) { (void)priority_cache; }
int gnutls_priority_set(gnutls_session_t session, gnutls_priority_t priority) {
    (void)session, (void)priority;
    return NO_TLS;
}
int gnutls_credentials_set(gnutls_session_t session, gnutls_credentials_type_t type, void *cred) {
    (void)session, (void)type, (void)cred;
    return NO_TLS;
}
int gnutls_certificate_allocate_credentials(gnutls_certificate_credentials_t *res) {
    *res = NULL;
    return NO_TLS;
}
void gnutls_certificate_free_credentials(gnutls_certificate_credentials_t sc) { (void)sc; }
void gnutls_certificate_server_set_request(gnutls_session_t session,
                                           gnutls_certificate_request_t req) {
    (void)session, (void)req;
}
void gnutls_certificate_set_dh_params(gnutls_certificate_credentials_t res,
                                      gnutls_dh_params_t dh_params) {
    (void)res, (void)dh_params;
}
void gnutls_certificate_set_retrieve_function2(gnutls_certificate_credentials_t cred,
                                               gnutls_certificate_retrieve_function2 *func) {
    (void)cred, (void)func;
}
void gnutls_certificate_set_retrieve_function3(gnutls_certificate_credentials_t cred,
                                               gnutls_certificate_retrieve_function3 *func) {
    (void)cred, (void)func;
}
int gnutls_certificate_set_x509_key_mem(gnutls_certificate_credentials_t res,
                                        const gnutls_datum_t *cert, const gnutls_datum_t *key,
                                        gnutls_x509_crt_fmt_t type) {
    (void)res, (void)cert, (void)key, (void)type;
    return NO_TLS;
}
int gnutls_certificate_set_x509_key_mem2(gnutls_certificate_credentials_t res,
                                         const gnutls_datum_t *cert, const gnutls_datum_t *key,
                                         gnutls_x509_crt_fmt_t type, const char *pass,
                                         unsigned int flags) {
    (void)res, (void)cert, (void)key, (void)type, (void)pass, (void)flags;
    return NO_TLS;
}
int gnutls_certificate_set_x509_trust_mem(gnutls_certificate_credentials_t res,
                                          const gnutls_datum_t *ca, gnutls_x509_crt_fmt_t type) {
    (void)res, (void)ca, (void)type;
    return NO_TLS;
}
int gnutls_dh_params_init(gnutls_dh_params_t *dh_params) {
    *dh_params = NULL;
    return NO_TLS;
}
void gnutls_dh_params_deinit(gnutls_dh_params_t dh_params) { (void)dh_params; }
int gnutls_dh_params_import_pkcs3(gnutls_dh_params_t params, const gnutls_datum_t *pkcs3_params,
                                  gnutls_x509_crt_fmt_t format) {
    (void)params, (void)pkcs3_params, (void)format;
    return NO_TLS;
}
int gnutls_psk_allocate_server_credentials(gnutls_psk_server_credentials_t *sc) {
    *sc = NULL;
    return NO_TLS;
}
void gnutls_psk_free_server_credentials(gnutls_psk_server_credentials_t sc) { (void)sc; }
void gnutls_psk_set_server_credentials_function(gnutls_psk_server_credentials_t cred,
                                                gnutls_psk_server_credentials_function *func) {
    (void)cred, (void)func;
}

/* server/tls.c: checking the --ssl-* files and the client-certificate policy */
int gnutls_x509_crt_init(gnutls_x509_crt_t *cert) {
    *cert = NULL;
    return NO_TLS;
}
int gnutls_x509_crt_import(gnutls_x509_crt_t cert, const gnutls_datum_t *data, gnutls_x509_crt_fmt_t format) {
    (void)cert, (void)data, (void)format;
    return NO_TLS;
}
void gnutls_x509_crt_deinit(gnutls_x509_crt_t cert) { (void)cert; }
int gnutls_x509_privkey_init(gnutls_x509_privkey_t *key) {
    *key = NULL;
    return NO_TLS;
}
int gnutls_x509_privkey_import2(gnutls_x509_privkey_t key, const gnutls_datum_t *data,
                                gnutls_x509_crt_fmt_t format, const char *password, unsigned int flags) {
    (void)key, (void)data, (void)format, (void)password, (void)flags;
    return NO_TLS;
}
void gnutls_x509_privkey_deinit(gnutls_x509_privkey_t key) { (void)key; }
const gnutls_datum_t *gnutls_certificate_get_peers(gnutls_session_t session, unsigned int *list_size) {
    (void)session;
    *list_size = 0;
    return NULL;
}
int gnutls_certificate_verify_peers2(gnutls_session_t session, unsigned int *status) {
    (void)session;
    *status = GNUTLS_CERT_INVALID;
    return NO_TLS;
}
void gnutls_session_set_verify_function(gnutls_session_t session, gnutls_certificate_verify_function *func) {
    (void)session, (void)func;
}

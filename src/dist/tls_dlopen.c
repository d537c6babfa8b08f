/* dist/tls_dlopen: GnuTLS for the release binary, loaded when first used. GnuTLS has no static
 * build of its own dependencies (p11-kit, nettle's hogweed, libtasn1), and only `--ssl-*`
 * needs it, so the release binary defines the GnuTLS calls that Debian's static
 * libmicrohttpd and src/server/tls.c make and forwards each to the system's libgnutls.so.30
 * (GnuTLS 3.x, one ABI since 3.0), opened on the first call. Without one, the first call
 * fails with GNUTLS_E_UNIMPLEMENTED_FEATURE and gnutls_strerror says what to install, which
 * server/tls.c prints. Plain HTTP never opens it: libmicrohttpd's own start-up call
 * (gnutls_global_init) is answered here, and GnuTLS initialises itself when it is loaded. */
#include <dlfcn.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef gnutls_session_t S;
typedef gnutls_certificate_credentials_t CC;
typedef gnutls_datum_t D;
typedef gnutls_x509_crt_fmt_t F;

/* Calls returning an int error code (GNUTLS_E_UNIMPLEMENTED_FEATURE without the library). */
#define TLS_INT_FUNCS(X)                                                                     \
    X(init, (S * s, unsigned flags), (s, flags))                                             \
    X(handshake, (S s), (s))                                                                 \
    X(bye, (S s, gnutls_close_request_t how), (s, how))                                      \
    X(record_get_direction, (S s), (s))                                                      \
    X(alpn_set_protocols, (S s, const D *p, unsigned n, unsigned flags), (s, p, n, flags))   \
    X(priority_init, (gnutls_priority_t * p, const char *prio, const char **at), (p, prio, at)) \
    X(priority_set, (S s, gnutls_priority_t p), (s, p))                                      \
    X(credentials_set, (S s, gnutls_credentials_type_t t, void *c), (s, t, c))               \
    X(certificate_allocate_credentials, (CC * c), (c))                                       \
    X(certificate_set_x509_key_mem, (CC c, const D *cert, const D *key, F f), (c, cert, key, f)) \
    X(certificate_set_x509_key_mem2, (CC c, const D *cert, const D *key, F f, const char *pass, unsigned flags), \
      (c, cert, key, f, pass, flags))                                                        \
    X(certificate_set_x509_trust_mem, (CC c, const D *ca, F f), (c, ca, f))                  \
    X(certificate_verify_peers2, (S s, unsigned *status), (s, status))                       \
    X(dh_params_init, (gnutls_dh_params_t * p), (p))                                         \
    X(dh_params_import_pkcs3, (gnutls_dh_params_t p, const D *d, F f), (p, d, f))           \
    X(psk_allocate_server_credentials, (gnutls_psk_server_credentials_t * c), (c))          \
    X(x509_crt_init, (gnutls_x509_crt_t * c), (c))                                           \
    X(x509_crt_import, (gnutls_x509_crt_t c, const D *d, F f), (c, d, f))                   \
    X(x509_privkey_init, (gnutls_x509_privkey_t * k), (k))                                   \
    X(x509_privkey_import2, (gnutls_x509_privkey_t k, const D *d, F f, const char *pass, unsigned flags), \
      (k, d, f, pass, flags))

/* Calls returning nothing (nothing to do without the library). */
#define TLS_VOID_FUNCS(X)                                                                    \
    X(deinit, (S s), (s))                                                                    \
    X(session_set_ptr, (S s, void *p), (s, p))                                               \
    X(transport_set_int2, (S s, int r, int w), (s, r, w))                                    \
    X(priority_deinit, (gnutls_priority_t p), (p))                                           \
    X(certificate_free_credentials, (CC c), (c))                                             \
    X(certificate_server_set_request, (S s, gnutls_certificate_request_t r), (s, r))         \
    X(certificate_set_dh_params, (CC c, gnutls_dh_params_t p), (c, p))                      \
    X(certificate_set_retrieve_function2, (CC c, gnutls_certificate_retrieve_function2 * f), (c, f)) \
    X(certificate_set_retrieve_function3, (CC c, gnutls_certificate_retrieve_function3 * f), (c, f)) \
    X(session_set_verify_function, (S s, gnutls_certificate_verify_function * f), (s, f))   \
    X(dh_params_deinit, (gnutls_dh_params_t p), (p))                                         \
    X(psk_free_server_credentials, (gnutls_psk_server_credentials_t c), (c))                \
    X(psk_set_server_credentials_function, (gnutls_psk_server_credentials_t c, gnutls_psk_server_credentials_function * f), \
      (c, f))                                                                                \
    X(x509_crt_deinit, (gnutls_x509_crt_t c), (c))                                           \
    X(x509_privkey_deinit, (gnutls_x509_privkey_t k), (k))

/* Calls returning a value, and what they give without the library. */
#define TLS_VALUE_FUNCS(X)                                                                   \
    X(ssize_t, record_recv, (S s, void *d, size_t n), (s, d, n), GNUTLS_E_UNIMPLEMENTED_FEATURE) \
    X(ssize_t, record_send, (S s, const void *d, size_t n), (s, d, n), GNUTLS_E_UNIMPLEMENTED_FEATURE) \
    X(size_t, record_check_pending, (S s), (s), 0)                                           \
    X(void *, session_get_ptr, (S s), (s), NULL)                                             \
    X(gnutls_cipher_algorithm_t, cipher_get, (S s), (s), GNUTLS_CIPHER_UNKNOWN)              \
    X(gnutls_protocol_t, protocol_get_version, (S s), (s), GNUTLS_VERSION_UNKNOWN)           \
    X(const D *, certificate_get_peers, (S s, unsigned *n), (s, n), NULL)                   \
    X(const char *, strerror, (int e), (e), load_error)

static char load_error[256];

static struct {
    void *lib;
#define FIELD_INT(name, params, args) int(*name) params;
#define FIELD_VOID(name, params, args) void(*name) params;
#define FIELD_VALUE(ret, name, params, args, none) ret(*name) params;
    TLS_INT_FUNCS(FIELD_INT)
    TLS_VOID_FUNCS(FIELD_VOID)
    TLS_VALUE_FUNCS(FIELD_VALUE)
#undef FIELD_INT
#undef FIELD_VOID
#undef FIELD_VALUE
} tls;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static int bind_fn(void **fn, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "gnutls_%s", name);
    if ((*fn = dlsym(tls.lib, full))) return 0;
    snprintf(load_error, sizeof load_error, "libgnutls.so.30 has no %s (xinfer needs GnuTLS 3.6 or later)", full);
    return -1;
}

static void load(void) {
    tls.lib = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_LOCAL);
    if (!tls.lib) {
        snprintf(load_error, sizeof load_error,
                 "libgnutls.so.30 is not installed; --ssl-* loads it when used (dnf/yum install "
                 "gnutls, or apt install libgnutls30)");
        return;
    }
#define BIND(name) if (bind_fn((void **)&tls.name, #name)) goto fail;
#define BIND_INT(name, params, args) BIND(name)
#define BIND_VALUE(ret, name, params, args, none) BIND(name)
    TLS_INT_FUNCS(BIND_INT)
    TLS_VOID_FUNCS(BIND_INT)
    TLS_VALUE_FUNCS(BIND_VALUE)
#undef BIND
#undef BIND_INT
#undef BIND_VALUE
    return;
fail:
    dlclose(tls.lib);
    tls.lib = NULL;
}

static int loaded(void) {
    pthread_once(&load_once, load);
    return tls.lib != NULL;
}

#define DEF_INT(name, params, args)                                                          \
    int gnutls_##name params { return loaded() ? tls.name args : GNUTLS_E_UNIMPLEMENTED_FEATURE; }
#define DEF_VOID(name, params, args)                                                         \
    void gnutls_##name params {                                                              \
        if (loaded()) tls.name args;                                                         \
    }
#define DEF_VALUE(ret, name, params, args, none)                                             \
    ret gnutls_##name params { return loaded() ? tls.name args : (none); }
TLS_INT_FUNCS(DEF_INT)
TLS_VOID_FUNCS(DEF_VOID)
TLS_VALUE_FUNCS(DEF_VALUE)

/* libmicrohttpd allocates PSK keys with gnutls_malloc for GnuTLS to free: the same C library's
 * malloc and free. */
gnutls_alloc_function gnutls_malloc = malloc;

/* libmicrohttpd's library constructor and destructor: nothing to do until TLS is used (a
 * loaded GnuTLS initialises and finalises itself). */
int gnutls_global_init(void) { return 0; }
void gnutls_global_deinit(void) {}

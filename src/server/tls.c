/* server/tls: the --ssl-* files, checked at start-up, and the client-certificate policy of
 * each connection (see tls.h). libmicrohttpd owns the handshake and the credentials; this file
 * only reads what it is given and sets the two things libmicrohttpd has no option for: a
 * client certificate that is required, and one that is checked during the handshake. */
#include "server/tls.h"
#include "base/base.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

void xi_tls_free(xi_tls *t) {
    free(t->key_pem);
    free(t->cert_pem);
    free(t->ca_pem);
    memset(t, 0, sizeof *t);
}

/* A PEM file as a string; "" or NUL bytes inside are errors (libmicrohttpd takes strings). */
static char *read_pem(const char *flag, const char *path, char *err, size_t errlen) {
    char why[256];
    size_t len;
    char *s = xi_read_file(path, &len, why, sizeof why);
    if (!s) {
        xi_errf(err, errlen, "%s %s", flag, why);
        return NULL;
    }
    if (!len || strlen(s) != len) {
        xi_errf(err, errlen, "%s %s: %s", flag, path, len ? "not a PEM file (binary data)" : "empty file");
        free(s);
        return NULL;
    }
    return s;
}

static gnutls_datum_t datum(const char *s) {
    return (gnutls_datum_t){.data = (unsigned char *)s, .size = (unsigned)strlen(s)};
}

/* The certificate, the key and the CAs as GnuTLS reads them, each error naming its file. */
static int check(const xi_tls *t, const char *keyflag, const char *keyfile, const char *certfile,
                 const char *ca_file, char *err, size_t errlen) {
    gnutls_certificate_credentials_t cred;
    int rc = gnutls_certificate_allocate_credentials(&cred);
    if (rc == GNUTLS_E_UNIMPLEMENTED_FEATURE) /* the release binary without the system's GnuTLS */
        return xi_errf(err, errlen, "--ssl-certfile: %s", gnutls_strerror(rc));
    if (rc < 0) return xi_errf(err, errlen, "TLS: %s", gnutls_strerror(rc));
    const gnutls_datum_t cert = datum(t->cert_pem), key = datum(t->key_pem);
    gnutls_x509_crt_t crt = NULL;
    gnutls_x509_privkey_t pk = NULL;
    if ((rc = gnutls_x509_crt_init(&crt)) < 0 || (rc = gnutls_x509_crt_import(crt, &cert, GNUTLS_X509_FMT_PEM)) < 0) {
        xi_errf(err, errlen, "--ssl-certfile %s: no PEM certificate in it (%s)", certfile, gnutls_strerror(rc));
    } else if ((rc = gnutls_x509_privkey_init(&pk)) < 0 ||
               (rc = gnutls_x509_privkey_import2(pk, &key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN)) < 0) {
        xi_errf(err, errlen, "%s %s: no unencrypted PEM private key in it (%s)", keyflag, keyfile,
                gnutls_strerror(rc));
    } else if ((rc = gnutls_certificate_set_x509_key_mem2(cred, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        xi_errf(err, errlen, "%s %s: %s", keyflag, keyfile,
                rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH ? "the key does not match --ssl-certfile's certificate"
                                                        : gnutls_strerror(rc));
    } else if (t->ca_pem) {
        const gnutls_datum_t ca = datum(t->ca_pem);
        rc = gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_PEM);
        if (rc <= 0)
            xi_errf(err, errlen, "--ssl-ca-certs %s: no PEM certificate in it%s%s%s", ca_file, rc ? " (" : "",
                    rc ? gnutls_strerror(rc) : "", rc ? ")" : "");
        rc = rc <= 0 ? -1 : 0;
    }
    if (pk) gnutls_x509_privkey_deinit(pk);
    if (crt) gnutls_x509_crt_deinit(crt);
    gnutls_certificate_free_credentials(cred);
    return rc < 0 ? -1 : 0;
}

int xi_tls_load(xi_tls *t, const char *keyfile, const char *certfile, const char *ca_file,
                int cert_reqs, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return xi_errf(err, errlen, "--ssl-certfile: this libmicrohttpd was built without HTTPS support");
    if (!certfile)
        return xi_errf(err, errlen, "%s needs --ssl-certfile",
                       keyfile ? "--ssl-keyfile" : ca_file ? "--ssl-ca-certs" : "--ssl-cert-reqs");
    if (cert_reqs < XI_TLS_CERT_NONE || cert_reqs > XI_TLS_CERT_REQUIRED)
        return xi_errf(err, errlen, "--ssl-cert-reqs %d: 0 (none), 1 (optional) or 2 (required)", cert_reqs);
    if (cert_reqs != XI_TLS_CERT_NONE && !ca_file)
        return xi_errf(err, errlen, "--ssl-cert-reqs %d needs --ssl-ca-certs (the CAs that sign client "
                       "certificates)", cert_reqs);
    t->cert_reqs = cert_reqs;
    /* Without --ssl-keyfile the key is in the certificate file, as Python's load_cert_chain. */
    const char *keyflag = keyfile ? "--ssl-keyfile" : "--ssl-certfile";
    if (!(t->cert_pem = read_pem("--ssl-certfile", certfile, err, errlen)) ||
        !(t->key_pem = read_pem(keyflag, keyfile ? keyfile : certfile, err, errlen)) ||
        (ca_file && !(t->ca_pem = read_pem("--ssl-ca-certs", ca_file, err, errlen))) ||
        check(t, keyflag, keyfile ? keyfile : certfile, certfile, ca_file, err, errlen)) {
        xi_tls_free(t);
        return -1;
    }
    return 0;
}

/* During the handshake, once the client's Certificate message is in: without a certificate
 * only --ssl-cert-reqs 1 goes on; with one, it must chain to --ssl-ca-certs and be valid now
 * (Python's CERT_OPTIONAL and CERT_REQUIRED). Nonzero fails the handshake. */
static int verify_client(gnutls_session_t session, int required) {
    unsigned n = 0;
    if (!gnutls_certificate_get_peers(session, &n) || !n) return required ? GNUTLS_E_NO_CERTIFICATE_FOUND : 0;
    unsigned status = 0;
    const int rc = gnutls_certificate_verify_peers2(session, &status);
    if (rc < 0) return rc;
    return status ? GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR : 0;
}
static int verify_optional(gnutls_session_t session) { return verify_client(session, 0); }
static int verify_required(gnutls_session_t session) { return verify_client(session, 1); }

void xi_tls_session_start(const xi_tls *t, void *session) {
    if (!session || t->cert_reqs == XI_TLS_CERT_NONE) return;
    const int required = t->cert_reqs == XI_TLS_CERT_REQUIRED;
    gnutls_certificate_server_set_request(session, required ? GNUTLS_CERT_REQUIRE : GNUTLS_CERT_REQUEST);
    gnutls_session_set_verify_function(session, required ? verify_required : verify_optional);
}

/* dist/curl_dlopen: libcurl for the release binary, loaded when first used. Only `xinfer
 * pull` (and serving ORG/NAME) and `xinfer bench` talk HTTP as clients; libcurl brings
 * TLS, HTTP/2, Kerberos and LDAP libraries with it, which have no static builds, and every
 * distribution ships libcurl.so.4 with one stable ABI. So this file defines the libcurl
 * calls src/hub and src/loadgen make and forwards each to the system's libcurl, opened on
 * the first call. Without one, curl_global_init fails and curl_easy_strerror says what to
 * install, which both callers print as their error. */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#define CURL_FUNCS(X)                                                                        \
    X(CURLcode, global_init, (long flags))                                                   \
    X(CURL *, easy_init, (void))                                                             \
    X(void, easy_cleanup, (CURL * h))                                                        \
    X(CURLcode, easy_setopt, (CURL * h, CURLoption option, ...))                             \
    X(CURLcode, easy_perform, (CURL * h))                                                    \
    X(CURLcode, easy_getinfo, (CURL * h, CURLINFO info, ...))                                \
    X(const char *, easy_strerror, (CURLcode code))                                          \
    X(CURLM *, multi_init, (void))                                                           \
    X(CURLMcode, multi_cleanup, (CURLM * m))                                                 \
    X(CURLMcode, multi_add_handle, (CURLM * m, CURL * h))                                    \
    X(CURLMcode, multi_remove_handle, (CURLM * m, CURL * h))                                 \
    X(CURLMcode, multi_perform, (CURLM * m, int *running))                                   \
    X(CURLMcode, multi_poll, (CURLM * m, struct curl_waitfd *fds, unsigned n, int ms, int *numfds)) \
    X(CURLMsg *, multi_info_read, (CURLM * m, int *left))                                    \
    X(CURLMcode, multi_setopt, (CURLM * m, CURLMoption option, ...))                         \
    X(const char *, multi_strerror, (CURLMcode code))                                        \
    X(struct curl_slist *, slist_append, (struct curl_slist * list, const char *s))          \
    X(void, slist_free_all, (struct curl_slist * list))

static struct {
    void *lib;
#define FIELD(ret, name, params) ret(*name) params;
    CURL_FUNCS(FIELD)
#undef FIELD
} curl;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Distributions name the OpenSSL build libcurl.so.4; Debian's GnuTLS and NSS builds
 * libcurl-gnutls.so.4 and libcurl-nss.so.4. All share the ABI of curl 7.x/8.x. */
static void load(void) {
    static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl-nss.so.4"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !curl.lib; i++)
        curl.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!curl.lib) {
        snprintf(load_error, sizeof load_error,
                 "libcurl.so.4 is not installed; `xinfer pull`, hub names and `xinfer bench` "
                 "load it when used (dnf/yum install libcurl, or apt install libcurl4)");
        return;
    }
#define BIND(ret, name, params)                                                              \
    if (!(*(void **)&curl.name = dlsym(curl.lib, "curl_" #name))) {                          \
        snprintf(load_error, sizeof load_error, "libcurl.so.4 has no curl_" #name            \
                 " (xinfer needs libcurl 7.66 or later)");                                   \
        dlclose(curl.lib);                                                                   \
        curl.lib = NULL;                                                                     \
        return;                                                                              \
    }
    CURL_FUNCS(BIND)
#undef BIND
}

static int loaded(void) {
    pthread_once(&load_once, load);
    return curl.lib != NULL;
}

CURLcode curl_global_init(long flags) { return loaded() ? curl.global_init(flags) : CURLE_FAILED_INIT; }

const char *curl_easy_strerror(CURLcode code) {
    return loaded() ? curl.easy_strerror(code) : load_error;
}
const char *curl_multi_strerror(CURLMcode code) {
    return loaded() ? curl.multi_strerror(code) : load_error;
}

/* The callers call curl_global_init first and stop when it fails, so from here on the
 * library is loaded; the checks keep a stray call from jumping through NULL. */
CURL *curl_easy_init(void) { return loaded() ? curl.easy_init() : NULL; }
void curl_easy_cleanup(CURL *h) { if (loaded()) curl.easy_cleanup(h); }
CURLcode curl_easy_perform(CURL *h) { return loaded() ? curl.easy_perform(h) : CURLE_FAILED_INIT; }
CURLM *curl_multi_init(void) { return loaded() ? curl.multi_init() : NULL; }
CURLMcode curl_multi_cleanup(CURLM *m) { return loaded() ? curl.multi_cleanup(m) : CURLM_INTERNAL_ERROR; }
CURLMcode curl_multi_add_handle(CURLM *m, CURL *h) {
    return loaded() ? curl.multi_add_handle(m, h) : CURLM_INTERNAL_ERROR;
}
CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h) {
    return loaded() ? curl.multi_remove_handle(m, h) : CURLM_INTERNAL_ERROR;
}
CURLMcode curl_multi_perform(CURLM *m, int *running) {
    return loaded() ? curl.multi_perform(m, running) : CURLM_INTERNAL_ERROR;
}
CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd *fds, unsigned n, int ms, int *numfds) {
    return loaded() ? curl.multi_poll(m, fds, n, ms, numfds) : CURLM_INTERNAL_ERROR;
}
CURLMsg *curl_multi_info_read(CURLM *m, int *left) { return loaded() ? curl.multi_info_read(m, left) : NULL; }
struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s) {
    return loaded() ? curl.slist_append(list, s) : NULL;
}
void curl_slist_free_all(struct curl_slist *list) { if (loaded()) curl.slist_free_all(list); }

/* The variadic calls: the option number says the argument's type, as libcurl itself reads
 * it (CURLOPTTYPE_* bases: long, object pointer, function pointer, curl_off_t, blob). */
#define FORWARD_OPTION(call, h, option)                                                      \
    do {                                                                                     \
        va_list ap;                                                                          \
        va_start(ap, option);                                                                \
        const int type = (int)(option) / 10000 * 10000;                                      \
        if (type == CURLOPTTYPE_LONG) rc = call(h, option, va_arg(ap, long));                 \
        else if (type == CURLOPTTYPE_OFF_T) rc = call(h, option, va_arg(ap, curl_off_t));     \
        else if (type == CURLOPTTYPE_FUNCTIONPOINT) rc = call(h, option, va_arg(ap, void (*)(void))); \
        else rc = call(h, option, va_arg(ap, void *));                                       \
        va_end(ap);                                                                          \
    } while (0)

CURLcode curl_easy_setopt(CURL *h, CURLoption option, ...) {
    if (!loaded()) return CURLE_FAILED_INIT;
    CURLcode rc;
    FORWARD_OPTION(curl.easy_setopt, h, option);
    return rc;
}

CURLMcode curl_multi_setopt(CURLM *m, CURLMoption option, ...) {
    if (!loaded()) return CURLM_INTERNAL_ERROR;
    CURLMcode rc;
    FORWARD_OPTION(curl.multi_setopt, m, option);
    return rc;
}

/* Every CURLINFO_* argument is a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...) {
    if (!loaded()) return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, info);
    void *out = va_arg(ap, void *);
    va_end(ap);
    return curl.easy_getinfo(h, info, out);
}

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>

// OpenSSL spells these as macros, which Swift cannot call; thin inline wrappers.

static inline int ferry_ssl_ctx_set_tls12_to_13(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1
        && SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1;
}
static inline long ferry_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long ferry_ssl_mode_release_buffers(void) { return SSL_MODE_RELEASE_BUFFERS; }
static inline long ferry_ssl_ctx_add1_chain_cert(SSL_CTX *ctx, X509 *x) { return SSL_CTX_add1_chain_cert(ctx, x); }
static inline long ferry_ssl_set_sni(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
static inline long ferry_bio_pending(BIO *b) { return (long)BIO_ctrl_pending(b); }
static inline long ferry_bio_mem_data(BIO *b, char **p) { return BIO_get_mem_data(b, p); }
static inline int ferry_bio_reset(BIO *b) { return (int)BIO_reset(b); }
static inline void ferry_bio_set_mem_eof_return(BIO *b, int v) { BIO_set_mem_eof_return(b, v); }
static inline int ferry_err_reason(unsigned long e) { return ERR_GET_REASON(e); }
static inline int ferry_err_lib(unsigned long e) { return ERR_GET_LIB(e); }
static inline void ferry_openssl_free(void *p) { OPENSSL_free(p); }
static inline unsigned long ferry_xn_flag_rfc2253(void) { return XN_FLAG_RFC2253; }

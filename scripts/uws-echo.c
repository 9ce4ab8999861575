/* uWebSockets' EchoServer example, written against uWS's C API (capi/libuwebsockets.h) as
   socketify 0.0.31 ships it compiled (libsocketify_linux_amd64.so: uWS and uSockets on libuv).
   Built by scripts/uws-echo, for ../shared/tools/perf/anchors --server "uWS=DIR/EchoServer {port}".
   Like EchoServer.cpp: one thread, every message echoed with its opcode, the same limits; no
   compression (wsload does not offer it). The declarations below are that C API's, as
   socketify's native.py declares them. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <signal.h>
struct us_socket_context_options_t { const char *key_file_name, *cert_file_name, *passphrase, *dh_params_file_name, *ca_file_name, *ssl_ciphers; int ssl_prefer_low_memory_usage; };
struct us_listen_socket_t;
typedef int uws_compress_options_t; typedef int uws_opcode_t;
typedef struct { int port; const char *host; int options; } uws_app_listen_config_t;
typedef struct uws_app_s uws_app_t; typedef struct uws_req_s uws_req_t; typedef struct uws_res_s uws_res_t;
typedef struct uws_socket_context_s uws_socket_context_t; typedef struct uws_websocket_s uws_websocket_t;
typedef void (*uws_websocket_handler)(uws_websocket_t *ws, void* user_data);
typedef void (*uws_websocket_message_handler)(uws_websocket_t *ws, const char *message, size_t length, uws_opcode_t opcode, void* user_data);
typedef void (*uws_websocket_ping_pong_handler)(uws_websocket_t *ws, const char *message, size_t length, void* user_data);
typedef void (*uws_websocket_close_handler)(uws_websocket_t *ws, int code, const char *message, size_t length, void* user_data);
typedef void (*uws_websocket_upgrade_handler)(uws_res_t *response, uws_req_t *request, uws_socket_context_t *context, void* user_data);
typedef void (*uws_websocket_subscription_handler)(uws_websocket_t *ws, const char *topic_name, size_t topic_name_length, int a, int b, void* user_data);
typedef struct {
    uws_compress_options_t compression; unsigned int maxPayloadLength; unsigned short idleTimeout; unsigned int maxBackpressure;
    bool closeOnBackpressureLimit; bool resetIdleTimeoutOnSend; bool sendPingsAutomatically; unsigned short maxLifetime;
    uws_websocket_upgrade_handler upgrade; uws_websocket_handler open; uws_websocket_message_handler message; uws_websocket_handler drain;
    uws_websocket_ping_pong_handler ping; uws_websocket_ping_pong_handler pong; uws_websocket_close_handler close; uws_websocket_subscription_handler subscription;
} uws_socket_behavior_t;
typedef void (*uws_listen_handler)(struct us_listen_socket_t *listen_socket, uws_app_listen_config_t config, void *user_data);
uws_app_t *uws_create_app(int ssl, struct us_socket_context_options_t options);
void uws_ws(int ssl, uws_app_t *app, const char *pattern, uws_socket_behavior_t behavior, void* user_data);
int uws_ws_send(int ssl, uws_websocket_t *ws, const char *message, size_t length, uws_opcode_t opcode);
void uws_app_listen(int ssl, uws_app_t *app, int port, uws_listen_handler handler, void *user_data);
void uws_app_run(int ssl, uws_app_t *);

static void on_message(uws_websocket_t *ws, const char *m, size_t n, uws_opcode_t op, void *u) { (void)u; uws_ws_send(0, ws, m, n, op); }
static void on_listen(struct us_listen_socket_t *s, uws_app_listen_config_t c, void *u) { (void)u; if (s) { printf("Listening on port %d\n", c.port); fflush(stdout); } }
int main(int argc, char **argv) {
    /* as anchors does for its own uWS entry: uWS plain-TCP writes do not use MSG_NOSIGNAL */
    signal(SIGPIPE, SIG_IGN);
    int port = argc > 1 ? atoi(argv[1]) : 9001;
    struct us_socket_context_options_t o; memset(&o, 0, sizeof o);
    uws_app_t *app = uws_create_app(0, o);
    uws_socket_behavior_t b; memset(&b, 0, sizeof b);
    b.compression = 0; b.maxPayloadLength = 100u * 1024 * 1024; b.idleTimeout = 16; b.maxBackpressure = 100u * 1024 * 1024;
    b.closeOnBackpressureLimit = false; b.resetIdleTimeoutOnSend = false; b.sendPingsAutomatically = true;
    b.message = on_message;
    uws_ws(0, app, "/*", b, NULL);
    uws_app_listen(0, app, port, on_listen, NULL);
    uws_app_run(0, app);
    return 0;
}

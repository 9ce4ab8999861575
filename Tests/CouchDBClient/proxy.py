"""A counting, optionally slowed, HTTP proxy between the replicator under test and CouchDB
(`resume`, `restart`): it forwards every request to the upstream CouchDB unchanged and records
what a pull asked for —
- documents requested by `POST …/_bulk_get` (the `docs` array of each body) and by single
  `GET /db/doc?open_revs=…` reads (one per request);
- the `since` of every `_changes` request (query string or JSON body);
and can slow bodies to `rate` bytes per second (both ways) so a kill or a restart lands
mid-replication whatever the client's speed. When the upstream is down it drops the client's
connection without an answer, as a CouchDB that went away does. `refuse` names endpoints
(`_bulk_get`) it answers itself with CouchDB 1.x's 404 `not_found`, as a server without them.

A plain threading server (HTTP/1.1, keep-alive); answers of unknown length (a `_changes` feed)
are passed on chunked, as they arrive."""
import http.client
import http.server
import json
import socketserver
import threading
import time
from urllib.parse import parse_qs, urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with getattr(self, "lock", threading.Lock()):
            self.bulk_get_docs = 0
            self.single_gets = 0
            self.requests = 0
            self.since = []
            self.methods = {}

    def snapshot(self):
        with self.lock:
            return {"bulk_get_docs": self.bulk_get_docs, "single_gets": self.single_gets, "requests": self.requests,
                    "since": list(self.since), "methods": dict(self.methods)}


class Proxy:
    def __init__(self, upstream_port, rate=None, refuse=()):
        self.upstream_port, self.rate, self.counters, self.refuse = upstream_port, rate, Counters(), set(refuse)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return data
                        data += proxy.slow(self.rfile.read(size))
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                out = b""
                while len(out) < n:
                    chunk = self.rfile.read(min(65536, n - len(out)))
                    if not chunk:
                        break
                    out += proxy.slow(chunk)
                return out

            def _count(self, body):
                u = urlsplit(self.path)
                parts = [p for p in u.path.split("/") if p]
                q = parse_qs(u.query)
                c = proxy.counters
                with c.lock:
                    c.requests += 1
                    key = f"{self.command} {parts[1] if len(parts) > 1 and parts[1].startswith('_') else ('doc' if len(parts) > 1 else 'db')}"
                    c.methods[key] = c.methods.get(key, 0) + 1
                    if len(parts) >= 2 and parts[1] == "_bulk_get":
                        try:
                            c.bulk_get_docs += len(json.loads(body or b"{}").get("docs", []))
                        except ValueError:
                            pass
                    elif len(parts) >= 2 and parts[1] == "_changes":
                        since = q.get("since", [None])[0]
                        if since is None and body:
                            try:
                                since = json.loads(body).get("since")
                            except (ValueError, AttributeError):
                                pass
                        c.since.append(since)
                    elif self.command == "GET" and len(parts) >= 2 and not parts[1].startswith("_") and "open_revs" in q:
                        c.single_gets += 1

            def _forward(self):
                body = self._body()
                self._count(body)
                parts = [p for p in urlsplit(self.path).path.split("/") if p]
                if len(parts) >= 2 and parts[1] in proxy.refuse:
                    answer = json.dumps({"error": "not_found", "reason": "missing"}).encode()
                    self.send_response_only(404, "Object Not Found")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    self.wfile.flush()
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != "content-length"}
                headers["Host"] = f"127.0.0.1:{proxy.upstream_port}"
                if body or self.command in ("POST", "PUT"):
                    headers["Content-Length"] = str(len(body))
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=300)
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    r = conn.getresponse()
                except OSError:
                    self.close_connection = True  # upstream down: drop the client without an answer
                    return
                try:
                    self.send_response_only(r.status, r.reason)
                    length = r.getheader("Content-Length")
                    for k, v in r.getheaders():
                        if k.lower() not in HOP:
                            self.send_header(k, v)
                    if length is None and self.command != "HEAD" and r.status not in (204, 304):
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        while True:
                            chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
                            if not chunk:
                                break
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), proxy.slow(chunk)))
                            self.wfile.flush()
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.end_headers()
                        while True:
                            chunk = r.read(65536)
                            if not chunk:
                                break
                            self.wfile.write(proxy.slow(chunk))
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_COPY = _forward

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # a client that hung up (a killed sync) is no error of the proxy's

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def slow(self, chunk):
        if self.rate:
            time.sleep(len(chunk) / self.rate)
        return chunk

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

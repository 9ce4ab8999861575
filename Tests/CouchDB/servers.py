"""The two servers under test, started by this harness and stopped by it: a real Apache CouchDB
3.5 (`../shared/tools/couchdb/couchdb start DIR --port P`) and `ferry serve --data DIR --port 0`
with one server admin. `Server` wraps either with a `requests` session and the URL forms the
checks need (an authenticated session for the harness, credentials written in the URL for
CouchDB's replicator, as CouchDB users write them)."""
import os
import subprocess
import sys
import time
from urllib.parse import quote

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib: the one `ferry serve` driver of the Python checks)
from ferryd import free_port  # noqa: E402

USER, PASSWORD = "fidelity", "fidelity-pass"  # Ferry's server admin (`ferry user add … --role '*=admin'`)
COUCH_USER, COUCH_PASSWORD = "admin", "admin-pass"  # the tool's default admin


def doc_path(doc_id):
    """A document ID as a URL path segment. Design documents keep their literal slash: CouchDB
    answers `_design%2Fx` with a 301 to `_design/x`, and clients write the slash."""
    if doc_id.startswith("_design/"):
        return "_design/" + quote(doc_id[len("_design/"):], safe="")
    return quote(doc_id, safe="")


class HTTPError(Exception):
    """A request the harness itself needed (seeding, reading) answered an unexpected status."""


class Server:
    """One server: `kind` is "couchdb" or "ferry"; `base` is `http://127.0.0.1:PORT`."""

    def __init__(self, kind, base, user, password, name=None):
        self.kind, self.base, self.user, self.password = kind, base.rstrip("/"), user, password
        self.name = name or ("CouchDB" if kind == "couchdb" else "Ferry")
        self.http = requests.Session()
        self.http.auth = (user, password)
        self.http.headers["Accept"] = "application/json"

    def clone(self):
        """The same server with a session of its own (one per thread: a `requests.Session` is
        not documented as thread-safe)."""
        return Server(self.kind, self.base, self.user, self.password, self.name)

    def __repr__(self):
        return self.name

    def replication_url(self, db):
        """`http://user:pw@127.0.0.1:P/db`: what a CouchDB user hands `_replicate`."""
        host = self.base.split("://", 1)[1]
        return f"http://{quote(self.user, safe='')}:{quote(self.password, safe='')}@{host}/{quote(db, safe='')}"

    def request(self, method, path, expect=None, timeout=600, **kw):
        """`path` is relative to the base URL. With `expect` (a status or a tuple of them), any
        other status raises HTTPError with the answer's head."""
        r = self.http.request(method, self.base + path, timeout=timeout, **kw)
        if expect is not None:
            codes = expect if isinstance(expect, tuple) else (expect,)
            if r.status_code not in codes:
                raise HTTPError(f"{self!r} {method} {path} -> {r.status_code} {r.text[:300]}")
        return r

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)


class CouchDB:
    """`couchdb start DIR --port P` on a free port (tried three times: the port is free when
    picked, another process could take it before CouchDB binds); `stop()` runs
    `couchdb stop DIR --wipe` and is safe to call twice."""

    def __init__(self, tool, directory):
        self.tool, self.dir, self.started = tool, directory, False
        last = ""
        for _ in range(3):
            port = free_port()
            p = subprocess.run([tool, "start", directory, "--port", str(port)], capture_output=True, text=True)
            self.started = True
            if p.returncode == 0 and p.stdout.strip().startswith("http://"):
                self.server = Server("couchdb", f"http://127.0.0.1:{port}", COUCH_USER, COUCH_PASSWORD)
                # Each replication job sleeps a random 0–5 s before its first request
                # (`[replicator] startup_jitter`, default 5000 ms: spreads a node's jobs after a
                # restart). For one-shot `_replicate` timings that sleep was most of the spread
                # (a 0.6 s copy answered after 0.8–5.3 s); with it off a run is the copy itself.
                self.set_config("replicator", "startup_jitter", "0")
                return
            last = p.stdout + p.stderr
            subprocess.run([tool, "stop", directory, "--wipe"], capture_output=True)
        raise SystemExit(f"CouchDB did not start: {last[-800:]}")

    def set_config(self, section, key, value):
        self.server.put(f"/_node/_local/_config/{section}/{key}", json=value, expect=200)

    def stop(self):
        if self.started:
            subprocess.run([self.tool, "stop", self.dir, "--wipe"], capture_output=True)
            self.started = False


class Ferry(ferryd.Daemon):
    """`ferry serve --data DIR --port 0 --no-advertise` with one server admin added first, started
    by Tests/lib/ferryd.py (ready when its first line says where it serves; stderr to LOG_PATH,
    stdout beside it); `server` is its Server. `stop()` ends that one process (by its handle):
    SIGTERM, then SIGKILL after 15 s; `crashed()` tells an exit or a Swift crash."""

    def __init__(self, binary, directory, log_path):
        # --no-advertise: a test daemon has no business on the LAN's mDNS (nor renaming itself
        # around other test daemons' names).
        log_dir, log_name = os.path.split(os.path.splitext(log_path)[0])
        super().__init__(binary, directory, name="Ferry", port=0, flags=["--no-advertise"],
                         users=[[USER, "--password", PASSWORD, "--role", "*=admin"]],
                         log_dir=log_dir, log_name=log_name, stop_timeout=15)
        try:
            self.start()
        except ferryd.SetupError as e:
            raise SystemExit(f"ferry serve did not start: {e}")
        self.server = Server("ferry", self.url, USER, PASSWORD)


def replicate(couch, source, target, timeout=900):
    """CouchDB's own replicator, one-shot (`POST /_replicate` on `couch`), from `source` to
    `target` (URLs with credentials). Returns (answer dict, seconds, error text or None); the
    answer's `history[0]` carries `docs_written`, `docs_read`, `doc_write_failures`."""
    t0 = time.monotonic()
    try:
        r = couch.post("/_replicate", json={"source": source, "target": target}, timeout=timeout)
    except requests.RequestException as e:
        return {}, time.monotonic() - t0, f"{type(e).__name__}: {e}"
    seconds = time.monotonic() - t0
    try:
        answer = r.json()
    except ValueError:
        answer = {"raw": r.text[:300]}
    if r.status_code != 200 or not answer.get("ok"):
        return answer, seconds, f"HTTP {r.status_code} {str(answer)[:400]}"
    return answer, seconds, None


COUNTERS = ("docs_written", "docs_read", "missing_found", "missing_checked", "doc_write_failures")


def stats(answer):
    """This run's counters from a `_replicate` answer. CouchDB 3.5 restores a job's counters
    from its last checkpoint, so `history[0]` is cumulative over every session with the same
    replication ID (seen: a second identical run reports the first run's `docs_written` plus
    its own); this run's share is `history[0] - history[1]`. `no_changes` means zeros."""
    if answer.get("no_changes"):
        return {k: 0 for k in COUNTERS}
    history = answer.get("history") or [{}]
    out = dict(history[0])
    if len(history) > 1:
        for k in COUNTERS:
            if isinstance(out.get(k), int) and isinstance(history[1].get(k), int):
                out[k] = out[k] - history[1][k]
    return out

"""Differential test of Ferry's REST API against a real Apache CouchDB 3.5 (issue 32, item 1).

The same request sequences (cases.py) go to `ferry serve` and to CouchDB; their answers are
compared per step:

- the status code;
- the headers clients rely on: the media type of `Content-Type`, the `Access-Control-*` ones
  (both servers allow one origin, with credentials), the presence and form
  (quoted) of `ETag` (its value too when it is a revision), the presence of `Date`,
  `Location` (host and port removed; an absolute URL and a path are different forms),
  `Cache-Control`, the cookie name and attribute names of `Set-Cookie`, `Accept-Ranges`,
  `Content-Range`, `Content-Encoding`, and `Transfer-Encoding: chunked` on the long
  `_changes` feeds (longpoll, continuous, eventsource);
- the body: JSON (keys, value types and values, recursively; `reason` beside an `error` is
  ignored, its wording is free), the line layout of a normal or longpoll `_changes` answer
  (CouchDB writes `{"results":[`, one row per line, `],`, `"last_seq":…`), a continuous feed
  line by line, an eventsource feed event by event, other bodies byte for byte.

Normalised before the comparison (so not differences):

- Revisions: each server makes its own hashes (CouchDB MD5, Ferry SHA-1), so `N-<hash>` becomes
  `N-*` and a bare hash (`_revisions.ids`, `possible_ancestors`) `*` — unless the case itself
  wrote that hash (`new_edits:false`, `_revs_diff`, `open_revs`, …): then both must answer it
  exactly. Server-made 32/40-digit hex strings (UUIDs, generated document IDs) likewise.
- Sequences (`seq`, `last_seq`, `update_seq`, `purge_seq`, eventsource `id:`): CouchDB's are
  opaque strings `N-g1AAAA…`, Ferry's integers as strings. Both are compared by their leading
  integer N — with one shard (`q=1`, set for every database here) CouchDB's N is the number of
  updates, exactly what Ferry counts — and by their JSON type (string vs number): so `"3"` and
  `"3-g1AAA…"` agree, `"3"` and `3`, or `"3"` and `"4-…"`, do not. Cases that pass a sequence
  back (`since=`) use the one the same server answered (`{seq}`), never a literal.
- Values that differ from run to run on one server alone: `uuid`, `instance_start_time`,
  `sizes` (shape only), timestamps and replication session IDs; `Date`'s value.

The servers: CouchDB from `../shared/tools/couchdb` (admin `admin`/`admin-pass`) with
`[cluster] q = 1`, `[chttpd_auth_lockout] mode = off` (the wrong-password cases would lock the
admin out) and CORS on for one origin with credentials; `ferry serve --data TMP --port 0` with
the same admin (`ferry user add … --role '*=admin'`), `--conflict-policy keep` (CouchDB keeps
every leaf; Ferry's default, `resolve`, settles conflicts by design), the same CORS origin, and
no login throttling. Cases run one at a time (each on both servers at once), so `_all_dbs`
sees only the system databases and the case's own.

A difference is allowed only when a row of the table in Protocol/rest.md, section
`## Deliberate differences from CouchDB` (`| case-id glob | aspect glob | reason |`) matches
it; any other is printed and the exit status is 1. Aspects are `status`, `header:NAME`,
`json:$.path[0].key` (the JSON path), `lines` (the `_changes` line layout), `stream`,
`body`. Globs: `*` any run of characters, `?` one; nothing else is special.

Usage: differential.py [--ferry BIN] [--couchdb TOOL] [--only GLOB]… [--list] [-v]
Exit: 0 no unlisted difference, 1 some, 2 setup failed, 77 no CouchDB (SKIPPED).
"""
from __future__ import annotations

import argparse
import base64
import concurrent.futures
import gzip
import http.client
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "lib"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "Tests", "CouchDB"))

import ferryd  # noqa: E402  (Tests/lib: the one `ferry serve` driver of the Python checks)

ADMIN, PASSWORD = "admin", "admin-pass"     # CouchDB tool's admin; Ferry gets the same one
CORS_ORIGIN = "http://app.example"          # the one origin both servers allow (CORS on, with credentials)
SKIP = 77
REQUEST_TIMEOUT = 20.0


# -- the case DSL ---------------------------------------------------------------------------------

class Step:
    """One request. `path` and string values in `body`/`headers` may hold `{db}`, `{db2}`,
    `{rev:ID}` (the current revision this server gave ID), `{rev:ID@N}` (the revision of
    generation N it gave), `{seq}` (the last sequence this server answered), `{url}` (this
    server's base URL with credentials), `{host}`. `body`: a JSON value, or bytes/str sent as
    they are (`ctype` then names the Content-Type). `auth`: None for no credentials, or a
    (name, password) pair. `gzip`: send the body gzip-encoded (`Content-Encoding: gzip`, or the
    coding named). `stream`: read a long feed until `until` (a predicate on the received text)
    or `stream` seconds. `ignore`: aspect globs not compared for this step. `during`: a Step
    run (on a new connection) while this one waits — the write a longpoll feed waits for."""

    def __init__(self, method, path, body=None, *, headers=None, ctype=None, auth=(ADMIN, PASSWORD),
                 gzip=None, stream=None, until=None, ignore=(), during=None, accept="application/json"):
        self.method, self.path, self.body = method, path, body
        self.headers, self.ctype, self.auth, self.gzip = dict(headers or {}), ctype, auth, gzip
        self.stream, self.until, self.ignore, self.during = stream, until, tuple(ignore), during
        self.accept = accept

    def describe(self):
        return f"{self.method} {self.path}"


def GET(path, **kw):
    return Step("GET", path, **kw)


def HEAD(path, **kw):
    return Step("HEAD", path, **kw)


def PUT(path, body=None, **kw):
    return Step("PUT", path, body, **kw)


def POST(path, body=None, **kw):
    return Step("POST", path, body, **kw)


def DELETE(path, **kw):
    return Step("DELETE", path, **kw)


def COPY(path, **kw):
    return Step("COPY", path, **kw)


def REQ(method, path, body=None, **kw):
    return Step(method, path, body, **kw)


class Case:
    """`id`: dotted, unique; `steps`: run in order on each server. `dbs`: how many fresh
    databases the case gets (`{db}`, `{db2}`), made before the steps (`PUT /NAME?q=1`, not
    compared) and deleted after them."""

    def __init__(self, cid, steps, dbs=1):
        self.id, self.steps, self.dbs = cid, list(steps), dbs


# -- HTTP -----------------------------------------------------------------------------------------

class Answer:
    def __init__(self, status, headers, body, chunked, error=None):
        self.status, self.headers, self.body, self.chunked, self.error = status, headers, body, chunked, error

    def header(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        return vals[0] if vals else None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None


def send(host, port, method, target, headers, body, stream=None, until=None):
    """One request on a new connection. A `stream` answer is read until `until(text)` holds,
    the server ends it, or `stream` seconds pass (a deadline, then the connection is closed)."""
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT)
    try:
        conn.putrequest(method, target, skip_host=False, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        chunked = (r.getheader("Transfer-Encoding") or "").lower() == "chunked"
        hdrs = list(r.getheaders())
        if method == "HEAD":
            return Answer(r.status, hdrs, b"", chunked)
        if stream is None:
            try:
                data = r.read()
            except http.client.IncompleteRead as e:     # the body ended early: compare what came
                data = e.partial
            return Answer(r.status, hdrs, data, chunked)
        deadline = time.monotonic() + stream
        data = b""
        while time.monotonic() < deadline:
            conn.sock.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
            try:
                chunk = r.read1(65536)
            except (socket.timeout, TimeoutError):
                continue
            except http.client.IncompleteRead as e:
                data += e.partial
                break
            if not chunk:
                break
            data += chunk
            if until and until(data.decode("utf-8", "replace")):
                break
        return Answer(r.status, hdrs, data, chunked)
    except (OSError, http.client.HTTPException) as e:
        return Answer(0, [], b"", False, error=f"{type(e).__name__}: {e}")
    finally:
        conn.close()


# -- one server -----------------------------------------------------------------------------------

VAR = re.compile(r"\{(db2|db|rev|seq|url|host|cookie)(?::([^{}]+))?\}")
REV = re.compile(r"^(\d+)-([0-9a-zA-Z]+)$")


class Runner:
    """Runs cases on one server, with this server's own revisions and sequences."""

    def __init__(self, name, base):
        self.name, self.base = name, base.rstrip("/")
        self.transient_retries = 0
        u = urllib.parse.urlsplit(self.base)
        self.host, self.port = u.hostname, u.port

    def run_case(self, case, dbnames):
        ctx = {"db": dbnames[0], "db2": dbnames[1] if len(dbnames) > 1 else dbnames[0] + "-2",
               "revs": {}, "gens": {}, "seq": "0"}
        answers = []
        for db in dbnames:
            self.raw("PUT", f"/{db}?q=1")
        try:
            for step in case.steps:
                answers.append(self.run_step(step, ctx))
        finally:
            for db in dbnames:
                self.raw("DELETE", f"/{urllib.parse.quote(db, safe='')}")
        return answers

    def raw(self, method, path, body=None):
        h = {"Authorization": basic(ADMIN, PASSWORD), "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        return send(self.host, self.port, method, path, h, data)

    def subst(self, s, ctx):
        def one(m):
            name, arg = m.group(1), m.group(2)
            if name in ("db", "db2"):
                return ctx[name]
            if name == "seq":
                return str(ctx["seq"])
            if name == "cookie":
                return ctx.get("cookie", "AuthSession=none")
            if name == "url":
                return f"http://{ADMIN}:{PASSWORD}@{self.host}:{self.port}"
            if name == "host":
                return f"{self.host}:{self.port}"
            if "@" in arg:
                doc, gen = arg.rsplit("@", 1)
                return ctx["gens"].get(doc, {}).get(int(gen), f"{gen}-unknown")
            return ctx["revs"].get(arg, "0-unknown")
        return VAR.sub(one, s)

    def subst_value(self, v, ctx):
        if isinstance(v, str):
            return self.subst(v, ctx)
        if isinstance(v, list):
            return [self.subst_value(x, ctx) for x in v]
        if isinstance(v, dict):
            return {self.subst(k, ctx): self.subst_value(x, ctx) for k, x in v.items()}
        return v

    def run_step(self, step, ctx):
        path = self.subst(step.path, ctx)
        headers = {}
        if step.accept:
            headers["Accept"] = step.accept
        if step.auth:
            headers["Authorization"] = basic(*step.auth)
        body = None
        if step.body is not None:
            if isinstance(step.body, bytes):
                body = step.body
            elif isinstance(step.body, str):
                body = self.subst(step.body, ctx).encode()
            else:
                body = json.dumps(self.subst_value(step.body, ctx)).encode()
                headers["Content-Type"] = "application/json"
        if step.ctype:
            headers["Content-Type"] = step.ctype
        for k, v in step.headers.items():
            if v is None:
                headers.pop(k, None)
            else:
                headers[k] = self.subst(v, ctx)
        if step.gzip and body is not None:
            body = gzip.compress(body, mtime=0)
            headers["Content-Encoding"] = step.gzip if isinstance(step.gzip, str) else "gzip"
        if step.during is not None:
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                fut = ex.submit(send, self.host, self.port, step.method, path, headers, body, step.stream, step.until)
                self.run_step(step.during, ctx)
                ans = fut.result()
        else:
            ans = send(self.host, self.port, step.method, path, headers, body, step.stream, step.until)
            ans = self.retry_transient(ans, step, path, headers, body)
        self.capture(ans, ctx)
        return ans

    def retry_transient(self, ans, step, path, headers, body):
        """CouchDB answers a read that races its own database deletion (the shard still closing)
        with 500 internal_server_error now and then; that is the oracle's hiccup, not an answer to
        compare. A GET or HEAD that gets one is asked again, a bounded number of times."""
        if self.name != "couchdb" or step.method not in ("GET", "HEAD"):
            return ans
        for attempt in range(1, 8):
            if ans.status != 500 or b"internal_server_error" not in (ans.body or b""):
                break
            self.transient_retries += 1
            time.sleep(0.05 * attempt)
            ans = send(self.host, self.port, step.method, path, headers, body, step.stream, step.until)
        return ans

    def capture(self, ans, ctx):
        """Records the revisions, the last sequence and the session cookie this server answered."""
        for v in ans.header_all("Set-Cookie"):
            if v.startswith("AuthSession=") and not v.startswith("AuthSession=;"):
                ctx["cookie"] = v.split(";", 1)[0]
        obj = ans.json()

        def rev_of(doc, rev, current):
            m = REV.match(rev) if isinstance(rev, str) else None
            if not m or not isinstance(doc, str):
                return
            if current:
                ctx["revs"][doc] = rev
            ctx["gens"].setdefault(doc, {})[int(m.group(1))] = rev

        def walk(o):
            if isinstance(o, dict):
                if "id" in o and "rev" in o and (o.get("ok") is True):
                    rev_of(o["id"], o["rev"], True)
                if "_id" in o and "_rev" in o:
                    rev_of(o["_id"], o["_rev"], o["_id"] not in ctx["revs"])
                for k in ("last_seq", "update_seq"):
                    if k in o and isinstance(o[k], (str, int)):
                        ctx["seq"] = o[k]
                for v in o.values():
                    walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)
        if obj is not None and 200 <= ans.status < 300:
            if isinstance(obj, list) and all(isinstance(r, dict) and "rev" in r and "id" in r for r in obj):
                for r in obj:       # _bulk_docs answers: {"id","rev"} rows without "ok" too
                    if "error" not in r:
                        rev_of(r["id"], r["rev"], True)
            walk(obj)
        elif ans.status in (200, 201, 202) and b"last_seq" in ans.body:
            for line in ans.body.decode("utf-8", "replace").splitlines():
                try:
                    walk(json.loads(line))
                except ValueError:
                    pass


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- normalisation ----------------------------------------------------------------------------------

SEQ_KEYS = {"seq", "last_seq", "update_seq", "purge_seq", "committed_update_seq", "source_last_seq"}
OPAQUE_KEYS = {"uuid", "instance_start_time", "session_id", "start_time", "end_time", "git_sha",
               "start_last_seq", "end_last_seq", "recorded_seq", "replication_id_version", "pid",
               "started_on", "updated_on", "last_updated", "doc_write_failures_time", "node", "time",
               "derived_key", "salt", "execution_time_ms"}
SHAPE_KEYS = {"sizes", "other", "data_size", "disk_size"}
HEX = re.compile(r"^[0-9a-f]{32}$|^[0-9a-f]{40}$")
LEAD_INT = re.compile(r"^(\d+)")


class Seq:
    """A sequence as compared: its leading integer and its JSON type."""

    def __init__(self, v, quoted=False):
        self.kind = ("quoted " if quoted else "") + type(v).__name__
        m = LEAD_INT.match(str(v)) if isinstance(v, (str, int)) else None
        self.n = int(m.group(1)) if m else v

    def __eq__(self, other):
        return isinstance(other, Seq) and (self.kind, self.n) == (other.kind, other.n)

    def __repr__(self):
        kind = self.kind.replace("str", "string").replace("int", "number")
        return f"seq {self.n} ({'JSON-quoted ' + kind[7:] if kind.startswith('quoted ') else kind})"


def literal_tokens(case):
    """Every alphanumeric run of 3+ characters in the case's own text: the revision hashes it
    wrote itself, kept exactly when answered."""
    text = repr([(s.path, s.body, s.headers, s.during and (s.during.path, s.during.body)) for s in case.steps])
    return set(re.findall(r"[0-9a-zA-Z]{3,}", text))


def norm(v, lit, key=None):
    if key in SEQ_KEYS and isinstance(v, (str, int)) and not isinstance(v, bool):
        return Seq(v)
    if key in OPAQUE_KEYS and not isinstance(v, (dict, list)):
        return f"<{type(v).__name__}>"
    if key in SHAPE_KEYS:
        return shape(v)
    if isinstance(v, dict):
        out = {k: norm(x, lit, k) for k, x in v.items()}
        if "error" in out and "reason" in out:
            del out["reason"]
        return out
    if isinstance(v, list):
        return [norm(x, lit, key if key in ("ids", "possible_ancestors", "missing") else None) for x in v]
    if isinstance(v, str):
        m = REV.match(v)
        if m and len(m.group(2)) >= 20 and m.group(2) not in lit:
            return f"{m.group(1)}-*"
        if HEX.match(v) and v not in lit:
            return "<hex>"
    return v


def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v]
    return f"<{type(v).__name__}>"


def typename(v):
    if isinstance(v, Seq):
        return "seq"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(v)]


def short(v, n=160):
    s = repr(v) if isinstance(v, Seq) else json.dumps(v, sort_keys=True, default=repr)
    return s if len(s) <= n else s[:n] + "…"


def jdiff(a, b, path, out):
    ta, tb = typename(a), typename(b)
    if ta != tb:
        out.append((f"json:{path}", short(a), short(b)))
        return
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if re.match(r"^[A-Za-z_][\w]*$", k) else f"{path}[{json.dumps(k)}]"
            if k not in a:
                out.append((f"json:{p}", "<absent>", short(b[k])))
            elif k not in b:
                out.append((f"json:{p}", short(a[k]), "<absent>"))
            else:
                jdiff(a[k], b[k], p, out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append((f"json:{path}", f"{len(a)} items {short(a, 120)}", f"{len(b)} items {short(b, 120)}"))
        for i, (x, y) in enumerate(zip(a, b)):
            jdiff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append((f"json:{path}", short(a), short(b)))


# -- comparing two answers ---------------------------------------------------------------------------

def media(ct):
    return ct.split(";")[0].strip().lower() if ct else None


def location(v):
    if v is None:
        return None
    u = urllib.parse.urlsplit(v)
    form = "absolute" if u.scheme else "path"
    return f"{form} {u.path}" + (f"?{u.query}" if u.query else "")


def cookie_shape(v):
    parts = [p.strip() for p in v.split(";")]
    name = parts[0].split("=", 1)[0]
    return name + "; " + "; ".join(sorted(p.split("=", 1)[0].lower() for p in parts[1:] if p))


def etag(v, lit):
    if v is None:
        return None
    quoted = len(v) >= 2 and v.startswith('"') and v.endswith('"')
    inner = v.strip('"') if quoted else v
    val = norm(inner, lit) if REV.match(inner) else "<opaque>"
    return f"{'quoted' if quoted else 'unquoted'} {val}"


def feed_of(step_path):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(step_path).query)
    return (q.get("feed") or ["normal"])[-1]


def layout(text):
    """The line layout of a normal/longpoll `_changes` answer: a row line is ROW, other lines
    keep their punctuation and member names, values become *; blank lines are left out."""
    out = []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith('{"seq"') or (s.startswith("{") and '"changes"' in s and '"results"' not in s):
            out.append("ROW" + ("," if s.endswith(",") else ""))
        else:
            s = re.sub(r':\s*("(?:[^"\\]|\\.)*"|-?\d+(\.\d+)?|true|false|null)', ":*", s)
            out.append(s)
    return [x for x in out if x]       # blank lines (a longpoll's wait, heartbeats) are timing, not layout


def sse(text):
    events, cur = [], {}
    for line in text.split("\n"):
        if not line:
            if cur:
                events.append(cur)
                cur = {}
            continue
        k, _, v = line.partition(":")
        v = v[1:] if v.startswith(" ") else v
        cur.setdefault(k, []).append(v)
    if cur:
        events.append(cur)
    out = []
    for e in events:
        d = {}
        for k, vs in e.items():
            v = "\n".join(vs)
            if k == "data":
                try:
                    v = json.loads(v)
                except ValueError:
                    pass
            if k == "id":
                v = Seq(json.loads(v), quoted=True) if v.startswith('"') and is_json(v) else Seq(v)
            d[k] = v
        out.append(d)
    return out


def compare(step, path, ca, fa, lit):
    """Differences between CouchDB's answer `ca` and Ferry's `fa`: [(aspect, couch, ferry)]."""
    out = []
    if ca.error or fa.error:
        if bool(ca.error) != bool(fa.error) or ca.error:
            out.append(("status", ca.error or ca.status, fa.error or fa.status))
        return out
    if ca.status != fa.status:
        out.append(("status", ca.status, fa.status))
    hc = {
        "Content-Type": (media, None),
        "ETag": (lambda v: etag(v, lit), None),
        "Date": (lambda v: "present" if v else None, None),
        "Location": (location, None),
        "Cache-Control": (lambda v: v, None),
        "Accept-Ranges": (lambda v: v, None),
        "Content-Range": (lambda v: v, None),
        "Content-Encoding": (lambda v: v, None),
        "Access-Control-Allow-Origin": (lambda v: v, None),
        "Access-Control-Allow-Credentials": (lambda v: v, None),
        "Access-Control-Allow-Methods": (token_set, None),
        "Access-Control-Allow-Headers": (token_set, None),
        "Access-Control-Expose-Headers": (token_set, None),
        "Access-Control-Max-Age": (lambda v: v, None),
    }
    for name, (fn, _) in hc.items():
        if step.method == "HEAD" and name == "Content-Type" and ca.status >= 400:
            continue
        a, b = fn(ca.header(name)), fn(fa.header(name))
        if a != b:
            out.append((f"header:{name}", a if a is not None else "<absent>", b if b is not None else "<absent>"))
    sa = sorted(cookie_shape(v) for v in ca.header_all("Set-Cookie"))
    sb = sorted(cookie_shape(v) for v in fa.header_all("Set-Cookie"))
    if sa != sb:
        out.append(("header:Set-Cookie", sa or "<absent>", sb or "<absent>"))
    is_changes = "/_changes" in urllib.parse.urlsplit(path).path
    feed = feed_of(path) if is_changes else None
    if feed in ("longpoll", "continuous", "eventsource") and ca.chunked != fb(fa):
        out.append(("header:Transfer-Encoding", "chunked" if ca.chunked else "<absent>",
                    "chunked" if fa.chunked else "<absent>"))
    if step.method == "HEAD":
        if ca.body != fa.body:
            out.append(("body", f"{len(ca.body)} bytes", f"{len(fa.body)} bytes"))
        return out
    ta, tb = ca.body.decode("utf-8", "replace"), fa.body.decode("utf-8", "replace")
    if is_changes and feed == "continuous" and ca.status == 200 and fa.status == 200:
        la = [json.loads(x) for x in ta.split("\n") if x.strip() and is_json(x)]
        lb = [json.loads(x) for x in tb.split("\n") if x.strip() and is_json(x)]
        bad_a = [x for x in ta.split("\n") if x.strip() and not is_json(x)]
        bad_b = [x for x in tb.split("\n") if x.strip() and not is_json(x)]
        if bad_a != bad_b:
            out.append(("stream", f"non-JSON lines {bad_a[:2]}", f"non-JSON lines {bad_b[:2]}"))
        blank_a, blank_b = ta.strip(" ").count("\n\n") > 0 or ta.startswith("\n"), tb.count("\n\n") > 0 or tb.startswith("\n")
        if getattr(step.until, "__name__", "") == "HEARTBEAT" and blank_a != blank_b:
            out.append(("stream", "heartbeat newline" if blank_a else "no heartbeat", "heartbeat newline" if blank_b else "no heartbeat"))
        jdiff(norm(la, lit), norm(lb, lit), "$", out)
        return out
    if is_changes and feed == "eventsource" and ca.status == 200 and fa.status == 200:
        ea = [e for e in sse(ta) if e.get("event") != ["heartbeat"] and e.get("event") != "heartbeat"]
        eb = [e for e in sse(tb) if e.get("event") != ["heartbeat"] and e.get("event") != "heartbeat"]
        jdiff(norm(ea, lit), norm(eb, lit), "$", out)
        return out
    ja, jb = ca.json(), fa.json()
    if ja is not None or jb is not None:
        if ja is None or jb is None:
            out.append(("body", short(ta, 120), short(tb, 120)))
        else:
            jdiff(norm(ja, lit), norm(jb, lit), "$", out)
        if is_changes and feed in ("normal", "longpoll") and ca.status == 200 and fa.status == 200:
            la, lb = layout(ta.lstrip("\n")), layout(tb.lstrip("\n"))
            if la != lb:
                out.append(("lines", short("\\n".join(la), 200), short("\\n".join(lb), 200)))
        return out
    if media(ca.header("Content-Type")) and media(ca.header("Content-Type")).startswith("multipart/"):
        out += multipart_diff(ca, fa, lit)
        return out
    if ca.body != fa.body:
        out.append(("body", short(ta, 120), short(tb, 120)))
    return out


def token_set(v):
    """A comma-separated header as a sorted, lower-case list (order and case carry no meaning)."""
    return None if v is None else ", ".join(sorted({t.strip().lower() for t in v.split(",") if t.strip()}))


def fb(a):
    return a.chunked


def is_json(s):
    try:
        json.loads(s)
        return True
    except ValueError:
        return False


def parts_of(ans):
    ct = ans.header("Content-Type") or ""
    m = re.search(r'boundary="?([^";]+)"?', ct)
    if not m:
        return None
    b = m.group(1).encode()
    out = []
    for chunk in ans.body.split(b"--" + b)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, body = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        h = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            if ":" in line:
                k, v = line.split(":", 1)
                h[k.strip().lower()] = v.strip()
        body = body[:-2] if body.endswith(b"\r\n") else body
        out.append((media(h.get("content-type")), body))
    return out


def multipart_diff(ca, fa, lit):
    pa, pb = parts_of(ca), parts_of(fa)
    if pa is None or pb is None:
        return [] if ca.body == fa.body else [("body", "multipart", "multipart")]
    out = []
    if [p[0] for p in pa] != [p[0] for p in pb]:
        out.append(("body", f"parts {[p[0] for p in pa]}", f"parts {[p[0] for p in pb]}"))
        return out
    for i, ((t, x), (_, y)) in enumerate(zip(pa, pb)):
        if t == "application/json":
            jdiff(norm(json.loads(x), lit), norm(json.loads(y), lit), f"$part{i}", out)
    return out


def HEARTBEAT(text):
    """`until` for a heartbeat feed: a row, then an empty line after it."""
    return "\n\n" in text.split("}", 1)[-1] if "}" in text else False


# -- the deliberate differences -------------------------------------------------------------------------

def glob_re(g):
    return re.compile("^" + "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in g) + "$")


def allowed_rows(path):
    rows, inside = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == "## Deliberate differences from CouchDB"
                continue
            if not inside or not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3 or set(cells[0]) <= set("-: ") or cells[0].lower().startswith("case"):
                continue
            for cid in (c.strip().strip("`") for c in cells[0].split("`, `")):
                for aspect in (a.strip().strip("`") for a in cells[1].split("`, `")):
                    rows.append((glob_re(cid), glob_re(aspect), cells[2], f"{cid} | {aspect}"))
    return rows


def match_row(rows, cid, aspect):
    for c, a, reason, label in rows:
        if c.match(cid) and a.match(aspect):
            return label
    return None


# -- the servers -------------------------------------------------------------------------------------------

def start_couchdb(tool, tmp):
    from servers import CouchDB  # Tests/CouchDB/servers.py
    c = CouchDB(tool, os.path.join(tmp, "couch"))
    for section, key, value in (("cluster", "q", "1"), ("chttpd_auth_lockout", "mode", "off"),
                                ("chttpd", "max_http_request_size", "67108864"), ("chttpd", "enable_cors", "true"),
                                ("cors", "origins", CORS_ORIGIN), ("cors", "credentials", "true"),
                                # Ferry's default SameSite=Lax session cookie, as CouchDB sends it so configured.
                                ("chttpd_auth", "same_site", "lax")):
        c.set_config(section, key, value)
    return c


def start_ferry(binary, tmp):
    d = ferryd.Daemon(binary, os.path.join(tmp, "ferry-data"), name="ferry", port=0, log_dir=tmp,
                      flags=["--no-advertise", "--conflict-policy", "keep", "--login-free-failures", "100000",
                             "--cors-origin", CORS_ORIGIN, "--cors-credentials"],
                      users=[[ADMIN, "--password", PASSWORD, "--role", "*=admin"]])
    d.start()
    return d


def db_names(case, idx):
    base = "d" + re.sub(r"[^a-z0-9]+", "-", case.id.lower())[:40].strip("-") + f"-{idx}"
    return [base] + [f"{base}-{i}" for i in range(2, case.dbs + 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ferry", default=os.environ.get("FERRY_BIN") or os.path.join(REPO, ".build", "debug", "ferry"))
    ap.add_argument("--couchdb", default=os.path.join(REPO, "..", "shared", "tools", "couchdb", "couchdb"))
    ap.add_argument("--only", action="append", default=[], help="run the cases whose id matches GLOB (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the case ids and exit")
    ap.add_argument("--allowed", default=os.path.join(REPO, "Protocol", "rest.md"))
    ap.add_argument("--no-schemathesis", action="store_true", help="skip the generated requests")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the allowed differences too")
    args = ap.parse_args()

    import cases as case_table
    all_cases = case_table.CASES
    ids = [c.id for c in all_cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        print(f"duplicate case ids: {sorted(dup)}")
        return 2
    if args.list:
        for c in all_cases:
            print(c.id)
        print(f"{len(all_cases)} cases (+ the generated ones of schemathesis_diff.py)")
        return 0
    chosen = [c for c in all_cases if not args.only or any(glob_re(g).match(c.id) for g in args.only)]
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.couchdb))) or not os.path.exists(args.couchdb):
        print(f"SKIPPED: no CouchDB at {os.path.dirname(os.path.abspath(args.couchdb))} (../shared/tools/couchdb)")
        return SKIP
    if not os.path.exists(args.ferry):
        print(f"no ferry binary at {args.ferry} (FERRY_BIN)")
        return 2
    rows = allowed_rows(args.allowed)
    tmp = tempfile.mkdtemp(prefix="ferry-diff-")
    ferry_bin = os.path.join(tmp, "ferry")
    shutil.copy2(args.ferry, ferry_bin)        # a rebuild cannot swap it mid-run
    t0 = time.monotonic()
    couch = ferry = None
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            fc = ex.submit(start_couchdb, args.couchdb, tmp)
            ff = ex.submit(start_ferry, ferry_bin, tmp)
            try:
                ferry = ff.result()
            finally:
                couch = fc.result()
        print(f"CouchDB {couch.server.base}, Ferry {ferry.url} ({time.monotonic() - t0:.1f} s to start)", flush=True)
        rc = Runner("couchdb", couch.server.base)
        rf = Runner("ferry", ferry.url)
        ndiff = nallowed = ndiffcases = 0
        results = []
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            for idx, case in enumerate(chosen):
                names = db_names(case, idx)
                ca_f = ex.submit(rc.run_case, case, names)
                fa_f = ex.submit(rf.run_case, case, names)
                ca, fa = ca_f.result(), fa_f.result()
                lit = literal_tokens(case)
                seen = {}
                for i, (step, a, b) in enumerate(zip(case.steps, ca, fa)):
                    ignore = [glob_re(g) for g in step.ignore]
                    for aspect, x, y in compare(step, step.path, a, b, lit):
                        if any(g.match(aspect) for g in ignore) or aspect in seen:
                            continue
                        seen[aspect] = (i, step, x, y)
                case_bad = False
                for aspect, (i, step, x, y) in seen.items():
                    ndiff += 1
                    row = match_row(rows, case.id, aspect)
                    line = f"{case.id} [step {i + 1} {step.describe()}] {aspect}: couchdb {x} | ferry {y}"
                    if row:
                        nallowed += 1
                        if args.verbose:
                            print(f"ALLOWED {line}  ({row})")
                    else:
                        case_bad = True
                        print(f"DIFF {line}", flush=True)
                    results.append((case.id, i, aspect, x, y, row))
                ndiffcases += case_bad
        generated = 0
        if not args.no_schemathesis and not args.only and os.path.exists(os.path.join(HERE, "schemathesis_diff.py")):
            import schemathesis_diff
            g_cases, g_diffs = schemathesis_diff.run(rc, rf, rows, tmp)
            generated = g_cases
            for line, row in g_diffs:
                ndiff += 1
                if row:
                    nallowed += 1
                    if args.verbose:
                        print(f"ALLOWED {line}  ({row})")
                else:
                    print(f"DIFF {line}", flush=True)
        crashed = ferry.crashed()
        if crashed:
            print(f"FERRY CRASHED: {crashed}")
        total = len(chosen) + generated
        print(f"{total} cases, {ndiff} differences ({nallowed} allowed); {ndiffcases} cases with unlisted "
              f"differences; {time.monotonic() - t0:.0f} s")
        if rc.transient_retries:
            print(f"-- CouchDB answered 500 internal_server_error to a read {rc.transient_retries} time(s); asked again")
        if os.environ.get("DIFF_JSON"):
            with open(os.environ["DIFF_JSON"], "w") as f:
                json.dump(results, f, default=str)
        return 1 if (ndiff - nallowed) or crashed else 0
    except ferryd.SetupError as e:
        print(f"setup failed: {e}")
        return 2
    finally:
        if ferry is not None:
            ferry.stop()
        if couch is not None:
            couch.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

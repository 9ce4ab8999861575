"""Ferry's REST API driven by clients no one here wrote: Python `requests` and `httpx` for every
route, including the error and permission paths, and `curl` for the connection-level features
(chunked upload, Expect: 100-continue, keep-alive, a continuous _changes feed).

Run by Tests/REST/interop: `python interop.py FERRY_BINARY TMPDIR`. It makes the users with
`ferry user add` before it starts the daemon (anonymous access off):
  reader   shared=reader          writer   shared=writer
  dbadmin  shared=admin           admin    *=admin (server admin)
and ends with a `N passed, N failed` line; the exit status is non-zero on any failure.

A route another change has not landed yet (answered 404 `no route …` or `… not served yet`)
is reported as PENDING, not passed: the summary counts them.
"""
import base64
import json
import os
import re
import select
import subprocess
import sys
import time

import httpx
import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

FERRY, TMP = sys.argv[1], sys.argv[2]
DATA = os.path.join(TMP, "interop-data")
PASSWORDS = {"reader": "r-pass", "writer": "w-pass", "dbadmin": "d-pass", "admin": "a-pass"}
ROLES = {"reader": "shared=reader", "writer": "shared=writer", "dbadmin": "shared=admin", "admin": "*=admin"}

tally = ferryd.Tally()
check = tally.check
pending = []



def not_served(r):
    """A route that is not there yet: 404 naming no route (not a missing document)."""
    if r.status_code != 404:
        return False
    try:
        reason = r.json().get("reason", "")
    except ValueError:
        return False
    return reason.startswith("no route") or "not served yet" in reason


def route(r, what):
    """False (and PENDING noted) when the route is not served yet."""
    if not_served(r):
        pending.append(what)
        print(f"PENDING: {what} (route not served yet: {r.request.method} {r.request.url})", flush=True)
        return False
    return True


def status(r, code, what):
    return check(r.status_code == code, f"{what}: expected {code}, got {r.status_code} {r.text[:200]}")


def error_shape(r, code, name, what):
    ok = status(r, code, what)
    try:
        body = r.json()
    except ValueError:
        return check(False, f"{what}: error body is not JSON: {r.text[:200]}")
    check(isinstance(body, dict) and body.get("error") == name and isinstance(body.get("reason"), str),
          f"{what}: error body {body!r} is not {{\"error\": {name!r}, \"reason\": …}}")
    check(r.headers.get("content-type", "").startswith("application/json"), f"{what}: error Content-Type is {r.headers.get('content-type')}")
    return ok


class Client:
    """One of the two HTTP libraries behind the same small interface."""

    def __init__(self, kind, base, user=None, password=None):
        self.kind, self.base = kind, base
        auth = (user, password if password is not None else PASSWORDS.get(user)) if user else None
        if kind == "requests":
            self.s = requests.Session()
            self.s.auth = auth
        else:
            self.s = httpx.Client(auth=auth, timeout=30)

    def request(self, method, path, *, params=None, json_body=None, data=None, headers=None):
        url = self.base + path
        if self.kind == "requests":
            return self.s.request(method, url, params=params, json=json_body, data=data, headers=headers, timeout=30)
        return self.s.request(method, url, params=params, json=json_body, content=data, headers=headers)

    def get(self, path, **kw): return self.request("GET", path, **kw)
    def head(self, path, **kw): return self.request("HEAD", path, **kw)
    def put(self, path, **kw): return self.request("PUT", path, **kw)
    def post(self, path, **kw): return self.request("POST", path, **kw)
    def delete(self, path, **kw): return self.request("DELETE", path, **kw)

    def close(self):
        self.s.close()


def start_daemon():
    users = [(user, "--password", PASSWORDS[user], "--role", role) for user, role in ROLES.items()]
    # The authentication checks send dozens of refused requests from one address to look at
    # each 401; the daemon's 429 after a few failures (docs/daemon.md, "Limits") has tests of
    # its own (Tests/Hostile, HostileClientTests), so it is set out of their way here.
    return ferryd.serve(FERRY, DATA, TMP, "interop-daemon", users=users, args=["--login-free-failures", "100000"])


# ---------------------------------------------------------------------------------------------

def server_routes(base, kind):
    anon, reader, admin = Client(kind, base), Client(kind, base, "reader"), Client(kind, base, "admin")
    r = anon.get("/")
    status(r, 200, f"[{kind}] GET / without credentials")
    check(r.json().get("couchdb") == "Welcome", f"[{kind}] GET / says Welcome")
    status(anon.head("/"), 200, f"[{kind}] HEAD /")
    error_shape(anon.post("/"), 405, "method_not_allowed", f"[{kind}] POST /")
    r = anon.get("/_up")
    if route(r, "GET /_up"):
        status(r, 200, f"[{kind}] GET /_up without credentials")
        check(r.json().get("status") == "ok", f"[{kind}] /_up status ok")
    r = reader.get("/_all_dbs")
    status(r, 200, f"[{kind}] reader GET /_all_dbs")
    check(r.json() == ["shared"], f"[{kind}] reader sees only the databases it has a role on: {r.text}")
    r = admin.get("/_all_dbs")
    check("shared" in r.json() and "private" in r.json(), f"[{kind}] server admin sees every database: {r.text}")
    r = reader.get("/_session")
    check(r.json().get("userCtx") == {"name": "reader", "roles": []}, f"[{kind}] reader's session: {r.text}")
    r = admin.get("/_session")
    check(r.json().get("userCtx", {}).get("roles") == ["_admin"], f"[{kind}] admin's session: {r.text}")
    r = reader.get("/_uuids", params={"count": 5})
    uuids = r.json().get("uuids", [])
    check(len(uuids) == 5 and all(re.fullmatch("[0-9a-f]{32}", u) for u in uuids), f"[{kind}] _uuids?count=5: {r.text}")
    error_shape(reader.get("/_no_such_route"), 404, "not_found", f"[{kind}] GET /_no_such_route")
    r = admin.get("/_metrics")
    if route(r, "GET /_metrics"):
        status(r, 200, f"[{kind}] server admin GET /_metrics")
        check(r.headers.get("content-type", "").startswith("text/plain"), f"[{kind}] /_metrics is text/plain")
        error_shape(reader.get("/_metrics"), 403, "forbidden", f"[{kind}] reader GET /_metrics")
        error_shape(anon.get("/_metrics"), 401, "unauthorized", f"[{kind}] GET /_metrics without credentials")
    for c in (anon, reader, admin):
        c.close()


def authentication(base, kind):
    """401 without WWW-Authenticate (as CouchDB) for missing and wrong credentials, on reads and writes, and
    nothing read or written."""
    writer = Client(kind, base, "writer")
    before = writer.get("/shared").json()
    doc_before = writer.get("/shared/doc-a").json()
    for label, c in (("no credentials", Client(kind, base)),
                     ("wrong password", Client(kind, base, "writer", "not-the-password")),
                     ("unknown user", Client(kind, base, "nobody", "x"))):
        for method, path, body in (("GET", "/shared/doc-a", None), ("GET", "/shared/_all_docs?include_docs=true", None),
                                   ("GET", "/shared/_changes?include_docs=true", None), ("GET", "/_all_dbs", None),
                                   ("PUT", "/shared/doc-a", {"_rev": doc_before["_rev"], "hacked": True}),
                                   ("POST", "/shared/_bulk_docs", {"docs": [{"_id": "intruder"}]}),
                                   ("DELETE", f"/shared/doc-a?rev={doc_before['_rev']}", None),
                                   ("DELETE", "/shared", None), ("PUT", "/newdb", None)):
            r = c.request(method, path, json_body=body)
            what = f"[{kind}] {label}: {method} {path}"
            error_shape(r, 401, "unauthorized", what)
            check("www-authenticate" not in r.headers,
                  f"{what}: WWW-Authenticate is {r.headers.get('www-authenticate')!r} (CouchDB sends none)")
            check("doc-a" not in r.text and "secret" not in r.text, f"{what}: the 401 body leaks data: {r.text[:200]}")
        c.close()
    after = writer.get("/shared").json()
    check(after["update_seq"] == before["update_seq"] and after["doc_count"] == before["doc_count"],
          f"[{kind}] nothing written without valid credentials ({before['update_seq']} → {after['update_seq']})")
    check(writer.get("/shared/doc-a").json() == doc_before, f"[{kind}] doc-a unchanged after refused requests")
    check(writer.get("/newdb").status_code == 404, f"[{kind}] no database made without valid credentials")
    writer.close()


def reader_role(base, kind):
    reader, writer = Client(kind, base, "reader"), Client(kind, base, "writer")
    before = writer.get("/shared").json()
    doc = reader.get("/shared/doc-a")
    status(doc, 200, f"[{kind}] reader GET doc")
    rev = doc.json()["_rev"]
    status(reader.head("/shared/doc-a"), 200, f"[{kind}] reader HEAD doc")
    status(reader.get("/shared"), 200, f"[{kind}] reader GET /shared")
    status(reader.get("/shared/_all_docs"), 200, f"[{kind}] reader GET _all_docs")
    status(reader.post("/shared/_all_docs", json_body={"keys": ["doc-a"]}), 200, f"[{kind}] reader POST _all_docs (a read)")
    status(reader.get("/shared/_changes"), 200, f"[{kind}] reader GET _changes")
    status(reader.post("/shared/_changes", json_body={}), 200, f"[{kind}] reader POST _changes (a read)")
    status(reader.get("/shared/_local/ckpt"), 200, f"[{kind}] reader GET _local")
    r = reader.post("/shared/_revs_diff", json_body={"doc-a": [rev, "9-" + "f" * 40]})
    if route(r, "POST _revs_diff"):
        status(r, 200, f"[{kind}] reader POST _revs_diff (a read)")
    r = reader.post("/shared/_bulk_get", json_body={"docs": [{"id": "doc-a"}]})
    if route(r, "POST _bulk_get"):
        status(r, 200, f"[{kind}] reader POST _bulk_get (a read)")
    r = reader.post("/shared/_find", json_body={"selector": {"n": {"$gt": 0}}})
    if route(r, "POST _find"):
        status(r, 200, f"[{kind}] reader POST _find (a read)")
    writes = [
        ("PUT", "/shared/doc-a", {"_rev": rev, "n": 99}), ("PUT", "/shared/reader-new", {"n": 1}),
        ("POST", "/shared", {"n": 1}), ("POST", "/shared/_bulk_docs", {"docs": [{"_id": "reader-bulk"}]}),
        ("DELETE", f"/shared/doc-a?rev={rev}", None), ("DELETE", "/shared", None), ("PUT", "/readerdb", None),
        ("POST", "/shared/_compact", {}),
    ]
    for method, path, body in writes:
        r = reader.request(method, path, json_body=body)
        if path.endswith("_compact") and not route(r, "POST _compact"):
            continue
        error_shape(r, 403, "forbidden", f"[{kind}] reader {method} {path}")
    r = reader.post("/shared/_purge", json_body={"doc-a": [rev]})
    if route(r, "POST _purge"):
        error_shape(r, 403, "forbidden", f"[{kind}] reader POST _purge")
    r = reader.put(f"/shared/doc-a/att.txt?rev={rev}", data=b"x", headers={"Content-Type": "text/plain"})
    if route(r, "PUT attachment"):
        error_shape(r, 403, "forbidden", f"[{kind}] reader PUT attachment")
    after = writer.get("/shared").json()
    check(after["update_seq"] == before["update_seq"] and after["doc_count"] == before["doc_count"],
          f"[{kind}] the reader changed nothing (update_seq {before['update_seq']} → {after['update_seq']})")
    check(writer.get("/shared/doc-a").json()["_rev"] == rev, f"[{kind}] doc-a unchanged after the reader's writes")
    check(writer.get("/shared/_local/ckpt").status_code == 200, f"[{kind}] _local/ckpt still there")
    # A reader keeps its own checkpoints (as CouchDB lets any member, and BLIP a reader).
    r = reader.put(f"/shared/_local/reader-{kind}", json_body={"last_seq": "3"})
    status(r, 201, f"[{kind}] reader PUT its _local checkpoint")
    status(reader.request("DELETE", f"/shared/_local/reader-{kind}", json_body=None), 200, f"[{kind}] reader DELETE its _local checkpoint")
    reader.close()
    writer.close()


def writer_role(base, kind):
    writer, dbadmin, admin = Client(kind, base, "writer"), Client(kind, base, "dbadmin"), Client(kind, base, "admin")
    r = writer.put(f"/shared/w-{kind}", json_body={"n": 1})
    status(r, 201, f"[{kind}] writer PUT doc")
    rev = r.json()["rev"]
    status(writer.post("/shared/_bulk_docs", json_body={"docs": [{"_id": f"wb-{kind}", "n": 2}]}), 201, f"[{kind}] writer _bulk_docs")
    status(writer.delete(f"/shared/w-{kind}", params={"rev": rev}), 200, f"[{kind}] writer DELETE doc")
    error_shape(writer.delete("/shared"), 403, "forbidden", f"[{kind}] writer DELETE /shared")
    r = writer.post("/shared/_compact", json_body={})
    if route(r, "POST _compact"):
        error_shape(r, 403, "forbidden", f"[{kind}] writer POST _compact")
        status(dbadmin.post("/shared/_compact", json_body={}), 202, f"[{kind}] db admin POST _compact")
    error_shape(writer.put(f"/wdb-{kind}"), 403, "forbidden", f"[{kind}] writer PUT /db")
    error_shape(writer.get("/private"), 403, "forbidden", f"[{kind}] writer GET a database it has no role on")
    error_shape(dbadmin.put(f"/ddb-{kind}"), 403, "forbidden", f"[{kind}] db admin PUT /db (not a server admin)")
    r = admin.put(f"/made-{kind}")
    status(r, 201, f"[{kind}] server admin PUT /db")
    check(r.headers.get("location", "").endswith(f"/made-{kind}"), f"[{kind}] PUT /db Location")
    error_shape(admin.put(f"/made-{kind}"), 412, "file_exists", f"[{kind}] PUT /db again")
    error_shape(admin.put("/Bad%20Name"), 400, "illegal_database_name", f"[{kind}] PUT /db with an illegal name")
    status(admin.delete(f"/made-{kind}"), 200, f"[{kind}] server admin DELETE /db")
    error_shape(admin.get(f"/made-{kind}"), 404, "not_found", f"[{kind}] GET a deleted database")
    error_shape(admin.delete(f"/made-{kind}"), 404, "not_found", f"[{kind}] DELETE a missing database")
    for c in (writer, dbadmin, admin):
        c.close()


def documents(base, kind):
    w = Client(kind, base, "writer")
    p = f"/shared/d-{kind}"
    r = w.put(p, json_body={"n": 1})
    status(r, 201, f"[{kind}] PUT new doc")
    rev1 = r.json()["rev"]
    check(r.headers.get("etag") == f'"{rev1}"', f"[{kind}] PUT ETag {r.headers.get('etag')}")
    error_shape(w.put(p, json_body={"n": 2}), 409, "conflict", f"[{kind}] PUT without _rev on a live doc")
    error_shape(w.put(p, json_body={"n": 2, "_rev": "1-" + "0" * 40}), 409, "conflict", f"[{kind}] PUT with a stale _rev")
    error_shape(w.put(p, json_body={"n": 2, "_rev": rev1}, params={"rev": "1-" + "0" * 40}), 400, "bad_request",
                f"[{kind}] _rev and ?rev= disagree")
    error_shape(w.put(p, json_body={"_bad": 1, "_rev": rev1}), 400, "doc_validation", f"[{kind}] reserved _ member (CouchDB's error)")
    error_shape(w.put(p, data=b"{not json", headers={"Content-Type": "application/json"}), 400, "bad_request", f"[{kind}] bad JSON")
    r = w.put(p, json_body={"n": 2}, headers={"If-Match": f'"{rev1}"'})
    status(r, 201, f"[{kind}] PUT with If-Match")
    rev2 = r.json()["rev"]
    r = w.put(p, json_body={"n": 3}, params={"rev": rev2, "batch": "ok"})
    status(r, 202, f"[{kind}] PUT batch=ok")
    check("rev" not in r.json(), f"[{kind}] PUT batch=ok names no revision, as CouchDB's: {r.text}")
    r = w.get(p)
    rev3 = r.json()["_rev"]
    check(r.json() == {"_id": f"d-{kind}", "_rev": rev3, "n": 3}, f"[{kind}] GET doc body {r.text}")
    check(r.headers.get("etag") == f'"{rev3}"', f"[{kind}] GET ETag")
    status(w.get(p, headers={"If-None-Match": f'"{rev3}"'}), 304, f"[{kind}] If-None-Match current → 304")
    status(w.get(p, headers={"If-None-Match": f'"{rev1}"'}), 200, f"[{kind}] If-None-Match old → 200")
    r = w.head(p)
    check(r.status_code == 200 and r.headers.get("etag") == f'"{rev3}"', f"[{kind}] HEAD doc ETag")
    r = w.get(p, params={"revs": "true"})
    check(r.json().get("_revisions") == {"start": 3, "ids": [x.split("-")[1] for x in (rev3, rev2, rev1)]},
          f"[{kind}] revs=true {r.text}")
    r = w.get(p, params={"revs_info": "true"})
    info = r.json().get("_revs_info", [])
    check([i["rev"] for i in info] == [rev3, rev2, rev1] and info[0]["status"] == "available", f"[{kind}] revs_info {info}")
    r = w.get(p, params={"rev": rev1})
    check(r.status_code in (200, 404), f"[{kind}] ?rev=old answers 200 (kept) or 404 (pruned): {r.status_code}")
    # A conflict made the way a replicator makes one. Ferry resolves it as it is stored, by the
    # rule every peer applies (Protocol/rest.md, "Bulk writes"): one live leaf is left.
    other = "3-" + "c" * 40
    r = w.post("/shared/_bulk_docs", json_body={"new_edits": False, "docs": [
        {"_id": f"d-{kind}", "_rev": other, "n": 30, "_revisions": {"start": 3, "ids": ["c" * 40, rev2.split("-")[1], rev1.split("-")[1]]}}]})
    check(r.status_code == 201 and r.json() == [], f"[{kind}] _bulk_docs new_edits=false {r.status_code} {r.text}")
    r = w.get(p, params={"conflicts": "true"})
    body = r.json()
    check("_conflicts" not in body and body.get("n") in (3, 30), f"[{kind}] a replicated conflict is resolved as stored: {r.text}")
    cur = body["_rev"]
    r = w.get(p, params={"open_revs": "all"})
    live = [x["ok"] for x in r.json() if "ok" in x and not x["ok"].get("_deleted")]
    check([d["_rev"] for d in live] == [cur], f"[{kind}] open_revs=all has one live leaf {r.text}")
    r = w.get(p, params={"open_revs": json.dumps([cur, "9-" + "d" * 40]), "revs": "true"})
    items = r.json()
    check(len(items) == 2 and items[0].get("ok", {}).get("_rev") == cur and "_revisions" in items[0].get("ok", {})
          and items[1] == {"missing": "9-" + "d" * 40}, f"[{kind}] open_revs=[…] {r.text}")
    error_shape(w.get(p, params={"open_revs": "nope"}), 400, "bad_request", f"[{kind}] open_revs malformed")
    r = w.get(p, params={"attachments": "true"})
    status(r, 200, f"[{kind}] attachments=true")
    # new_edits=false on a single PUT.
    r = w.put(f"/shared/ne-{kind}", params={"new_edits": "false"},
              json_body={"_rev": "2-" + "e" * 40, "v": 1, "_revisions": {"start": 2, "ids": ["e" * 40, "f" * 40]}})
    status(r, 201, f"[{kind}] PUT new_edits=false")
    r = w.get(f"/shared/ne-{kind}", params={"revs": "true"})
    check(r.json().get("_revisions") == {"start": 2, "ids": ["e" * 40, "f" * 40]}, f"[{kind}] history kept {r.text}")
    # POST /{db}
    r = w.post("/shared", json_body={"made": "by post"})
    status(r, 201, f"[{kind}] POST /db")
    check(re.fullmatch("[0-9a-f]{32}", r.json().get("id", "")) is not None, f"[{kind}] POST /db server-made ID {r.text}")
    error_shape(w.post("/shared", data=b"a=b", headers={"Content-Type": "application/x-www-form-urlencoded"}),
                415, "bad_content_type", f"[{kind}] POST /db form data")
    # DELETE
    cur = w.get(p).json()["_rev"]
    error_shape(w.delete(p), 409, "conflict", f"[{kind}] DELETE without rev")
    r = w.delete(p, headers={"If-Match": f'"{cur}"'})
    status(r, 200, f"[{kind}] DELETE with If-Match")
    r = w.get(p)
    error_shape(r, 404, "not_found", f"[{kind}] GET deleted doc")
    check(r.json().get("reason") == "deleted", f"[{kind}] deleted reason {r.text}")
    r = w.get("/shared/no-such-doc")
    check(r.status_code == 404 and r.json().get("reason") == "missing", f"[{kind}] missing doc {r.text}")
    error_shape(w.get("/nodb/x"), 404, "not_found", f"[{kind}] doc in a missing database")
    error_shape(w.request("PATCH", p, json_body={}), 405, "method_not_allowed", f"[{kind}] PATCH doc")
    w.close()


def bulk_and_queries(base, kind):
    w = Client(kind, base, "writer")
    ids = [f"q-{kind}-{i}" for i in range(6)]
    r = w.post("/shared/_bulk_docs", json_body={"docs": [{"_id": i, "n": n} for n, i in enumerate(ids)] + [{"_id": "doc-a"}]})
    res = r.json()
    check(r.status_code == 201 and [x.get("ok") for x in res[:6]] == [True] * 6 and res[6].get("error") == "conflict",
          f"[{kind}] _bulk_docs results {r.text[:300]}")
    error_shape(w.post("/shared/_bulk_docs", json_body={"nodocs": []}), 400, "bad_request", f"[{kind}] _bulk_docs without docs")
    error_shape(w.post("/shared/_bulk_docs", data=b"x", headers={"Content-Type": "text/plain"}), 415, "bad_content_type",
                f"[{kind}] _bulk_docs text/plain")
    r = w.get("/shared/_all_docs", params={"startkey": json.dumps(ids[1]), "endkey": json.dumps(ids[4]), "limit": 2, "skip": 1})
    check([row["id"] for row in r.json()["rows"]] == ids[2:4], f"[{kind}] _all_docs range {r.text[:300]}")
    r = w.get("/shared/_all_docs", params={"startkey": json.dumps(ids[4]), "endkey": json.dumps(ids[1]), "descending": "true",
                                           "inclusive_end": "false", "include_docs": "true"})
    rows = r.json()["rows"]
    check([row["id"] for row in rows] == ids[4:1:-1] and rows[0]["doc"]["n"] == 4, f"[{kind}] _all_docs descending {r.text[:300]}")
    r = w.post("/shared/_all_docs", json_body={"keys": [ids[0], "nope"]})
    rows = r.json()["rows"]
    check(rows[0]["id"] == ids[0] and rows[1] == {"key": "nope", "error": "not_found"}, f"[{kind}] POST _all_docs keys {r.text[:300]}")
    error_shape(w.get("/shared/_all_docs", params={"limit": "-1"}), 400, "query_parse_error", f"[{kind}] _all_docs limit=-1 (CouchDB's error)")
    # _changes
    r = w.get("/shared/_changes", params={"since": 0, "limit": 3, "include_docs": "true"})
    page = r.json()
    check(len(page["results"]) == 3 and isinstance(page["last_seq"], str) and "doc" in page["results"][0], f"[{kind}] _changes limit {r.text[:300]}")
    r = w.get("/shared/_changes", params={"filter": "_doc_ids", "doc_ids": json.dumps(ids[:2])})
    check(sorted(x["id"] for x in r.json()["results"]) == ids[:2], f"[{kind}] _changes filter=_doc_ids {r.text[:300]}")
    r = w.post("/shared/_changes", params={"filter": "_doc_ids"}, json_body={"doc_ids": [ids[3]]})
    check([x["id"] for x in r.json()["results"]] == [ids[3]], f"[{kind}] POST _changes doc_ids {r.text[:300]}")
    error_shape(w.get("/shared/_changes", params={"filter": "design/view"}), 404, "not_found", f"[{kind}] _changes unknown filter")
    error_shape(w.get("/shared/_changes", params={"feed": "bogus"}), 400, "bad_request", f"[{kind}] _changes feed=bogus")
    t = time.monotonic()
    r = w.get("/shared/_changes", params={"feed": "longpoll", "since": "now", "timeout": 300})
    check(r.status_code == 200 and r.json()["results"] == [] and time.monotonic() - t >= 0.25, f"[{kind}] longpoll timeout {r.text}")
    r = w.get("/shared/_changes", params={"feed": "continuous", "since": "now", "timeout": 200})
    lines = [json.loads(x) for x in r.text.splitlines() if x.strip()]
    check(r.status_code == 200 and len(lines) == 1 and "last_seq" in lines[0], f"[{kind}] continuous ends after timeout {r.text[:200]}")
    r = w.get("/shared/_changes", params={"feed": "eventsource", "since": 0, "limit": 2})
    check(r.headers.get("content-type", "").startswith("text/event-stream") and r.text.count("data: ") == 2,
          f"[{kind}] eventsource {r.text[:300]}")
    # _local
    r = w.put(f"/shared/_local/l-{kind}", json_body={"last_seq": "5"})
    check(r.status_code == 201 and r.json()["id"] == f"_local/l-{kind}", f"[{kind}] PUT _local {r.text}")
    lrev = r.json()["rev"]
    error_shape(w.put(f"/shared/_local/l-{kind}", json_body={"last_seq": "6", "_rev": "0-99"}), 409, "conflict", f"[{kind}] _local stale rev")
    status(w.put(f"/shared/_local/l-{kind}", json_body={"last_seq": "6", "_rev": lrev}), 201, f"[{kind}] _local update")
    check(w.get(f"/shared/_local/l-{kind}").json().get("last_seq") == "6", f"[{kind}] GET _local")
    status(w.delete(f"/shared/_local/l-{kind}"), 200, f"[{kind}] DELETE _local")
    error_shape(w.get(f"/shared/_local/l-{kind}"), 404, "not_found", f"[{kind}] GET deleted _local")
    # _revs_diff, _bulk_get, _revs_limit, _find, _purge
    rev0 = w.get(f"/shared/{ids[0]}").json()["_rev"]
    r = w.post("/shared/_revs_diff", json_body={ids[0]: [rev0, "2-" + "a" * 40], "nope": ["1-" + "a" * 40]})
    if route(r, "POST _revs_diff"):
        check(r.status_code == 200 and r.json().get(ids[0], {}).get("missing") == ["2-" + "a" * 40]
              and r.json().get("nope", {}).get("missing") == ["1-" + "a" * 40], f"[{kind}] _revs_diff {r.text}")
    r = w.post("/shared/_bulk_get", params={"revs": "true"}, json_body={"docs": [{"id": ids[0], "rev": rev0}, {"id": "nope"}]})
    if route(r, "POST _bulk_get"):
        res = r.json().get("results", [])
        check(r.status_code == 200 and len(res) == 2 and res[0]["docs"][0]["ok"]["_rev"] == rev0
              and "_revisions" in res[0]["docs"][0]["ok"] and "error" in res[1]["docs"][0], f"[{kind}] _bulk_get {r.text[:300]}")
    r = w.get("/shared/_revs_limit")
    if route(r, "GET _revs_limit"):
        check(r.status_code == 200 and isinstance(r.json(), int), f"[{kind}] _revs_limit {r.text}")
    r = w.post("/shared/_find", json_body={"selector": {"_id": {"$in": ids[:3]}, "n": {"$gte": 1}}, "fields": ["_id", "n"]})
    if route(r, "POST _find"):
        docs = r.json().get("docs", [])
        check(r.status_code == 200 and sorted(d["_id"] for d in docs) == ids[1:3], f"[{kind}] _find {r.text[:300]}")
        error_shape(w.post("/shared/_find", json_body={"selector": {"n": {"$bogus": "x"}}}), 400, "invalid_operator",
                    f"[{kind}] _find with an operator CouchDB does not know")
    rev5 = w.get(f"/shared/{ids[5]}").json()["_rev"]
    r = w.post("/shared/_purge", json_body={ids[5]: [rev5]})
    if route(r, "POST _purge"):
        check(r.status_code in (200, 201) and r.json().get("purged", {}).get(ids[5]) == [rev5], f"[{kind}] _purge {r.text}")
        check(w.get(f"/shared/{ids[5]}").status_code == 404, f"[{kind}] purged doc gone")
    w.close()


def attachments(base, kind):
    w = Client(kind, base, "writer")
    data = bytes(range(256)) * 4
    r = w.put(f"/shared/att-{kind}/blob.bin", data=data, headers={"Content-Type": "application/octet-stream"})
    if not route(r, "attachments"):
        w.close()
        return
    status(r, 201, f"[{kind}] PUT attachment on a new doc")
    rev = r.json()["rev"]
    r = w.get(f"/shared/att-{kind}/blob.bin")
    check(r.status_code == 200 and r.content == data and r.headers.get("content-type") == "application/octet-stream",
          f"[{kind}] GET attachment {r.status_code} {r.headers}")
    check(r.headers.get("accept-ranges") == "bytes", f"[{kind}] Accept-Ranges")
    r = w.get(f"/shared/att-{kind}/blob.bin", headers={"Range": "bytes=10-19"})
    check(r.status_code == 206 and r.content == data[10:20] and r.headers.get("content-range") == f"bytes 10-19/{len(data)}",
          f"[{kind}] Range {r.status_code} {r.headers}")
    r = w.get(f"/shared/att-{kind}/blob.bin", headers={"Range": f"bytes={len(data) + 10}-"})
    check(r.status_code == 416 and r.headers.get("content-range") == f"bytes */{len(data)}", f"[{kind}] 416 {r.status_code} {r.headers}")
    r = w.get(f"/shared/att-{kind}", params={"attachments": "true"})
    att = r.json().get("_attachments", {}).get("blob.bin", {})
    check(base64.b64decode(att.get("data", "")) == data, f"[{kind}] attachments=true inline data")
    error_shape(w.put(f"/shared/att-{kind}/two.txt", data=b"x", headers={"Content-Type": "text/plain"}), 409, "conflict",
                f"[{kind}] PUT attachment without rev on an existing doc")
    r = w.delete(f"/shared/att-{kind}/blob.bin", params={"rev": rev})
    status(r, 200, f"[{kind}] DELETE attachment")
    error_shape(w.get(f"/shared/att-{kind}/blob.bin"), 404, "not_found", f"[{kind}] GET deleted attachment")
    w.close()


# ---------------------------------------------------------------------------------------------

def curl(*args, check_rc=True):
    p = subprocess.run(["curl", "-sS", *args], capture_output=True, text=True, timeout=60)
    if check_rc and p.returncode != 0:
        check(False, f"curl {' '.join(args)} failed ({p.returncode}): {p.stderr[:300]}")
    return p


def curl_checks(base):
    auth = ["-u", f"writer:{PASSWORDS['writer']}"]
    body_file = os.path.join(TMP, "chunked.json")
    with open(body_file, "w") as f:
        json.dump({"filler": "x" * 200_000, "n": 7}, f)
    # Chunked request body.
    p = curl(*auth, "-v", "-X", "PUT", "-H", "Content-Type: application/json", "-H", "Transfer-Encoding: chunked",
             "--data-binary", f"@{body_file}", f"{base}/shared/curl-chunked")
    check("Transfer-Encoding: chunked" in p.stderr and '"ok":true' in p.stdout, f"curl chunked upload: {p.stdout[:200]}")
    r = requests.get(f"{base}/shared/curl-chunked", auth=("writer", PASSWORDS["writer"]))
    check(r.json().get("n") == 7 and len(r.json().get("filler", "")) == 200_000, "curl chunked upload stored whole")
    # Expect: 100-continue.
    p = curl(*auth, "-v", "-X", "PUT", "-H", "Content-Type: application/json", "-H", "Expect: 100-continue",
             "--data-binary", f"@{body_file}", f"{base}/shared/curl-expect")
    check("HTTP/1.1 100 Continue" in p.stderr and "HTTP/1.1 201" in p.stderr, f"curl Expect: 100-continue: {p.stderr[-400:]}")
    # Expect with credentials that fail: answered 401 without reading the body.
    p = curl("-u", "writer:wrong", "-v", "-X", "PUT", "-H", "Expect: 100-continue", "--data-binary", f"@{body_file}",
             f"{base}/shared/curl-expect-401", check_rc=False)
    check("HTTP/1.1 401" in p.stderr, f"curl Expect with a wrong password → 401: {p.stderr[-300:]}")
    # Keep-alive: two URLs, one connection.
    p = curl(*auth, "-v", f"{base}/shared", f"{base}/shared/curl-chunked", "-o", "/dev/null", "-o", "/dev/null")
    check(p.stderr.count("Connected to") == 1 and re.search(r"Re-?using existing connection", p.stderr) is not None,
          f"curl keep-alive: {p.stderr[-500:]}")
    # Pipelining-free HEAD then GET on one connection (a HEAD answer has no body).
    p = curl(*auth, "-v", "-I", f"{base}/shared/curl-chunked", "--next", *auth, f"{base}/shared/_changes?feed=eventsource&timeout=100",
             "-I", "--next", *auth, f"{base}/", check_rc=False)
    check(p.returncode == 0 and "Welcome" in p.stdout, f"curl HEAD, HEAD of a feed, GET on one connection: rc {p.returncode} {p.stderr[-300:]}")
    # A continuous feed that sees a write made after it started.
    proc = subprocess.Popen(["curl", "-sS", "-N", *auth, f"{base}/shared/_changes?feed=continuous&since=now&heartbeat=500"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        r = requests.put(f"{base}/shared/curl-live", json={"live": True}, auth=("writer", PASSWORDS["writer"]))
        seen, deadline, buf = None, time.monotonic() + 10, b""
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() < deadline and seen is None:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                chunk = proc.stdout.read() or b""
                buf += chunk
                for line in buf.split(b"\n"):
                    if line.strip() and json.loads(line).get("id") == "curl-live":
                        seen = json.loads(line)
        check(seen is not None and seen["changes"][0]["rev"] == r.json()["rev"], f"curl -N continuous feed saw the later write: {buf[:300]!r}")
    finally:
        proc.kill()
        proc.wait()


def main():
    daemon = start_daemon()
    base = daemon.url
    try:
        admin = Client("requests", base, "admin")
        status(admin.put("/shared"), 201, "server admin creates shared")
        status(admin.put("/private"), 201, "server admin creates private")
        w = Client("requests", base, "writer")
        status(w.put("/shared/doc-a", json_body={"n": 1, "secret": "s"}), 201, "writer seeds doc-a")
        status(w.put("/shared/_local/ckpt", json_body={"last_seq": "1"}), 201, "writer seeds _local/ckpt")
        for kind in ("requests", "httpx"):
            server_routes(base, kind)
            authentication(base, kind)
            reader_role(base, kind)
            writer_role(base, kind)
            documents(base, kind)
            bulk_and_queries(base, kind)
            attachments(base, kind)
        curl_checks(base)
        dbadmin = Client("requests", base, "dbadmin")
        status(dbadmin.delete("/shared"), 200, "db admin deletes shared")
        error_shape(admin.get("/shared"), 404, "not_found", "shared is gone")
    finally:
        daemon.stop()
    err = open(daemon.err_path).read()
    check("Fatal error" not in err and "Backtrace" not in err, f"the daemon did not crash: {err[-500:]}")
    if pending:
        print(f"PENDING routes (not served by this build): {', '.join(sorted(set(pending)))}")
    print(f"REST interop: {len(tally.failed)} failed, {len(set(pending))} routes pending")
    print(tally.summary())
    return tally.status()


if __name__ == "__main__":
    sys.exit(main())

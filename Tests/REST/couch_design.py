"""Design documents between a real Apache CouchDB 3.5 and Ferry (issue 30, item 4), with
CouchDB's own replicator and `requests`:

  1. On CouchDB: 100 design documents (a third with `views`, a third with a
     `validate_doc_update` that accepts these documents, some edited to generation 3, two
     deleted) and 200 ordinary documents (some edited, some deleted).
  2. CouchDB's `_replicate` CouchDB → Ferry as a Ferry *writer*: the design documents are
     refused one by one (403 `forbidden`), every ordinary document still arrives — a refusal is
     never fatal to the replication.
  3. CouchDB's `_replicate` CouchDB → Ferry as a Ferry database *admin*, then Ferry → a new
     CouchDB database: every document (winner, body, `_deleted`, `_revisions` history) is
     identical on the three databases; a second run each way writes nothing.
  4. A differential check of the routes (status, `error` and the JSON shape of the answer):
     the same requests to CouchDB (admin, and a `_security` member) and to Ferry (database
     admin, and a writer) — design documents, `_design_docs`, COPY, reserved IDs, the
     per-document refusals of `_bulk_docs`, `_bulk_get`, `_revs_diff`, `open_revs`,
     `_changes?filter=_design`, `_find` — and what Ferry does not run (`_view`, `_show`,
     `_info`, …) answered 501 `not_implemented` naming it.

Endpoints are given to CouchDB's replicator as Basic-auth objects
(`{"url": …, "auth": {"basic": {"username", "password"}}}`); it logs in with `POST /_session`
first, as it does by default. Run by Tests/REST/interop:
`python couch_design.py FERRY_BINARY TMPDIR`. Exits 77 (skipped) with the reason when
../shared/tools/couchdb is absent; ends with `N passed, N failed`, non-zero on any failure.
"""
import json
import os
import subprocess
import sys

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

FERRY, TMP = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COUCH = os.path.abspath(os.path.join(ROOT, "..", "shared", "tools", "couchdb", "couchdb"))
tally = ferryd.Tally()
check, ok, free_port = tally.check, ferryd.ok, ferryd.free_port

if not os.access(COUCH, os.X_OK):
    print(f"SKIPPED: no CouchDB at {COUCH} (../shared/tools/couchdb)")
    sys.exit(77)





class Server:
    """A base URL with one user's Basic credentials."""

    def __init__(self, base, user, password):
        self.base, self.user, self.password = base.rstrip("/"), user, password
        self.s = requests.Session()
        self.s.auth = (user, password)

    def __call__(self, method, path, **kw):
        kw.setdefault("timeout", 60)
        kw.setdefault("allow_redirects", False)
        return self.s.request(method, self.base + path, **kw)

    def endpoint(self, db):
        """A replication endpoint for CouchDB's replicator, Basic auth (not _session)."""
        return {"url": f"{self.base}/{db}", "auth": {"basic": {"username": self.user, "password": self.password}}}


# --- servers -------------------------------------------------------------------------------
couch_dir = os.path.join(TMP, "couch-design")
couch_port = free_port()
started = subprocess.run([COUCH, "start", couch_dir, "--port", str(couch_port)], capture_output=True, text=True)
if started.returncode != 0:
    raise SystemExit(f"couchdb start failed: {started.stdout} {started.stderr}")
ferry = None
try:
    couch = Server(f"http://127.0.0.1:{couch_port}", "admin", "admin-pass")
    ok(couch("PUT", "/_users/org.couchdb.user:bob", json={"name": "bob", "password": "bob-pass", "roles": [], "type": "user"}))
    couch_member = Server(couch.base, "bob", "bob-pass")

    ferry = ferryd.serve(FERRY, os.path.join(TMP, "design-data"), TMP, "design-daemon", users=[
        ["root", "--password", "root-pass", "--role", "*=admin"],
        ["dbadmin", "--password", "dbadmin-pass", "--role", "fdb=admin", "--role", "diff=admin", "--role", "wdb=admin"],
        ["will", "--password", "will-pass", "--role", "fdb=writer", "--role", "diff=writer", "--role", "wdb=writer"],
    ])
    ferry_url = ferry.url
    froot = Server(ferry_url, "root", "root-pass")
    fadmin = Server(ferry_url, "dbadmin", "dbadmin-pass")
    fwriter = Server(ferry_url, "will", "will-pass")
    for db in ("fdb", "diff", "wdb"):
        ok(froot("PUT", f"/{db}"), 201)

    # --- 1. the source on CouchDB ------------------------------------------------------------
    ok(couch("PUT", "/src"), 201)
    docs = []
    for i in range(100):
        d = {"_id": f"_design/d{i:03}", "language": "javascript", "n": i}
        if i % 3 == 0:
            d["views"] = {"by_n": {"map": "function (doc) { if (doc.n !== undefined) emit(doc.n, null) }"},
                          "count": {"map": "function (doc) { emit(doc._id, 1) }", "reduce": "_count"}}
        if i % 3 == 1:
            d["validate_doc_update"] = ("function (newDoc, oldDoc, userCtx) { "
                                        "if (newDoc.refuse_me) throw({forbidden: 'refused by d%03d'}); }" % i)
        if i % 3 == 2:
            d["filters"] = {"mine": "function (doc, req) { return doc.owner === req.userCtx.name }"}
            d["shows"] = {"s": "function (doc, req) { return 'x' }"}
        docs.append(d)
    for i in range(200):
        docs.append({"_id": f"doc-{i:04}", "n": i, "body": "x" * 100})
    rows = ok(couch("POST", "/src/_bulk_docs", json={"docs": docs})).json()
    revs = {r["id"]: r["rev"] for r in rows}
    # Edits (design documents to generation 3) and deletions of both kinds.
    for round_ in (1, 2):
        edits = []
        for i in range(0, 100, 7):
            did = f"_design/d{i:03}"
            edits.append({"_id": did, "_rev": revs[did], "language": "javascript", "n": i, "edited": round_})
        ok(couch("POST", "/src/_bulk_docs", json={"docs": edits}))
        for r in ok(couch("POST", "/src/_all_docs", json={"keys": [e["_id"] for e in edits]})).json()["rows"]:
            revs[r["id"]] = r["value"]["rev"]
    for did in ("_design/d098", "_design/d099", "doc-0198", "doc-0199"):
        ok(couch("DELETE", f"/src/{did}", params={"rev": revs[did]}))
    for i in range(0, 200, 10):
        did = f"doc-{i:04}"
        ok(couch("PUT", f"/src/{did}", json={"_rev": revs[did], "n": i, "edited": True}))

    def replicate(source, target, **extra):
        body = {"source": source, "target": target, **extra}
        r = couch("POST", "/_replicate", json=body, timeout=300)
        return r.status_code, r.json()

    def everything(server, db):
        """{id: (winner rev, deleted, body without _rev, _revisions)} for every document."""
        out = {}
        changes = ok(server("GET", f"/{db}/_changes", params={"style": "all_docs"})).json()["results"]
        for c in changes:
            did = c["id"]
            r = server("GET", f"/{db}/{did}" if not did.startswith("_design/") else f"/{db}/_design/{did[8:]}",
                       params={"revs": "true", "open_revs": "all"}, headers={"Accept": "application/json"})
            ok(r)
            leaves = sorted((x["ok"] for x in r.json() if "ok" in x), key=lambda d: d["_rev"])
            out[did] = leaves
        return out

    source_state = everything(couch, "src")
    check(len(source_state) == 300, f"the source holds 300 documents ({len(source_state)})")

    # --- 2. a writer: design documents refused one by one, the rest arrive -----------------
    status, result = replicate(couch.endpoint("src"), fwriter.endpoint("wdb"))
    check(status == 200 and result.get("ok") is True, f"CouchDB → Ferry as a writer completes ({status} {str(result)[:200]})")
    history = (result.get("history") or [{}])[0]
    check(history.get("doc_write_failures") == 100,
          f"CouchDB → Ferry as a writer: 100 design documents refused ({history.get('doc_write_failures')})")
    wdb = ok(fadmin("GET", "/wdb/_all_docs")).json()
    ids = [r["id"] for r in wdb["rows"]]
    check(len(ids) == 198 and not any(i.startswith("_design/") for i in ids),
          f"CouchDB → Ferry as a writer: the 198 live ordinary documents arrived, no design document ({len(ids)})")

    # --- 3. an admin: everything, both ways, identical ------------------------------------
    status, result = replicate(couch.endpoint("src"), fadmin.endpoint("fdb"))
    check(status == 200 and result.get("ok") is True, f"CouchDB → Ferry completes ({status} {str(result)[:200]})")
    history = (result.get("history") or [{}])[0]
    check(history.get("doc_write_failures") == 0, f"CouchDB → Ferry: no write failures ({history.get('doc_write_failures')})")
    ferry_state = everything(fadmin, "fdb")
    check(ferry_state == source_state, "CouchDB → Ferry: every document (leaves, bodies, _deleted, _revisions) identical")
    if ferry_state != source_state:
        for k in sorted(set(source_state) | set(ferry_state))[:5]:
            if source_state.get(k) != ferry_state.get(k):
                print(f"  {k}: couch {json.dumps(source_state.get(k))[:300]}\n  {k}: ferry {json.dumps(ferry_state.get(k))[:300]}")
    design = ok(fadmin("GET", "/fdb/_design_docs")).json()
    check(design["total_rows"] == 98 and len(design["rows"]) == 98, f"Ferry's _design_docs lists the 98 live design documents ({design['total_rows']})")

    status, result = replicate(fadmin.endpoint("fdb"), couch.endpoint("dst"), create_target=True)
    check(status == 200 and result.get("ok") is True, f"Ferry → CouchDB completes ({status} {str(result)[:200]})")
    dst_state = everything(couch, "dst")
    check(dst_state == source_state, "Ferry → CouchDB: every document identical to the source")

    for source, target, what in ((couch.endpoint("src"), fadmin.endpoint("fdb"), "CouchDB → Ferry"),
                                 (fadmin.endpoint("fdb"), couch.endpoint("dst"), "Ferry → CouchDB")):
        status, result = replicate(source, target)
        written = sum(h.get("docs_written", 0) for h in result.get("history", [])[:1])
        check(status == 200 and (result.get("no_changes") or written == 0), f"{what} again writes nothing ({str(result)[:200]})")

    # --- 4. the routes, CouchDB and Ferry side by side -----------------------------------
    ok(couch("PUT", "/diff"), 201)
    ok(couch("PUT", "/diff/_security", json={"members": {"names": ["bob"]}, "admins": {"names": []}}))
    seed = [{"_id": "_design/app", "views": {"v": {"map": "function (doc) { emit(doc._id, null) }"}},
             "validate_doc_update": "function (n, o, u) { if (n.refuse_me) throw({forbidden: 'no'}); }"},
            {"_id": "_design/other", "language": "javascript"},
            {"_id": "A", "v": 1}, {"_id": "a", "v": 2}, {"_id": "src", "v": 3}, {"_id": "z", "v": 4}]
    ok(couch("POST", "/diff/_bulk_docs", json={"docs": seed}))
    status, _ = replicate(couch.endpoint("diff"), fadmin.endpoint("diff"))
    check(status == 200, "the route check's database copied to Ferry")

    def shape(v):
        if isinstance(v, dict):
            return {k: shape(x) for k, x in sorted(v.items())}
        if isinstance(v, list):
            shapes = []
            for x in v:
                s = shape(x)
                if s not in shapes:
                    shapes.append(s)
            return shapes
        return "null" if v is None else "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__

    def answer(r):
        try:
            body = r.json()
        except ValueError:
            body = None
        return r.status_code, body

    def compare(what, method, path, as_admin=True, per=None, **kw):
        """Sends the same request to both (`per(side)`, side "couch" or "ferry", adds what
        differs: each server's own revision IDs); returns the two answers after comparing
        status, `error` and the JSON shape."""
        c = (couch if as_admin else couch_member)(method, path, **kw, **(per("couch") if per else {}))
        f = (fadmin if as_admin else fwriter)(method, path, **kw, **(per("ferry") if per else {}))
        (cs, cb), (fs, fb) = answer(c), answer(f)
        check(cs == fs, f"{what}: status CouchDB {cs} Ferry {fs} ({str(cb)[:120]} | {str(fb)[:120]})")
        if isinstance(cb, dict) and "error" in cb:
            check(isinstance(fb, dict) and fb.get("error") == cb["error"],
                  f"{what}: error CouchDB {cb.get('error')} Ferry {(fb or {}).get('error') if isinstance(fb, dict) else fb}")
            if isinstance(fb, dict) and (cb.get("error") in ("forbidden", "illegal_docid", "method_not_allowed")
                                         or "Destination" in cb.get("reason", "")):
                check(fb.get("reason") == cb.get("reason"), f"{what}: reason CouchDB {cb.get('reason')!r} Ferry {fb.get('reason')!r}")
        elif cs < 300 and cb is not None:
            check(shape(cb) == shape(fb), f"{what}: shape CouchDB {shape(cb)} Ferry {shape(fb)}")
        return c, f

    app = ok(couch("GET", "/diff/_design/app")).json()
    rev_c = app["_rev"]
    rev_f = ok(fadmin("GET", "/diff/_design/app")).json()["_rev"]
    check(rev_c == rev_f, "the design document has the same revision on both")
    compare("GET a design document", "GET", "/diff/_design/app")
    compare("GET a missing design document", "GET", "/diff/_design/nope")
    compare("GET a design document ?revs=true", "GET", "/diff/_design/app", params={"revs": "true"})
    compare("GET a design document ?open_revs=all", "GET", "/diff/_design/app", params={"open_revs": "all"},
            headers={"Accept": "application/json"})
    compare("GET /db/_design (no name)", "GET", "/diff/_design")
    compare("GET _design_docs", "GET", "/diff/_design_docs")
    compare("GET _design_docs include_docs, limit", "GET", "/diff/_design_docs",
            params={"include_docs": "true", "limit": "1", "descending": "true"})
    c, f = compare("POST _design_docs keys", "POST", "/diff/_design_docs",
                   json={"keys": ["_design/app", "a", "_design/none"]})
    check([r.get("key") for r in c.json()["rows"]] == [r.get("key") for r in f.json()["rows"]],
          f"_design_docs keys: the same rows ({c.text[:200]} | {f.text[:200]})")
    c, f = compare("GET _all_docs", "GET", "/diff/_all_docs")
    check([r["id"] for r in c.json()["rows"]] == [r["id"] for r in f.json()["rows"]], "_all_docs: the same IDs in the same order")
    c, f = compare("GET _changes?filter=_design", "GET", "/diff/_changes", params={"filter": "_design"})
    check(sorted(r["id"] for r in c.json()["results"]) == sorted(r["id"] for r in f.json()["results"]),
          "_changes?filter=_design: the same documents")
    c, f = compare("POST _find {} (no design documents)", "POST", "/diff/_find", json={"selector": {}})
    check(sorted(d["_id"] for d in c.json()["docs"]) == sorted(d["_id"] for d in f.json()["docs"]), "_find: the same documents")
    compare("POST _bulk_get a design document", "POST", "/diff/_bulk_get", params={"revs": "true"},
            json={"docs": [{"id": "_design/app", "rev": rev_c}]})
    compare("POST _revs_diff a design document", "POST", "/diff/_revs_diff", json={"_design/app": [rev_c, "9-" + "f" * 32]})

    # Writes: a member / writer is refused, the admin is not.
    compare("PUT a design document as a member/writer", "PUT", "/diff/_design/new", as_admin=False, json={"views": {}})
    compare("DELETE a design document as a member/writer", "DELETE", "/diff/_design/app", as_admin=False, params={"rev": rev_c})
    compare("POST /db a design document as a member/writer", "POST", "/diff", as_admin=False, json={"_id": "_design/posted"})
    compare("PUT a design attachment as a member/writer", "PUT", "/diff/_design/app/x.txt", as_admin=False,
            params={"rev": rev_c}, data=b"hi", headers={"Content-Type": "text/plain"})
    c, f = compare("_bulk_docs with a design document as a member/writer", "POST", "/diff/_bulk_docs", as_admin=False,
                   json={"docs": [{"_id": "_design/b1"}, {"_id": "plain-b1"}]})
    check([(x.get("id"), x.get("error")) for x in c.json()] == [(x.get("id"), x.get("error")) for x in f.json()],
          f"_bulk_docs per-document answers ({c.text[:200]} | {f.text[:200]})")
    c, f = compare("_bulk_docs new_edits=false with a design document as a member/writer", "POST", "/diff/_bulk_docs",
                   as_admin=False, json={"new_edits": False, "docs": [{"_id": "_design/b2", "_rev": "1-" + "a" * 32},
                                                                      {"_id": "plain-b2", "_rev": "1-" + "b" * 32}]})
    check(c.json() == f.json(), f"_bulk_docs new_edits=false: the same refusals ({c.text[:200]} | {f.text[:200]})")
    compare("PUT a design document new_edits=false as a member/writer", "PUT", "/diff/_design/app", as_admin=False,
            params={"new_edits": "false"}, json={"_rev": "5-" + "c" * 32})
    # Revision IDs of new edits are each server's own digest (Protocol/revisions.md): the
    # generations agree, the digests need not.
    def gen(r):
        return r.json().get("rev", "").split("-")[0]

    c, f = compare("PUT a design document as admin", "PUT", "/diff/_design/new", json={"views": {}})
    check(gen(c) == gen(f) == "1", "a new design document is generation 1 on both")
    new_revs = {"couch": c.json().get("rev"), "ferry": f.json().get("rev")}
    compare("PUT a design attachment as admin", "PUT", "/diff/_design/new/x.txt", per=lambda side: {"params": {"rev": new_revs[side]}},
            data=b"hello", headers={"Content-Type": "text/plain"})
    compare("GET a design attachment", "GET", "/diff/_design/new/x.txt")
    compare("GET a missing design attachment", "GET", "/diff/_design/new/none.txt")

    # Reserved IDs.
    compare("PUT /db/_foo", "PUT", "/diff/_foo", json={})
    compare("PUT /db/_design (no name)", "PUT", "/diff/_design", json={})
    compare("POST /db with _id _foo", "POST", "/diff", json={"_id": "_foo"})
    compare("_bulk_docs with _foo", "POST", "/diff/_bulk_docs", json={"docs": [{"_id": "fine"}, {"_id": "_foo"}]})
    compare("_bulk_docs new_edits=false with _foo", "POST", "/diff/_bulk_docs",
            json={"new_edits": False, "docs": [{"_id": "_foo", "_rev": "1-" + "a" * 32}]})
    compare("_bulk_docs with an empty _id", "POST", "/diff/_bulk_docs", json={"docs": [{"_id": ""}]})
    compare("PATCH a document", "PATCH", "/diff/a", json={})
    compare("PATCH a design document", "PATCH", "/diff/_design/app", json={})

    # COPY.
    c, f = compare("COPY to a new document", "COPY", "/diff/src", headers={"Destination": "dst"})
    check(gen(c) == gen(f) == "1", "COPY: generation 1 on both")
    check(f.headers.get("ETag") == f'"{f.json().get("rev")}"' and f.headers.get("Location", "").endswith("/diff/dst"),
          f"COPY: ETag and Location ({f.headers})")
    dst_revs = {"couch": c.json().get("rev"), "ferry": f.json().get("rev")}
    compare("COPY onto an existing document without its revision", "COPY", "/diff/src", headers={"Destination": "dst"})
    c, f = compare("COPY onto an existing document with its revision", "COPY", "/diff/src",
                   per=lambda side: {"headers": {"Destination": f"dst?rev={dst_revs[side]}"}})
    check(gen(c) == gen(f) == "2", "COPY ?rev=: generation 2 on both")
    check(ok(couch("GET", "/diff/dst")).json().get("v") == ok(fadmin("GET", "/diff/dst")).json().get("v") == 3,
          "COPY: the destination holds the source's body")
    compare("COPY with a stale destination revision", "COPY", "/diff/src", headers={"Destination": "dst?rev=1-" + "0" * 32})
    compare("COPY without Destination", "COPY", "/diff/src")
    compare("COPY a missing document", "COPY", "/diff/missing", headers={"Destination": "x"})
    compare("COPY to a design document as a member/writer", "COPY", "/diff/src", as_admin=False,
            headers={"Destination": "_design/copied"})
    compare("COPY a design document as a member/writer", "COPY", "/diff/_design/other", as_admin=False,
            headers={"Destination": "plain-copy"})
    compare("COPY to _foo", "COPY", "/diff/src", headers={"Destination": "_foo"})
    compare("COPY to a percent-encoded destination", "COPY", "/diff/src", headers={"Destination": "a%20b"})
    c, f = compare("GET the percent-decoded copy", "GET", "/diff/a b")
    check(c.json().get("_id") == f.json().get("_id") == "a b", "COPY decodes the destination")

    # What Ferry does not run: CouchDB runs it, Ferry answers 501 naming it; a missing design
    # document is 404 on both.
    for path, word in (("_view/v", "_view"), ("_info", "_info"), ("_show/s", "_show"), ("_list/l/v", "_list"),
                       ("_update/u", "_update"), ("_rewrite/x", "_rewrite"), ("_search/i", "_search")):
        f = fadmin("POST" if word == "_update" else "GET", f"/diff/_design/app/{path}")
        body = f.json() if f.headers.get("Content-Type", "").startswith("application/json") else {}
        check(f.status_code == 501 and body.get("error") == "not_implemented" and word in body.get("reason", ""),
              f"Ferry {path}: 501 not_implemented naming {word} ({f.status_code} {f.text[:150]})")
        compare(f"{path} of a missing design document", "GET", f"/diff/_design/none/{path}")
    compare("_changes with the filter of a missing design document", "GET", "/diff/_changes", params={"filter": "none/f"})
    f = fadmin("GET", "/diff/_changes", params={"filter": "_view", "view": "app/v"})
    check(f.status_code == 501 and f.json().get("error") == "not_implemented", f"_changes?filter=_view: 501 ({f.text[:150]})")
finally:
    if ferry is not None:
        ferry.stop(30)
    subprocess.run([COUCH, "stop", couch_dir, "--wipe"], capture_output=True)

print(tally.summary())
sys.exit(tally.status())

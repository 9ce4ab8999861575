"""Attachments as Apache CouchDB 3.5's own replicator (`POST /_replicate`) moves them, both ways,
between a real CouchDB and `ferry serve` (issue 30, item 6).

On CouchDB: documents with text attachments (which CouchDB stores gzip-encoded: its default
`[attachments] compressible_types` covers text/*, application/json, …), binary ones up to
1 MiB, several per document, one edited twice. Then:

  1. CouchDB -> Ferry with CouchDB's `_replicate`: every attachment's bytes and content type
     read back from Ferry equal CouchDB's; a second replication writes nothing.
  2. Ferry -> CouchDB (a new database): the same comparison; a second replication writes nothing.
  3. A body-only edit on either side replicates without the attachment: a counting proxy in
     front of Ferry sees far fewer bytes than the attachment's size.

The replicator logs in to Ferry with Basic auth (endpoint objects with `auth.basic`). Run by
Tests/REST/interop: `python couch_attachments.py FERRY_BINARY TMPDIR`. Says SKIPPED (exit 0)
where ../shared/tools/couchdb is absent. Ends with `N passed, N failed`; non-zero on failure.
"""
import base64
import json
import os
import random
import socket
import subprocess
import sys
import threading

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

FERRY, TMP = sys.argv[1], sys.argv[2]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COUCHDB = os.path.join(os.path.dirname(REPO), "shared", "tools", "couchdb", "couchdb")
tally = ferryd.Tally()
check, ok, free_port = tally.check, ferryd.ok, ferryd.free_port





class CountingProxy:
    """A TCP proxy in front of Ferry counting the bytes each way, so a test can see what a
    replication moved (the replicator reports documents, not bytes)."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.up = self.down = 0
        self.lock = threading.Lock()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def reset(self):
        with self.lock:
            self.up = self.down = 0

    def accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self.pump, args=(client, upstream, "up"), daemon=True).start()
            threading.Thread(target=self.pump, args=(upstream, client, "down"), daemon=True).start()

    def pump(self, src, dst, way):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self.lock:
                    setattr(self, way, getattr(self, way) + len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def text_payload(rng, size):
    words = ["ferry", "couch", "replicate", "attachment", "gzip", "revision", "stub", "digest", "\n"]
    out = []
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(words))
    return " ".join(out).encode()[:size]


def make_documents(couch, db, rng):
    """Creates the source documents on CouchDB; returns {doc_id: {name: (content_type, bytes)}}."""
    expected = {}
    specs = [
        ("text-small", [("note.txt", "text/plain", text_payload(rng, 1458))]),
        ("text-large", [("big.txt", "text/plain", text_payload(rng, 300_000))]),
        ("json", [("data.json", "application/json", json.dumps({"k": list(range(2000))}).encode())]),
        ("binary-1m", [("blob.bin", "application/octet-stream", rng.randbytes(1 << 20))]),
        ("binary-small", [("img.png", "image/png", rng.randbytes(777))]),
        ("mixed", [("a.txt", "text/plain", text_payload(rng, 5000)), ("b.bin", "application/octet-stream", rng.randbytes(200_000)),
                   ("c.html", "text/html", b"<p>" + text_payload(rng, 9000) + b"</p>"), ("empty.txt", "text/plain", b"")]),
    ]
    for i in range(20):
        specs.append((f"many-{i:02}", [(f"f{i}.txt", "text/plain", text_payload(rng, 100 + i * 997)),
                                        (f"g{i}.bin", "application/octet-stream", rng.randbytes(50 + i * 3001))]))
    for doc_id, atts in specs:
        body = {"title": doc_id, "_attachments": {
            name: {"content_type": ct, "data": base64.b64encode(data).decode()} for name, ct, data in atts}}
        ok(couch.put(f"/{db}/{doc_id}", json=body))
        expected[doc_id] = {name: (ct, data) for name, ct, data in atts}
    # A document whose attachment changed in a later revision, and a plain one.
    rev = ok(couch.put(f"/{db}/edited", json={"v": 1, "_attachments": {
        "e.txt": {"content_type": "text/plain", "data": base64.b64encode(b"first version\n" * 50).decode()}}})).json()["rev"]
    final = text_payload(rng, 4000)
    rev = ok(couch.put(f"/{db}/edited/e.txt", params={"rev": rev}, content=final, headers={"Content-Type": "text/plain"})).json()["rev"]
    ok(couch.put(f"/{db}/edited", json={"v": 2, "_rev": rev, "_attachments": {
        "e.txt": {"stub": True}}}))
    expected["edited"] = {"e.txt": ("text/plain", final)}
    ok(couch.put(f"/{db}/plain", json={"no": "attachments"}))
    expected["plain"] = {}
    return expected


def compare(label, client, db, expected):
    """Every document's attachments on `client` have the expected names, bytes and type."""
    bad = []
    for doc_id, atts in expected.items():
        r = client.get(f"/{db}/{doc_id}")
        if r.status_code != 200:
            bad.append(f"{doc_id}: GET {r.status_code}")
            continue
        stubs = r.json().get("_attachments", {})
        if set(stubs) != set(atts):
            bad.append(f"{doc_id}: attachments {sorted(stubs)} != {sorted(atts)}")
            continue
        for name, (ct, data) in atts.items():
            if stubs[name].get("stub") is not True:
                bad.append(f"{doc_id}/{name}: stub is {stubs[name].get('stub')!r}")
            if stubs[name].get("length") != len(data):
                bad.append(f"{doc_id}/{name}: length {stubs[name].get('length')} != {len(data)}")
            # No Accept-Encoding: both servers must answer the decoded bytes.
            a = client.get(f"/{db}/{doc_id}/{name}", headers={"Accept-Encoding": "identity"})
            if a.status_code != 200 or a.content != data:
                bad.append(f"{doc_id}/{name}: {a.status_code}, {len(a.content)} bytes, equal={a.content == data}")
            if a.headers.get("content-type", "").split(";")[0] != ct:
                bad.append(f"{doc_id}/{name}: content type {a.headers.get('content-type')} != {ct}")
    check(not bad, f"{label}: attachments identical ({'; '.join(bad[:5])})")


TOTALS = {}


def replicate(couch, source, target):
    """One `_replicate`; returns its answer and what this run wrote and failed. CouchDB's
    history counts from the replication's first checkpoint (3.x restores its stats from it),
    and with nothing to do it answers `no_changes` and repeats the last session: so the
    figures of this run are differences from the previous run of the same pair."""
    r = couch.post("/_replicate", json={"source": source, "target": target}, timeout=300)
    check(r.status_code == 200 and r.json().get("ok") is True, f"_replicate {r.status_code} {r.text[:400]}")
    body = r.json()
    key = (source["url"], target["url"])
    before = TOTALS.get(key, {"docs_written": 0, "doc_write_failures": 0})
    now = before if body.get("no_changes") else (body.get("history") or [{}])[0]
    TOTALS[key] = now
    return body, {k: now.get(k, 0) - before.get(k, 0) for k in ("docs_written", "doc_write_failures")}


def main():
    if not os.path.exists(COUCHDB):
        print(f"SKIPPED: {COUCHDB} is absent (Apache CouchDB 3.5 lives in ../shared/tools)")
        return 0
    couch_dir = os.path.join(TMP, "couch-attachments")
    port = free_port()
    started = subprocess.run([COUCHDB, "start", couch_dir, "--port", str(port)], capture_output=True, text=True)
    if started.returncode != 0:
        print(f"FAIL: couchdb start: {started.stdout[-400:]} {started.stderr[-400:]}")
        return 1
    daemon = None
    try:
        couch_url = f"http://127.0.0.1:{port}"
        couch = httpx.Client(base_url=couch_url, auth=("admin", "admin-pass"), timeout=120)
        couch_ep = lambda db: {"url": f"{couch_url}/{db}", "auth": {"basic": {"username": "admin", "password": "admin-pass"}}}  # noqa: E731
        daemon = ferryd.serve(FERRY, os.path.join(TMP, "att-ferry"), TMP, "att-ferry",
                              users=[["u", "--password", "p", "--role", "*=admin"]])
        ferry_url = daemon.url
        ferry = httpx.Client(base_url=ferry_url, auth=("u", "p"), timeout=120)
        proxy = CountingProxy(int(ferry_url.rsplit(":", 1)[1]))
        ferry_ep = lambda db: {"url": f"http://127.0.0.1:{proxy.port}/{db}", "auth": {"basic": {"username": "u", "password": "p"}}}  # noqa: E731

        # CouchDB gzip-encodes text attachments by default: the case Ferry must accept.
        ok(couch.put("/src"))
        expected = make_documents(couch, "src", random.Random(30))
        info = ok(couch.get("/src/text-small", params={"att_encoding_info": "true"})).json()
        check(info["_attachments"]["note.txt"].get("encoding") == "gzip", "CouchDB stores text attachments gzip-encoded")

        # 1. CouchDB -> Ferry.
        ok(ferry.put("/fdb"))
        body, h = replicate(couch, couch_ep("src"), ferry_ep("fdb"))
        check(h.get("doc_write_failures") == 0 and h.get("docs_written") == len(expected),
              f"CouchDB -> Ferry wrote {h.get('docs_written')}/{len(expected)}, failures {h.get('doc_write_failures')}")
        compare("CouchDB -> Ferry", ferry, "fdb", expected)
        _, h = replicate(couch, couch_ep("src"), ferry_ep("fdb"))
        check(h.get("docs_written", 0) == 0, f"second CouchDB -> Ferry moves nothing (wrote {h.get('docs_written')})")
        stub = ok(ferry.get("/fdb/binary-small")).json()["_attachments"]["img.png"]
        check(stub.get("digest", "").startswith("md5-") and stub.get("stub") is True and stub.get("revpos") == 1,
              f"Ferry's stub has CouchDB's shape: {stub}")

        # 2. Ferry -> CouchDB.
        ok(couch.put("/back"))
        body, h = replicate(couch, ferry_ep("fdb"), couch_ep("back"))
        check(h.get("doc_write_failures") == 0 and h.get("docs_written") == len(expected),
              f"Ferry -> CouchDB wrote {h.get('docs_written')}/{len(expected)}, failures {h.get('doc_write_failures')}")
        compare("Ferry -> CouchDB", couch, "back", expected)
        _, h = replicate(couch, ferry_ep("fdb"), couch_ep("back"))
        check(h.get("docs_written", 0) == 0, f"second Ferry -> CouchDB moves nothing (wrote {h.get('docs_written')})")
        for doc_id in expected:
            a = ok(couch.get(f"/src/{doc_id}")).json()["_rev"]
            b = ok(ferry.get(f"/fdb/{doc_id}")).json()["_rev"]
            c = ok(couch.get(f"/back/{doc_id}")).json()["_rev"]
            if not check(a == b == c, f"{doc_id}: same revision on all three ({a}, {b}, {c})"):
                break

        # 3. A body-only edit does not re-send the 1 MiB attachment, either way.
        doc = ok(couch.get("/src/binary-1m")).json()
        doc["title"] = "edited on CouchDB"
        ok(couch.put("/src/binary-1m", json=doc))
        proxy.reset()
        _, h = replicate(couch, couch_ep("src"), ferry_ep("fdb"))
        check(h.get("docs_written") == 1, f"body edit CouchDB -> Ferry wrote {h.get('docs_written')}")
        check(proxy.up < 200_000, f"body edit CouchDB -> Ferry sent {proxy.up} bytes to Ferry (attachment is 1 MiB)")
        print(f"body edit CouchDB -> Ferry: {proxy.up} bytes to Ferry", flush=True)
        compare("after body edit on CouchDB", ferry, "fdb", {"binary-1m": expected["binary-1m"]})

        doc = ok(ferry.get("/fdb/binary-1m")).json()
        doc["title"] = "edited on Ferry"
        ok(ferry.put("/fdb/binary-1m", json=doc))
        proxy.reset()
        _, h = replicate(couch, ferry_ep("fdb"), couch_ep("back"))
        check(h.get("docs_written") == 1, f"body edit Ferry -> CouchDB wrote {h.get('docs_written')}")
        check(proxy.down < 200_000, f"body edit Ferry -> CouchDB read {proxy.down} bytes from Ferry (attachment is 1 MiB)")
        print(f"body edit Ferry -> CouchDB: {proxy.down} bytes from Ferry", flush=True)
        compare("after body edit on Ferry", couch, "back", {"binary-1m": expected["binary-1m"]})
        check(ok(couch.get("/back/binary-1m")).json().get("title") == "edited on Ferry", "Ferry's body edit reached CouchDB")
    finally:
        if daemon:
            daemon.stop()
        subprocess.run([COUCHDB, "stop", couch_dir, "--wipe"], capture_output=True)
    print(tally.summary())
    return tally.status()


if __name__ == "__main__":
    sys.exit(main())

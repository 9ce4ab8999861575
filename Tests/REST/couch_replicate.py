"""Pulls a database out of Ferry over REST with the exact sequence CouchDB's replicator uses
(docs.couchdb.org/en/stable/replication/protocol.html), driven with `httpx`, into a database on
a second Ferry daemon, then checks that every document arrived with the same leaves, the same
current revision and the same `_revisions` history — a live document, an edited one, a deleted
one and one whose conflict Ferry resolved as it was stored — and that a second run resumes from
its checkpoint.

No PyPI client implements CouchDB replication on the client side: CouchDB-Python
(`couchdb.tools.replicate`), pycouchdb and cloudant ask a CouchDB server to replicate
(`POST /_replicate`, `_replicator` documents), and aiocouch has no replicator. So the protocol's
steps are made here, one request each, as the protocol document orders them:

  1. GET /                      (both peers: server info)
  2. GET /{source}              (update_seq)
     GET /{target}              (404: PUT /{target})
  3. replication ID; GET /{source}/_local/{id} and GET /{target}/_local/{id} (checkpoints,
     compared by session_id; a match gives `since`)
  4. GET /{source}/_changes?feed=normal&style=all_docs&since=…&limit=…   (batches)
  5. POST /{target}/_revs_diff  (which leaves the target lacks)
  6. POST /{source}/_bulk_get?revs=true&attachments=true&latest=true
     (when _bulk_get is not served: GET /{source}/{id}?revs=true&open_revs=[…]&latest=true)
  7. POST /{target}/_bulk_docs  {"new_edits": false}
  8. PUT /{source}/_local/{id} and PUT /{target}/_local/{id}   (the checkpoint, with history)

Run by Tests/REST/interop: `python couch_replicate.py FERRY_BINARY TMPDIR`. Ends with a
`N passed, N failed` line and a non-zero status on any failure.
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

FERRY, TMP = sys.argv[1], sys.argv[2]
tally = ferryd.Tally()
check, ok, free_port = tally.check, ferryd.ok, ferryd.free_port



def start_daemon(name, *args):
    return ferryd.serve(FERRY, os.path.join(TMP, f"repl-{name}"), TMP, f"repl-{name}", users=args)



class Replicator:
    """One-shot pull replication from `source` to `target` (both database URLs)."""

    def __init__(self, source_client, source_db, target_client, target_db, batch=3):
        self.s, self.t = source_client, target_client
        self.sdb, self.tdb = source_db, target_db
        self.batch = batch
        self.stats = {"batches": 0, "revs_checked": 0, "missing": 0, "docs_written": 0, "bulk_get": 0, "open_revs_gets": 0}

    def replication_id(self):
        # CouchDB hashes the source server's UUID with the endpoints and options; any stable
        # value unique to this pair does.
        server = ok(self.s.get("/")).json()
        key = f"{server['uuid']}|{self.s.base_url}{self.sdb}|{self.t.base_url}{self.tdb}|all_docs"
        return hashlib.md5(key.encode()).hexdigest()

    def run(self):
        ok(self.s.get("/"))
        ok(self.t.get("/"))
        source_info = ok(self.s.get(f"/{self.sdb}")).json()
        if self.t.get(f"/{self.tdb}").status_code == 404:
            ok(self.t.put(f"/{self.tdb}"), 201)
        rep_id = self.replication_id()
        src_ck = self.s.get(f"/{self.sdb}/_local/{rep_id}")
        tgt_ck = self.t.get(f"/{self.tdb}/_local/{rep_id}")
        since = "0"
        if src_ck.status_code == 200 and tgt_ck.status_code == 200:
            a, b = src_ck.json(), tgt_ck.json()
            if a.get("session_id") == b.get("session_id"):
                since = a.get("source_last_seq", "0")
            else:  # compare histories for a common session, as CouchDB does
                common = {h["session_id"]: h for h in b.get("history", [])}
                for h in a.get("history", []):
                    if h["session_id"] in common:
                        since = h["recorded_seq"]
                        break
        self.started_from = since
        start_seq = since
        while True:
            changes = ok(self.s.get(f"/{self.sdb}/_changes", params={"feed": "normal", "style": "all_docs", "since": since,
                                                                      "limit": self.batch})).json()
            rows = changes["results"]
            if not rows:
                break
            self.stats["batches"] += 1
            wanted = {}
            for row in rows:
                wanted.setdefault(row["id"], []).extend(c["rev"] for c in row["changes"])
            self.stats["revs_checked"] += sum(len(v) for v in wanted.values())
            diff = ok(self.t.post(f"/{self.tdb}/_revs_diff", json=wanted)).json()
            missing = [(doc_id, rev) for doc_id, d in diff.items() for rev in d["missing"]]
            self.stats["missing"] += len(missing)
            if missing:
                docs = self.fetch(missing)
                result = ok(self.t.post(f"/{self.tdb}/_bulk_docs", json={"docs": docs, "new_edits": False}), 201).json()
                errors = [x for x in result if "error" in x]
                if errors:
                    raise SystemExit(f"_bulk_docs new_edits=false refused: {errors}")
                self.stats["docs_written"] += len(docs)
            since = changes["last_seq"]
            self.checkpoint(rep_id, start_seq, since)
        return since

    def fetch(self, missing):
        r = self.s.post(f"/{self.sdb}/_bulk_get", params={"revs": "true", "attachments": "true", "latest": "true"},
                        json={"docs": [{"id": i, "rev": r} for i, r in missing]})
        if r.status_code == 200:
            self.stats["bulk_get"] += 1
            docs = []
            for result in r.json()["results"]:
                for item in result["docs"]:
                    if "ok" not in item:
                        raise SystemExit(f"_bulk_get could not read {item}")
                    docs.append(item["ok"])
            return docs
        # CouchDB's fallback when the source has no _bulk_get.
        docs = []
        by_id = {}
        for i, rev in missing:
            by_id.setdefault(i, []).append(rev)
        for i, revs in by_id.items():
            self.stats["open_revs_gets"] += 1
            r = ok(self.s.get(f"/{self.sdb}/{i}", params={"revs": "true", "latest": "true", "open_revs": json.dumps(revs)},
                              headers={"Accept": "application/json"}))
            for item in r.json():
                if "ok" not in item:
                    raise SystemExit(f"open_revs could not read {item}")
                docs.append(item["ok"])
        return docs

    def checkpoint(self, rep_id, start_seq, seq):
        session = getattr(self, "session", None) or uuid.uuid4().hex
        self.session = session
        entry = {"session_id": session, "start_last_seq": start_seq, "end_last_seq": seq, "recorded_seq": seq,
                 "docs_written": self.stats["docs_written"], "missing_found": self.stats["missing"]}
        for client, db in ((self.s, self.sdb), (self.t, self.tdb)):
            path = f"/{db}/_local/{rep_id}"
            prev = client.get(path)
            doc = prev.json() if prev.status_code == 200 else {}
            history = [h for h in doc.get("history", []) if h["session_id"] != session]
            body = {"session_id": session, "source_last_seq": seq, "replication_id_version": 4,
                    "history": [entry] + history[:49]}
            if "_rev" in doc:
                body["_rev"] = doc["_rev"]
            ok(client.put(path, json=body), 201)


def leaves(client, db, doc_id):
    """Every leaf with its body and history, as open_revs=all&revs=true answers."""
    r = ok(client.get(f"/{db}/{doc_id}", params={"open_revs": "all", "revs": "true"}, headers={"Accept": "application/json"}))
    return sorted((x["ok"] for x in r.json() if "ok" in x), key=lambda d: d["_rev"])


def all_ids(client, db):
    ids, since = set(), "0"
    while True:
        page = ok(client.get(f"/{db}/_changes", params={"since": since, "limit": 100})).json()
        if not page["results"]:
            return ids
        ids.update(r["id"] for r in page["results"])
        since = page["last_seq"]


def compare(src, sdb, tgt, tdb, label):
    ids = all_ids(src, sdb)
    check(all_ids(tgt, tdb) == ids, f"{label}: the target has the same document IDs ({len(ids)})")
    for doc_id in sorted(ids):
        a, b = leaves(src, sdb, doc_id), leaves(tgt, tdb, doc_id)
        check(a == b, f"{label}: {doc_id} has the same leaves, bodies and _revisions:\n  source {a}\n  target {b}")
        cur_a = src.get(f"/{sdb}/{doc_id}", params={"revs": "true"})
        cur_b = tgt.get(f"/{tdb}/{doc_id}", params={"revs": "true"})
        check(cur_a.status_code == cur_b.status_code, f"{label}: {doc_id} GET status {cur_a.status_code} vs {cur_b.status_code}")
        if cur_a.status_code == 200:
            check(cur_a.json() == cur_b.json(), f"{label}: {doc_id} current revision and _revisions {cur_a.text} vs {cur_b.text}")
        else:
            check(cur_a.json().get("reason") == cur_b.json().get("reason") == "deleted", f"{label}: {doc_id} deleted on both")
    sa, sb = ok(src.get(f"/{sdb}")).json(), ok(tgt.get(f"/{tdb}")).json()
    check((sa["doc_count"], sa["doc_del_count"]) == (sb["doc_count"], sb["doc_del_count"]),
          f"{label}: doc_count/doc_del_count {sa['doc_count']}/{sa['doc_del_count']} vs {sb['doc_count']}/{sb['doc_del_count']}")
    return ids


def main():
    src = start_daemon("source", ["owner", "--password", "o-pass", "--role", "*=admin"],
                       ["puller", "--password", "p-pass", "--role", "src=writer"])
    tgt = start_daemon("target", ["owner", "--password", "o-pass", "--role", "*=admin"])
    src_url, tgt_url = src.url, tgt.url
    try:
        owner = httpx.Client(base_url=src_url, auth=("owner", "o-pass"), timeout=30)
        ok(owner.put("/src"), 201)
        # A live document, one edited twice, a deleted one, and a conflict (resolved by Ferry as it
        # is stored: the tree keeps the history of the branch that won).
        for i in range(7):
            ok(owner.put(f"/src/doc-{i}", json={"n": i}), 201)
        r1 = ok(owner.put("/src/edited", json={"v": 1}), 201).json()["rev"]
        r2 = ok(owner.put("/src/edited", json={"v": 2, "_rev": r1}), 201).json()["rev"]
        ok(owner.put("/src/edited", json={"v": 3, "_rev": r2}), 201)
        g1 = ok(owner.put("/src/gone", json={"bye": True}), 201).json()["rev"]
        ok(owner.delete("/src/gone", params={"rev": g1}), 200)
        c1 = ok(owner.put("/src/conflicted", json={"side": "base"}), 201).json()["rev"]
        c2 = ok(owner.put("/src/conflicted", json={"side": "local", "_rev": c1}), 201).json()["rev"]
        ok(owner.post("/src/_bulk_docs", json={"new_edits": False, "docs": [
            {"_id": "conflicted", "_rev": "2-" + "f" * 40, "side": "remote",
             "_revisions": {"start": 2, "ids": ["f" * 40, c1.split("-")[1]]}},
            {"_id": "conflicted", "_rev": "3-" + "0" * 40, "side": "deeper",
             "_revisions": {"start": 3, "ids": ["0" * 40, "e" * 40, c1.split("-")[1]]}}]}), 201)
        ok(owner.put("/src/_local/not-replicated", json={"local": True}), 201)
        conflicted = leaves(owner, "src", "conflicted")
        print(f"-- source: 'conflicted' has {len(conflicted)} leaves after Ferry resolved it: "
              f"{[(d['_rev'][:6], d.get('_deleted', False)) for d in conflicted]}")

        # Pull as `puller` (a writer of src: it reads and writes its checkpoint) into the target.
        source = httpx.Client(base_url=src_url, auth=("puller", "p-pass"), timeout=30)
        target = httpx.Client(base_url=tgt_url, auth=("owner", "o-pass"), timeout=30)
        rep = Replicator(source, "src", target, "dst")
        last = rep.run()
        print(f"-- first run: since {rep.started_from} → {last}, {rep.stats}")
        check(rep.started_from == "0", "first run starts from 0")
        check(rep.stats["bulk_get"] > 0 or rep.stats["open_revs_gets"] > 0, "revisions fetched")
        ids = compare(owner, "src", target, "dst", "after the first run")
        check({"edited", "gone", "conflicted"} <= ids and len(ids) == 10, f"source documents: {sorted(ids)}")
        check(target.get("/dst/_local/not-replicated").status_code == 404, "_local documents are not replicated")
        hist = leaves(target, "dst", "edited")[0]["_revisions"]
        check(hist["start"] == 3 and len(hist["ids"]) == 3, f"edited's history on the target: {hist}")

        # More changes, then a second run that must resume from the checkpoint.
        cur = ok(owner.get("/src/doc-0")).json()["_rev"]
        ok(owner.put("/src/doc-0", json={"n": 100, "_rev": cur}), 201)
        cur = ok(owner.get("/src/doc-1")).json()["_rev"]
        ok(owner.delete("/src/doc-1", params={"rev": cur}), 200)
        ok(owner.put("/src/late", json={"late": True}), 201)
        rep2 = Replicator(source, "src", target, "dst")
        last2 = rep2.run()
        print(f"-- second run: since {rep2.started_from} → {last2}, {rep2.stats}")
        check(rep2.started_from == last, f"second run resumed from the checkpoint {last} (got {rep2.started_from})")
        check(rep2.stats["missing"] == 3, f"second run transferred only the 3 new revisions ({rep2.stats['missing']})")
        compare(owner, "src", target, "dst", "after the second run")
        ck_s = ok(source.get(f"/src/_local/{rep2.replication_id()}")).json()
        ck_t = ok(target.get(f"/dst/_local/{rep2.replication_id()}")).json()
        check(ck_s["session_id"] == ck_t["session_id"] and len(ck_s["history"]) == 2 and ck_s["_rev"].startswith("0-"),
              f"checkpoints on both sides with two sessions of history: {ck_s}")
        # A third run has nothing to do.
        rep3 = Replicator(source, "src", target, "dst")
        rep3.run()
        check(rep3.stats["missing"] == 0, f"third run finds nothing missing ({rep3.stats})")
        # A reader cannot push into the target (nothing written).
        before = ok(target.get("/dst")).json()["update_seq"]
        subprocess.run([FERRY, "user", "add", "--data", os.path.join(TMP, "repl-target"), "ro", "--password", "ro-pass",
                        "--role", "dst=reader"], check=True, stdout=subprocess.DEVNULL)
        time.sleep(1.2)  # the daemon re-reads the users file within a second
        ro = httpx.Client(base_url=tgt_url, auth=("ro", "ro-pass"), timeout=30)
        r = ro.post("/dst/_bulk_docs", json={"new_edits": False, "docs": [{"_id": "x", "_rev": "1-" + "a" * 40}]})
        check(r.status_code == 403 and ok(target.get("/dst")).json()["update_seq"] == before,
              f"a reader's replicated write is 403 and writes nothing ({r.status_code})")
    finally:
        for d in (src, tgt):
            d.stop()
    for name, d in (("source", src), ("target", tgt)):
        err = open(d.err_path).read()
        check("Fatal error" not in err and "Backtrace" not in err, f"the {name} daemon did not crash: {err[-300:]}")
    print(f"CouchDB-protocol replication: {len(tally.failed)} failed")
    print(tally.summary())
    return tally.status()


if __name__ == "__main__":
    sys.exit(main())

"""Scenario 4: a competing write never makes a listed revision unfetchable.

Writer threads post `_bulk_docs` `new_edits:false` batches that add new conflicting branches
(generations 2–5 off each document's `1-` revision) to the same 40 documents, while reader
threads list `_changes?style=all_docs` and fetch every listed revision with
`POST _bulk_get?revs=true&latest=true`, as CouchDB's replicator does. Every listed revision
must come back (an `ok` row; with `latest=true` a revision that got a descendant meanwhile
comes back as that descendant). Afterwards every revision a writer wrote must be in the tree
(a leaf or an ancestor of one). Run on CouchDB too, as the control that the test is fair."""
import random
import threading

from dataset import digest
from report import sample
from servers import doc_path

DOCS = 40


def writer(server, db, seed, wid, batches, errors, written):
    rng = random.Random(f"{seed}/writer{wid}")
    for b in range(batches):
        docs = []
        for doc_id in rng.sample(sorted(written), 8):
            base = written[doc_id][0]
            g = rng.randint(2, 5)
            ids = [digest(f"{seed}/{wid}/{b}/{doc_id}/{k}") for k in range(g - 1)] + [base.split("-", 1)[1]]
            doc = {"_id": doc_id, "_rev": f"{g}-{ids[0]}", "_revisions": {"start": g, "ids": ids},
                   "writer": wid, "batch": b}
            if rng.random() < 0.2:
                doc["_deleted"] = True
            docs.append(doc)
        r = server.post(f"/{db}/_bulk_docs", json={"docs": docs, "new_edits": False})
        if r.status_code != 201 or any("error" in x for x in r.json()):
            errors.append(f"writer {wid} batch {b}: HTTP {r.status_code} {r.text[:200]}")
        else:
            for d in docs:
                written[d["_id"]].append(d["_rev"])


def reader(server, db, stop, stats, errors):
    passes = 0
    while not stop.is_set() or passes < 2:
        listing = server.get(f"/{db}/_changes", params={"style": "all_docs"})
        if listing.status_code != 200:
            errors.append(f"_changes HTTP {listing.status_code} {listing.text[:200]}")
            passes += 1
            continue
        rows = listing.json()["results"]
        wanted = [{"id": r["id"], "rev": c["rev"]} for r in rows for c in r["changes"]]
        r = server.post(f"/{db}/_bulk_get", params={"revs": "true", "latest": "true"}, json={"docs": wanted})
        if r.status_code != 200:
            errors.append(f"_bulk_get HTTP {r.status_code} {r.text[:200]}")
        else:
            results = r.json()["results"]
            got = 0
            for res in results:
                for item in res["docs"]:
                    if "ok" in item:
                        got += 1
                    else:
                        err = item.get("error", item)
                        errors.append(f"{res['id']} {err.get('rev', '?') if isinstance(err, dict) else '?'}: {err}")
            if got < len(wanted):
                errors.append(f"pass {passes}: {len(wanted)} revisions listed, {got} returned")
        stats["listed"] += len(wanted)
        passes += 1
    stats["passes"] += passes


def run(report, server, db, seed, batches, label):
    """Races writers against readers on `db` (already created by the caller)."""
    base = server.post(f"/{db}/_bulk_docs", json={"docs": [{"_id": f"race-{i:02d}", "v": 0} for i in range(DOCS)]}, expect=201).json()
    written = {row["id"]: [row["rev"]] for row in base}
    werrors, rerrors, stats = [], [], {"listed": 0, "passes": 0}
    stop = threading.Event()
    readers = [threading.Thread(target=reader, args=(server.clone(), db, stop, stats, rerrors)) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(server.clone(), db, seed, w, batches, werrors, written)) for w in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    report.check(f"{label}: writers' _bulk_docs new_edits:false answered no error ({2 * batches} batches)", not werrors,
                 sample(werrors, 2))
    report.check(f"{label}: every revision listed by _changes is returned by _bulk_get?latest=true "
                 f"({stats['listed']} listed over {stats['passes']} passes)", not rerrors, sample(rerrors, 4))
    lost = []
    for doc_id, revs in sorted(written.items()):
        r = server.get(f"/{db}/{doc_path(doc_id)}", params={"open_revs": "all", "revs": "true"},
                       headers={"Accept": "application/json"})
        known = set()
        for item in r.json() if r.status_code == 200 else []:
            doc = item.get("ok")
            if doc:
                h = doc["_revisions"]
                known |= {f"{h['start'] - k}-{x}" for k, x in enumerate(h["ids"])}
        lost += [f"{doc_id} {rev}" for rev in revs if rev not in known]
    n = sum(len(v) for v in written.values())
    report.check(f"{label}: all {n} revisions the writers were answered success for are in the tree afterwards", not lost,
                 sample(lost, 4))

"""Scenario `checkpoint`: the `_local` checkpoint documents Ferry leaves on CouchDB, in CouchDB's
shape, and what CouchDB's own replicator makes of a target Ferry pushed to (README.md)."""
from harness import couch_url, plain_docs
from servers import replicate, stats

SHAPE_KEYS = ("history", "session_id", "source_last_seq")


def local_docs(server, db):
    """Every `_local` document of `db` with its body (CouchDB: `_local_docs`)."""
    rows = server.get(f"/{db}/_local_docs", params={"include_docs": "true"}, expect=200).json()["rows"]
    return {row["id"]: row.get("doc") or server.get(f"/{db}/{row['id']}", expect=200).json() for row in rows}


def shape_problems(doc):
    """What keeps `doc` from being a checkpoint CouchDB's replicator can read (couch_replicator's
    `_local/<rep id>`: session_id, source_last_seq, history [{session_id, recorded_seq, …}])."""
    bad = [f"no {k}" for k in SHAPE_KEYS if k not in doc]
    hist = doc.get("history")
    if not isinstance(hist, list) or not hist:
        bad.append(f"history is {type(hist).__name__} {str(hist)[:60]}")
    else:
        h = hist[0]
        for k in ("session_id", "recorded_seq"):
            if k not in h:
                bad.append(f"history[0] has no {k}")
        if isinstance(h, dict) and h.get("session_id") != doc.get("session_id"):
            bad.append("history[0].session_id differs from session_id")
    return bad


def check_checkpoint(report, label, couch, db, since_expect_empty=True):
    """One checkpoint document on `db` of CouchDB's shape whose source_last_seq is a valid
    `since` after which the source holds nothing more (the sync was complete)."""
    docs = local_docs(couch, db)
    report.check(f"{label}: a _local checkpoint document exists on CouchDB:{db}", bool(docs), "no _local document")
    if not docs:
        return None
    problems = {i: shape_problems(d) for i, d in docs.items()}
    good = [i for i, p in problems.items() if not p]
    report.check(f"{label}: … in CouchDB's shape (history, session_id, source_last_seq; history[0].recorded_seq)",
                 bool(good), "; ".join(f"{i}: {p} {str(docs[i])[:200]}" for i, p in problems.items()),
                 info=", ".join(good))
    return docs[good[0]] if good else next(iter(docs.values()))


def run(report, couch, local, control, n=500):
    report.section("checkpoint")
    label = "[checkpoint pull]"
    plain_docs(couch, "ckpt-src", n, prefix="ck")
    local.create("ckpt-pull")
    r = local.sync("ckpt-pull", couch_url(couch, "ckpt-src"), "pull")
    report.check(f"{label}: sync --pull exits 0", r.rc == 0, r.describe())
    doc = check_checkpoint(report, label, couch, "ckpt-src")
    if doc and "source_last_seq" in doc:
        rows = couch.get("/ckpt-src/_changes", params={"since": doc["source_last_seq"]}).json()
        report.check(f"{label}: source_last_seq is a sequence CouchDB's _changes accepts, with nothing after it",
                     isinstance(rows, dict) and rows.get("results") == [], str(rows)[:300])

    label = "[checkpoint push]"
    plain_docs(local.server, "ckpt-push", n, prefix="cp", create=False) if local.create("ckpt-push")[0] else None
    couch.put("/ckpt-target", expect=201)
    r = local.sync("ckpt-push", couch_url(couch, "ckpt-target"), "push")
    report.check(f"{label}: sync --push exits 0", r.rc == 0, r.describe())
    doc = check_checkpoint(report, label, couch, "ckpt-target")
    # CouchDB's replicator, run on the main CouchDB, copies the same source (the local database
    # through its REST surface) to the same target. Its replication ID hashes its own node's
    # identity and options, so it will not find the checkpoint written by another client (it
    # starts from sequence 0, as `start_last_seq` shows); what must hold is that it resends
    # nothing: `_revs_diff` against the target finds every revision there.
    answer, seconds, error = replicate(couch, local.server.replication_url("ckpt-push"), couch.replication_url("ckpt-target"))
    st = stats(answer)
    report.check(f"{label}: CouchDB's replicator, same source → same target after the sync, completes and writes "
                 "nothing (docs_written 0, missing_found 0)",
                 error is None and st.get("docs_written") == 0 and st.get("missing_found", 0) == 0,
                 error or f"{st}")
    hist = (answer.get("history") or [{}])[0]
    found = answer.get("no_changes") or str(hist.get("start_last_seq", "0")) not in ("0", "None")
    report.note(f"CouchDB's replicator {'resumed from a checkpoint' if found else 'found no checkpoint of its own and compared from 0'} "
                f"(start_last_seq {hist.get('start_last_seq')!r}, docs_read {st.get('docs_read')}, "
                f"missing_checked {st.get('missing_checked')}); Ferry's checkpoint: "
                f"{ {k: (doc or {}).get(k) for k in ('session_id', 'source_last_seq')} }")

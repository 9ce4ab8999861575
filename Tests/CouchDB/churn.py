"""Scenario 3, no churn and nothing lost: rounds of two-way replication between CouchDB and Ferry
(policy resolve) with concurrent edits of the same documents on both sides between rounds.

What is asserted, per document (G0 = its highest leaf generation once seeded, c0 = 1 if it
held a conflict then, e_C(r) / e_F(r) = edits made on CouchDB / Ferry before round r):
  - after the last edit round both servers report the same winner and body;
  - one more round writes nothing either way (`docs_written` 0);
  - bound: every leaf's generation on either side is ≤ G0 + c0 + Σ_r (max(e_C(r), e_F(r)) +
    [e_C(r) > 0 and e_F(r) > 0]), i.e. a branch grows by the edits made on it plus at most one
    resolution revision per round in which both sides edited (and one for a conflict it was
    seeded with); a document never edited keeps G0 (+1 if it was seeded in conflict);
  - every acknowledged edit (the `rev` each PUT answered) is in the final tree on both
    servers: a leaf, or an ancestor listed in some leaf's `_revisions`;
  - each document has one live leaf on both sides (resolve closes losing branches)."""
import json

from common import compare_winners, create_ferry_db, empty, live_bodies, nothing_moves, replicate_check
from dataset import Dataset, gen, seed
from report import sample
from servers import doc_path

EDIT_ROUNDS = 3


def leaves_with_history(server, db, doc_id):
    """{leaf rev: [ancestor revs, newest first]} from `GET ?open_revs=all&revs=true` (JSON)."""
    r = server.get(f"/{db}/{doc_path(doc_id)}", params={"open_revs": "all", "revs": "true"},
                   headers={"Accept": "application/json"})
    if r.status_code != 200:
        return f"HTTP {r.status_code} {r.text[:100]}"
    out = {}
    for item in r.json():
        doc = item.get("ok")
        if doc:
            h = doc.get("_revisions") or {"start": gen(doc["_rev"]), "ids": [doc["_rev"].split("-", 1)[1]]}
            out[doc["_rev"]] = [f"{h['start'] - k}-{x}" for k, x in enumerate(h["ids"])]
            out[doc["_rev"] + "#deleted"] = bool(doc.get("_deleted"))
    return out


def edit(server, db, doc_id, tag):
    """A regular edit of the winner (or a new revision over a deleted one, without `_rev`, as
    CouchDB allows). Returns the acknowledged rev, or an error text."""
    path = f"/{db}/{doc_path(doc_id)}"
    cur = server.get(path)
    body = {"edited_by": tag, "n": doc_id}
    if cur.status_code == 200:
        body["_rev"] = cur.json()["_rev"]
    elif cur.status_code != 404:
        return f"GET {cur.status_code} {cur.text[:100]}"
    r = server.put(path, json=body)
    if r.status_code not in (201, 202):
        return f"PUT {r.status_code} {r.text[:120]}"
    return r.json()["rev"]


def run(report, couch, ferry, seed_value, n_docs=300, edited_count=100):
    label = "[churn]"
    report.section("no churn, nothing lost (policy resolve)")
    # Plain bodies only: this scenario is about revisions, so attachments and design documents
    # (scenario 2's subject) must not be what stops it.
    ds = Dataset(n_docs, seed_value + 3, attachments=0, deleted=20, design=0, conflicts=50,
                 branch_attachments=False)
    db = "churn"
    seed(couch, db, ds, with_design=False)
    create_ferry_db(report, ferry, db, "resolve", label)
    rows = couch.get(f"/{db}/_changes", params={"style": "all_docs"}, expect=200).json()["results"]
    start = {r["id"]: [c["rev"] for c in r["changes"]] for r in rows}
    g0 = {i: max(gen(x) for x in revs) for i, revs in start.items()}
    c0 = {i: 1 if len(revs) > 1 else 0 for i, revs in start.items()}
    plain = sorted(i for i in ds.plain_ids if i not in ds.conflicts and i not in ds.deleted)
    # 60% of each conflict shape is edited; the rest stay untouched, so a generation that grows
    # on a conflicted document nobody edits (resolution bouncing between the servers) shows.
    edited_conf = []
    for shape in ("tie", "deeper", "live-vs-deleted"):
        ids = sorted(i for i, s in ds.conflicts.items() if s == shape)
        edited_conf += ids[:(len(ids) * 3 + 4) // 5]
    edited = sorted(edited_conf + plain[:edited_count - len(edited_conf)])
    bound = dict((i, g0[i] + c0[i]) for i in start)
    acked = {"CouchDB": [], "Ferry": []}
    refused = []
    C, F = (couch, db), (ferry, db)
    moved = []
    _, _, ok = replicate_check(report, couch, C, F, label + " round 0")
    replicate_check(report, couch, F, C, label + " round 0")
    if not ok and empty(ferry, db):
        report.not_run(f"{label}: edit rounds and their checks", "nothing reached Ferry in round 0")
        return
    for rnd in range(1, EDIT_ROUNDS + 1):
        for server, side in ((couch, "CouchDB"), (ferry, "Ferry")):
            for doc_id in edited:
                rev = edit(server, db, doc_id, f"{side}-round{rnd}")
                if "-" in rev and not rev.startswith(("GET", "PUT")):
                    acked[side].append((doc_id, rev, rnd))
                else:
                    refused.append(f"{side} round {rnd} {doc_id}: {rev}")
        for doc_id in edited:
            bound[doc_id] += 2  # one edit on each side (max = 1) + one resolution (both sides edited)
        a, _, _ = replicate_check(report, couch, C, F, f"{label} round {rnd}")
        b, _, _ = replicate_check(report, couch, F, C, f"{label} round {rnd}")
        moved.append(f"round {rnd}: C→F {a.get('docs_written')} F→C {b.get('docs_written')}")
    report.note("revisions written per round: " + ", ".join(moved))
    report.check(f"{label}: every edit was accepted ({2 * EDIT_ROUNDS * len(edited)} PUTs)", not refused, sample(refused, 3))
    compare_winners(report, label + " after the last round", couch, db, ferry, db, kind=ds.kind)
    cb, fb = live_bodies(couch, db), live_bodies(ferry, db)
    bad = [f"{i}: CouchDB {str(cb.get(i))[:100]} Ferry {str(fb.get(i))[:100]}" for i in sorted(set(cb) | set(fb)) if cb.get(i) != fb.get(i)]
    report.check(f"{label}: same body for every live document after the last round", not bad, sample(bad, 3))
    nothing_moves(report, couch, C, F, label + " round 4")
    nothing_moves(report, couch, F, C, label + " round 4")
    lost, grown, many = [], [], []
    for server, side in ((couch, "CouchDB"), (ferry, "Ferry")):
        trees = {}
        for doc_id in sorted(start):
            tree = leaves_with_history(server, db, doc_id)
            if isinstance(tree, str):
                lost.append(f"{side} {doc_id}: GET ?open_revs=all answered {tree}")
                continue
            trees[doc_id] = tree
            leaves = [k for k in tree if not k.endswith("#deleted")]
            top = max(gen(x) for x in leaves) if leaves else 0
            if top > bound[doc_id]:
                edits = sum(1 for s in acked.values() for d, _, _ in s if d == doc_id)
                grown.append(f"{side} {doc_id}: generation {top} > bound {bound[doc_id]} (seeded {g0[doc_id]}, "
                             f"{'conflicted' if c0[doc_id] else 'no conflict'}, {edits} edits)")
            live = [k for k in leaves if not tree[k + "#deleted"]]
            if len(live) > 1:
                many.append(f"{side} {doc_id}: live leaves {live}")
        for who, edits in acked.items():
            for doc_id, rev, rnd in edits:
                tree = trees.get(doc_id, {})
                known = {r for k, hist in tree.items() if not k.endswith("#deleted") for r in hist}
                if rev not in known:
                    lost.append(f"{side} {doc_id}: {who}'s round-{rnd} edit {rev} is not in the tree "
                                f"(leaves {json.dumps([k for k in tree if not k.endswith('#deleted')])})")
    report.check(f"{label}: no generation grows beyond edits + one resolution per round "
                 f"({len(edited)} edited, {len(start) - len(edited)} untouched documents, both sides)", not grown, sample(grown, 4))
    n_acked = sum(len(v) for v in acked.values())
    report.check(f"{label}: all {n_acked} acknowledged edits are still in the final tree on both sides", not lost, sample(lost, 4))
    report.check(f"{label}: one live leaf per document on both sides (losing branches closed)", not many, sample(many, 4))

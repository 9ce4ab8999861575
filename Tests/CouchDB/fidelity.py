"""Scenario 2: CouchDB's own `_replicate`, logged in, CouchDB → Ferry, then Ferry → a fresh
CouchDB database, for each conflict policy (README.md, "What it checks")."""
from common import compare_winners, create_ferry_db, empty, live_bodies, missing_revs, nothing_moves, replicate_check
from report import by_kind, sample
from snapshot import Snapshot, compare


def run(report, couch, ferry, src_db, src_snap, policy, kind=None):
    label = f"[{policy}]"
    report.section(f"fidelity, conflict policy {policy}")
    fdb, tdb = f"fidelity-{policy}", f"fidelity-{policy}-target"
    create_ferry_db(report, ferry, fdb, policy, label)
    couch.put(f"/{tdb}", expect=201)
    n_leaves = sum(len(v) for v in src_snap.leaves.values())
    _, _, ok = replicate_check(report, couch, (couch, src_db), (ferry, fdb), label, expect_written=n_leaves)
    replicate_check(report, couch, (ferry, fdb), (couch, tdb), label)
    if not ok and empty(ferry, fdb):
        report.not_run(f"{label}: the comparisons of source, Ferry and target", "nothing reached Ferry")
        return
    fsnap = Snapshot(ferry, fdb, with_bytes=(policy == "keep"))
    tsnap = Snapshot(couch, tdb, with_bytes=(policy == "keep"))
    report.check(f"{label}: Ferry's _bulk_get answers every leaf its _changes lists", not fsnap.errors,
                 sample(fsnap.errors, 4))
    if policy == "keep":
        compare(report, label, src_snap, fsnap, kind=kind)
        compare(report, label + " end to end", src_snap, tsnap, digests=True, kind=kind)
    else:
        ids = src_snap.ids()
        report.check(f"{label}: Ferry and the CouchDB target hold every source document ({len(ids)})",
                     ids <= fsnap.ids() and ids <= tsnap.ids(),
                     f"missing on Ferry: {by_kind([(i, i) for i in sorted(ids - fsnap.ids())], kind)}; "
                     f"on the target: {by_kind([(i, i) for i in sorted(ids - tsnap.ids())], kind)}")
        compare_winners(report, label, ferry, fdb, couch, tdb, kind=kind)
        fb, tb = live_bodies(ferry, fdb), live_bodies(couch, tdb)
        bad = [(i, f"{i}: Ferry {str(fb.get(i))[:120]} CouchDB {str(tb.get(i))[:120]}")
               for i in sorted(set(fb) | set(tb)) if fb.get(i) != tb.get(i)]
        report.check(f"{label}: the winner's body (_all_docs include_docs) is the same on Ferry and CouchDB for every live document",
                     not bad, by_kind(bad, kind))
        plain = ids - src_snap.conflicted()
        compare_winners(report, label + " documents without conflicts", couch, src_db, ferry, fdb, ids=plain, kind=kind)
        many = sorted(i for i, revs in fsnap.leaves.items()
                      if sum(1 for r in revs if not fsnap.bodies.get(i, {}).get(r, {}).get("_deleted")) > 1)
        report.check(f"{label}: Ferry leaves one live leaf per document (each losing branch closed by a tombstone)",
                     not many, sample(f"{i} {fsnap.leaves[i]}" for i in many))
        for server, db in ((ferry, fdb), (couch, tdb)):
            lost = missing_revs(server, db, src_snap.leaves)
            report.check(f"{label}: {server!r}:{db} _revs_diff finds none of the source's {n_leaves} leaves missing",
                         not lost, by_kind([(i, f"{i} {r}") for i, r in lost], kind))
    nothing_moves(report, couch, (couch, src_db), (ferry, fdb), label + " second round")
    nothing_moves(report, couch, (ferry, fdb), (couch, tdb), label + " second round")

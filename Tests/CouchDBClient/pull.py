"""Scenario `pull`: the Tests/CouchDB dataset on CouchDB → `ferry sync http://… --pull` into a
new local database, once per conflict policy; then a second pull moves nothing (README.md)."""
from common import compare_winners, missing_revs
from harness import couch_url, update_seq
from report import by_kind, sample
from snapshot import Snapshot, compare


def run(report, couch, local, src_db, src_snap, kind, control):
    policies = ("keep",) if control else ("keep", "resolve")
    if control:
        report.note("control: CouchDB-2 keeps every leaf (policy keep); the resolve pass needs Ferry")
    for policy in policies:
        label = f"[pull {policy}]"
        report.section(f"pull, local policy {policy}")
        db = f"pull-{policy}"
        ok, ev = local.create(db, policy)
        report.check(f"{label}: local database {db} created with conflict_policy {policy}", ok, ev)
        url = couch_url(couch, src_db)
        r = local.sync(db, url, "pull")
        report.check(f"{label}: sync --pull from CouchDB:{src_db} exits 0", r.rc == 0, r.describe(),
                     info=f"{r.seconds:.1f} s, summary {r.counts}")
        if local.count(db) == 0:
            report.not_run(f"{label}: the comparisons", "nothing reached the local database")
            continue
        snap = Snapshot(local.server, db, with_bytes=(policy == "keep"))
        report.check(f"{label}: the local database answers _bulk_get for every leaf its _changes lists",
                     not snap.errors, sample(snap.errors, 4))
        if policy == "keep":
            compare(report, label, src_snap, snap, kind=kind)
        else:
            ids = src_snap.ids()
            report.check(f"{label}: the local database holds every source document ({len(ids)})", ids <= snap.ids(),
                         by_kind([(i, i) for i in sorted(ids - snap.ids())], kind))
            plain = ids - src_snap.conflicted()
            compare_winners(report, label + " documents without conflicts", couch, src_db, local.server, db,
                            ids=plain, kind=kind)
            many = sorted(i for i, revs in snap.leaves.items()
                          if sum(1 for rv in revs if not snap.bodies.get(i, {}).get(rv, {}).get("_deleted")) > 1)
            report.check(f"{label}: one live leaf per document (losing branches closed)", not many,
                         sample(f"{i} {snap.leaves[i]}" for i in many))
            lost = missing_revs(local.server, db, src_snap.leaves)
            report.check(f"{label}: _revs_diff on the local database finds none of the source's leaves missing",
                         not lost, by_kind([(i, f"{i} {rv}") for i, rv in lost], kind))
        before = (update_seq(couch, src_db), update_seq(local.server, db))
        r2 = local.sync(db, url, "pull")
        after = (update_seq(couch, src_db), update_seq(local.server, db))
        moved = r2.counts.get("pulled", r2.counts.get("written"))
        report.check(f"{label}: a second pull exits 0 and pulls nothing (summary 0 pulled)", r2.rc == 0 and moved == 0,
                     r2.describe() + f"; summary {r2.counts}")
        report.check(f"{label}: … and neither CouchDB's nor the local update_seq moved", before == after,
                     f"before {before}, after {after}")

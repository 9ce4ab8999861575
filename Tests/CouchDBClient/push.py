"""Scenario `push`: the Tests/CouchDB dataset written into a local database through the
inspector's REST API (`_bulk_docs`, conflicts with `new_edits:false`), then `ferry sync
http://… --push` into an empty CouchDB database; compared leaf by leaf; a second push writes
nothing (README.md)."""
from harness import couch_url, seed_into, update_seq
from report import sample
from snapshot import Snapshot, compare


def run(report, couch, local, ds, kind, control):
    policies = ("keep",) if control else ("keep", "resolve")
    for policy in policies:
        label = f"[push {policy}]"
        report.section(f"push, local policy {policy}")
        db, tdb = f"push-{policy}", f"push-{policy}-target"
        seed_into(local, local.server, db, ds, policy)
        lsnap = Snapshot(local.server, db)
        report.check(f"{label}: the seeded local database answers _bulk_get for every leaf", not lsnap.errors,
                     sample(lsnap.errors, 4))
        report.note(f"local {db}: {len(lsnap.ids())} documents, {sum(len(v) for v in lsnap.leaves.values())} leaves, "
                    f"{len(lsnap.conflicted())} in conflict")
        couch.put(f"/{tdb}", expect=201)
        url = couch_url(couch, tdb)
        r = local.sync(db, url, "push")
        report.check(f"{label}: sync --push to CouchDB:{tdb} exits 0", r.rc == 0, r.describe(),
                     info=f"{r.seconds:.1f} s, summary {r.counts}")
        tsnap = Snapshot(couch, tdb)
        # CouchDB keeps whatever it is sent: the target must equal the local tree, under either
        # policy (under resolve that tree already holds Ferry's resolutions).
        compare(report, label, lsnap, tsnap, kind=kind, ferry_vs_couch=True)
        before = update_seq(couch, tdb)
        r2 = local.sync(db, url, "push")
        after = update_seq(couch, tdb)
        moved = r2.counts.get("pushed", r2.counts.get("written"))
        report.check(f"{label}: a second push exits 0 and pushes nothing (summary 0 pushed)", r2.rc == 0 and moved == 0,
                     r2.describe() + f"; summary {r2.counts}")
        report.check(f"{label}: … and the target's update_seq did not move", before == after, f"before {before}, after {after}")

"""Scenario `openrevs`: a server without `_bulk_get` (CouchDB 1.x, some PouchDB servers). The
counting proxy answers `POST /db/_bulk_get` with CouchDB 1.x's 404 `not_found`; `ferry sync
--pull` must then read every document with `GET /db/id?open_revs=[…]&revs=true&latest=true`
(JSON) and end with the same leaves, bodies and attachment bytes as CouchDB holds, and a second
pull moves nothing (Protocol/replication-http.md, "Pull")."""
from dataset import Dataset, seed
from harness import couch_url
from proxy import Proxy
from snapshot import Snapshot, compare


def run(report, couch, local, control, seed_value):
    report.section("a server without _bulk_get: documents read with open_revs")
    label = "[openrevs]"
    if control:
        report.note("control: CouchDB's replicator has the same fallback; nothing to compare it with here")
        return
    ds = Dataset(400, seed_value, attachments=20, deleted=20, design=5, conflicts=30)
    seed(couch, "openrevs-src", ds)
    ok, why = local.create("openrevs", "keep")
    report.check(f"{label}: the local database is made with policy keep", ok, why)
    port = int(couch.base.rsplit(":", 1)[1])
    proxy = Proxy(port, refuse={"_bulk_get"})
    try:
        url = couch_url(couch, "openrevs-src", base=proxy.base)
        r = local.sync("openrevs", url, "pull")
        counts = proxy.counters.snapshot()
        report.check(f"{label}: sync --pull through a server without _bulk_get exits 0", r.rc == 0, r.describe(),
                     info=f"{r.seconds:.1f} s, summary {r.counts}")
        report.check(f"{label}: _bulk_get was tried and the documents read with GET ?open_revs (none by _bulk_get)",
                     counts["methods"].get("POST _bulk_get", 0) >= 1 and counts["single_gets"] > 0, f"proxy {counts}")
        compare(report, label, Snapshot(couch, "openrevs-src"), Snapshot(local.server, "openrevs"), kind=ds.kind)
        r2 = local.sync("openrevs", url, "pull")
        report.check(f"{label}: a second pull exits 0 and pulls nothing", r2.rc == 0 and r2.counts.get("pulled") == 0,
                     r2.describe())
    finally:
        proxy.close()

"""Scenario `restart`: CouchDB is stopped part way through a push (`couchdb stop DIR`, data
kept) and started again on the same port; the sync retries and completes (README.md). The push
goes through `proxy.Proxy`, slowed so the stop lands mid-push; while CouchDB is down the proxy
drops each connection without an answer."""
import subprocess

from common import winners
from harness import SyncOptions, couch_url, plain_docs, poll
from proxy import Proxy


def run(report, couch, couchdb, local, control, n, rate):
    report.section(f"CouchDB restarted mid-push ({n} documents)")
    label = "[restart]"
    local.create("restart")
    plain_docs(local.server, "restart", n, prefix="rt", size=4096, create=False)
    couch.put("/restart-target", expect=201)
    port = int(couch.base.rsplit(":", 1)[1])
    proxy = Proxy(port, rate=rate)
    try:
        h = local.start("restart", couch_url(couch, "restart-target", base=proxy.base), "push",
                        SyncOptions(timeout=300, max_attempts=0))
        count = lambda: couch.get("/restart-target", timeout=10).json().get("doc_count", 0)  # noqa: E731
        poll("the target has a third of the documents", 600, lambda: count() >= n // 3 or not h.alive(), every=0.05)
        before = count()
        subprocess.run([couchdb.tool, "stop", couchdb.dir], capture_output=True, timeout=120)
        report.note(f"CouchDB stopped with {before} of {n} documents on the target")
        proxy.rate = None
        p = subprocess.run([couchdb.tool, "start", couchdb.dir, "--port", str(port)], capture_output=True, text=True,
                           timeout=180)
        if p.returncode == 0:
            couchdb.set_config("replicator", "startup_jitter", "0")  # the restart rewrote the test ini
        report.check(f"{label}: CouchDB stopped part way (0 < {before} < {n}) and started again on port {port}",
                     0 < before < n and p.returncode == 0, f"{p.stdout[-200:]} {p.stderr[-300:]}")
        r = h.wait(600)
        if r is None:
            h.kill()
            r = h.wait(30)
        report.check(f"{label}: the push retried and exited 0", r is not None and r.rc == 0, r.describe() if r else "no exit")
        wl, wt = winners(local.server, "restart"), winners(couch, "restart-target")
        report.check(f"{label}: the target holds all {n} documents with the local revisions", wl == wt and len(wl) == n,
                     f"{len(wt)} on the target, {sum(1 for i in wl if wl[i] != wt.get(i))} differ or missing")
    finally:
        proxy.close()

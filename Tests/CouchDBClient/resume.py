"""Scenario `resume`: a pull killed with SIGKILL part way resumes from its checkpoint: the rerun
completes and fetches at most one batch more than the documents still missing (README.md).

What is measured, and why it is sound: both runs go through `proxy.Proxy`, which counts the
documents the client asks CouchDB for (`_bulk_get` bodies, single `open_revs` GETs) and slows
the answers so the kill lands mid-pull whatever the client's speed. `missing` = source documents
minus the documents the local file holds after the kill (a committed row is a document the
rerun need not fetch); `fetched` = documents the rerun requested. A client that resumes from
its last checkpoint re-lists only what came after it, and re-fetches at most the batch it was
writing when killed: fetched ≤ missing + batch. One that starts over fetches ~everything."""
import signal

from common import winners
from harness import SyncOptions, couch_url, plain_docs, poll
from proxy import Proxy


def run(report, couch, local, control, n, batch, rate):
    report.section(f"resume after SIGKILL ({n} documents, batch {batch})")
    label = "[resume]"
    plain_docs(couch, "resume-src", n, prefix="rs", size=4096)
    local.create("resume")
    port = int(couch.base.rsplit(":", 1)[1])
    proxy = Proxy(port, rate=rate)
    try:
        url = couch_url(couch, "resume-src", base=proxy.base)
        opts = SyncOptions(batch_size=batch)
        h = local.start("resume", url, "pull", opts)
        third = max(1, n // 3)
        reached = poll("local documents ≥ n/3", 600, lambda: local.count("resume") >= third or not h.alive(), every=0.02)
        at_kill = local.count("resume")
        first = h.kill()
        report.check(f"{label}: the first pull was killed part way ({third} ≤ local documents < {n})",
                     reached and third <= at_kill < n and first is not None and first.rc in (-signal.SIGKILL, 137),
                     f"local documents {at_kill} when killed; run: {first.describe() if first else 'none'}; "
                     f"proxy {proxy.counters.snapshot()}")
        have = local.count("resume")
        missing = n - have
        first_counts = proxy.counters.snapshot()
        proxy.counters.reset()
        proxy.rate = None
        r = local.sync("resume", url, "pull", opts)
        counts = proxy.counters.snapshot()
        fetched = counts["bulk_get_docs"] + counts["single_gets"]
        report.check(f"{label}: the rerun exits 0", r.rc == 0, r.describe())
        w_src, w_loc = winners(couch, "resume-src"), winners(local.server, "resume")
        report.check(f"{label}: the local database then holds all {n} documents with CouchDB's revisions",
                     w_src == w_loc, f"{len(w_loc)} documents locally, {sum(1 for i in w_src if w_src[i] != w_loc.get(i))} differ")
        report.check(f"{label}: the rerun fetched at most one batch beyond what was missing "
                     f"(fetched {fetched} ≤ missing {missing} + batch {batch})",
                     counts["requests"] > 0 and fetched <= missing + batch,
                     f"fetched {fetched}, missing {missing} (local held {have} of {n} after the kill); rerun proxy {counts}; "
                     f"first run proxy {first_counts}",
                     info=f"first run requested {first_counts['bulk_get_docs'] + first_counts['single_gets']}, "
                          f"rerun's _changes since {counts['since'][:2]}")
    finally:
        proxy.close()

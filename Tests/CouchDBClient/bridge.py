"""Scenario `bridge`: Ferry A (`ferry serve`, reached over BLIP, ws://) ↔ the local database B
↔ CouchDB (http://, CouchDB's protocol), as rounds of one-shot `ferry sync` both ways: B with A,
then B with CouchDB. Writes on A and on CouchDB, ten documents edited on both (conflicts); after
at most four rounds all three hold the same documents and winners (revision and body), B and
CouchDB the same leaves too, and one more round moves nothing (README.md). A's leaves may be
fewer: the Couchbase protocol (BLIP) sends a document's current revision only, never the losing
branch a resolution closed with a tombstone (Protocol/replication.md), so the closed branch of a
conflict B resolved stays between B and CouchDB, which replicate every leaf. In control mode B is CouchDB-2, whose replicator reaches A through
A's REST API."""
import os

from harness import couch_url, plain_docs
from report import sample
from servers import Ferry
from snapshot import Snapshot


def state(server, db):
    s = Snapshot(server, db, with_bytes=False)
    return s.leaves, s.winner


def converged(states):
    """Same winners on all three; same leaves on B and CouchDB (the HTTP link carries every leaf)."""
    return (states["Ferry-A"][1] == states["B"][1] == states["CouchDB"][1]
            and states["B"][0] == states["CouchDB"][0] and set(states["Ferry-A"][0]) == set(states["B"][0]))


def run(report, couch, local, control, binary, tmp):
    report.section("bridge: Ferry A ↔(BLIP) B ↔(HTTP) CouchDB")
    label = "[bridge]"
    a = Ferry(binary, os.path.join(tmp, "ferry-a"), os.path.join(tmp, "ferry-a.err"))
    a.server.name = "Ferry-A"
    try:
        a.server.put("/bridge", expect=201)
        couch.put("/bridge", expect=201)
        local.create("bridge")
        plain_docs(a.server, "bridge", 100, prefix="a", create=False)
        plain_docs(couch, "bridge", 100, prefix="c", create=False)
        for k in range(10):  # the same ID written on both sides: a conflict to settle
            a.server.put(f"/bridge/both-{k}", json={"on": "A", "k": k}, expect=201)
            couch.put(f"/bridge/both-{k}", json={"on": "CouchDB", "k": k}, expect=201)
        a_url, c_url = local.ferry_peer_url(a.server, "bridge"), couch_url(couch, "bridge")
        servers = {"Ferry-A": a.server, "B": local.server, "CouchDB": couch}
        rounds, done, runs = 0, False, []
        while rounds < 4 and not done:
            rounds += 1
            for url in (a_url, c_url):
                r = local.sync("bridge", url, None)
                runs.append((url.split("://")[0], r))
            states = {n: state(s, "bridge") for n, s in servers.items()}
            done = converged(states)
        bad = [f"{scheme}: {r.describe()}" for scheme, r in runs if r.rc != 0]
        report.check(f"{label}: every sync round exits 0 ({len(runs)} runs, ws:// and http://)", not bad, sample(bad, 2))
        leaves = {n: st[0] for n, st in states.items()}
        ids = set().union(*(set(v) for v in leaves.values()))
        differ = sorted(i for i in ids if not (leaves["B"].get(i) == leaves["CouchDB"].get(i)
                                               and states["Ferry-A"][1].get(i) == states["B"][1].get(i) == states["CouchDB"][1].get(i)))
        report.check(f"{label}: A, B and CouchDB converge within 4 rounds: same {len(ids)} documents and winners; "
                     "B and CouchDB the same leaves",
                     done and len(ids) == 210, f"after {rounds} rounds: "
                     + sample(f"{i}: A {leaves['Ferry-A'].get(i)} B {leaves['B'].get(i)} CouchDB {leaves['CouchDB'].get(i)}"
                              for i in differ), info=f"{rounds} rounds")
        seqs = {n: s.get("/bridge", expect=200).json().get("update_seq") for n, s in servers.items()}
        extra = [local.sync("bridge", url, None) for url in (a_url, c_url)]
        seqs2 = {n: s.get("/bridge", expect=200).json().get("update_seq") for n, s in servers.items()}
        report.check(f"{label}: one more round moves nothing (no update_seq moves)",
                     done and seqs == seqs2 and all(r.rc == 0 for r in extra),
                     f"before {seqs}, after {seqs2}; " + "; ".join(r.describe() for r in extra if r.rc != 0))
        crash = a.crashed()
        report.check(f"{label}: Ferry A is still running and printed no crash", crash is None, str(crash)[-300:])
    finally:
        a.stop()

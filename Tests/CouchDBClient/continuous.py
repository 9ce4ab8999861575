"""Scenario `continuous`: `ferry sync --continuous` both ways while a writer on each side writes;
each write's lag (acknowledged on one side → listed by the other side's `_changes`), p50/p99;
both sides converge (README.md).

The local side's writer and reader use the inspector (`ferry serve` over the same file): the
sync process watches the file for other processes' writes (`ferry sync --continuous` opens it
with `watchExternalWrites`), which is how a second process writes a database a running sync
owns. 10 shared documents are edited on both sides, so conflicts arise and must settle the same
way on both."""
import threading
import time

from harness import SyncOptions, couch_url, poll
from report import sample
from snapshot import Snapshot


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None


class Watcher(threading.Thread):
    """Polls `_changes?since=` on one server and notes when each ID was first listed."""

    def __init__(self, server, db, stop):
        super().__init__(daemon=True)
        self.server, self.db, self.stop, self.seen, self.error = server.clone(), db, stop, {}, None

    def run(self):
        since = 0
        while not self.stop.is_set():
            try:
                r = self.server.get(f"/{self.db}/_changes", params={"since": since}, timeout=30).json()
                now = time.monotonic()
                for row in r.get("results", []):
                    self.seen.setdefault(row["id"], now)
                since = r.get("last_seq", since)
            except Exception as e:  # noqa: BLE001 - reported by the scenario
                self.error = f"{type(e).__name__}: {e}"
            time.sleep(0.02)


class Writer(threading.Thread):
    """Writes a new document every `every` seconds (and every fifth write edits a shared
    document); `acked[id]` is when the server answered."""

    def __init__(self, server, db, prefix, duration, every, stop):
        super().__init__(daemon=True)
        self.server, self.db, self.prefix, self.duration, self.every = server.clone(), db, prefix, duration, every
        self.stop, self.acked, self.failures, self.edits = stop, {}, [], 0

    def run(self):
        t0, k = time.monotonic(), 0
        while time.monotonic() - t0 < self.duration and not self.stop.is_set():
            doc_id = f"{self.prefix}-{k:05d}"
            r = self.server.put(f"/{self.db}/{doc_id}", json={"k": k, "by": self.prefix})
            if r.status_code == 201:
                self.acked[doc_id] = time.monotonic()
            else:
                self.failures.append(f"{doc_id} {r.status_code}")
            if k % 5 == 0:
                shared = f"shared-{(k // 5) % 10}"
                cur = self.server.get(f"/{self.db}/{shared}")
                body = {"by": self.prefix, "k": k}
                if cur.status_code == 200:
                    body["_rev"] = cur.json()["_rev"]
                if self.server.put(f"/{self.db}/{shared}", json=body).status_code == 201:
                    self.edits += 1
            k += 1
            time.sleep(self.every)


def run(report, couch, local, control, duration):
    report.section(f"continuous both ways for {duration} s with writers on both sides")
    label = "[continuous]"
    couch.put("/cont", expect=201)
    local.create("cont")
    h = local.start("cont", couch_url(couch, "cont"), None, SyncOptions(continuous=True))
    stop = threading.Event()
    watch_couch, watch_local = Watcher(couch, "cont", stop), Watcher(local.server, "cont", stop)
    w_couch = Writer(couch, "cont", "c", duration, 0.1, stop)
    w_local = Writer(local.server, "cont", "f", duration, 0.1, stop)
    try:
        for t in (watch_couch, watch_local, w_couch, w_local):
            t.start()
        w_couch.join(duration + 120)
        w_local.join(duration + 120)
        report.check(f"{label}: the writers' writes were all accepted ({len(w_couch.acked)} on CouchDB, "
                     f"{len(w_local.acked)} locally)", not w_couch.failures and not w_local.failures,
                     sample(w_couch.failures + w_local.failures, 4))
        running = h.alive()
        report.check(f"{label}: the continuous sync is still running after {duration} s", running,
                     (h.wait(1) or h.stop()).describe() if not running else "")
        deadline = 120 if running else 5  # a sync that died settles nothing: no long waits
        reached = poll("every write listed on the other side", deadline,
                       lambda: set(w_local.acked) <= set(watch_couch.seen) and set(w_couch.acked) <= set(watch_local.seen),
                       every=0.2)
        lags = [watch_couch.seen[i] - t for i, t in w_local.acked.items() if i in watch_couch.seen]
        lags_in = [watch_local.seen[i] - t for i, t in w_couch.acked.items() if i in watch_local.seen]
        missing = ([i for i in w_local.acked if i not in watch_couch.seen] + [i for i in w_couch.acked if i not in watch_local.seen])
        report.check(f"{label}: every write reached the other side", reached and not missing,
                     f"{len(missing)} not listed: {sample(missing, 4)}; watcher errors {watch_couch.error} / {watch_local.error}")
        for name, xs in (("local → CouchDB", lags), ("CouchDB → local", lags_in)):
            p50, p99 = percentile(xs, 50), percentile(xs, 99)
            report.check(f"{label}: lag {name}: p50 and p99 under 10 s (a collapse, not a target)",
                         bool(xs) and p99 < 10, f"{len(xs)} writes, p50 {p50}, p99 {p99}",
                         info=f"{len(xs)} writes, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms" if xs else "")

        def converged():
            a, b = Snapshot(couch, "cont", with_bytes=False), Snapshot(local.server, "cont", with_bytes=False)
            return a.leaves == b.leaves and a.winner == b.winner
        same = poll("both sides converge", deadline, converged, every=0.5)
        a, b = Snapshot(couch, "cont", with_bytes=False), Snapshot(local.server, "cont", with_bytes=False)
        differ = sorted(i for i in a.ids() | b.ids() if a.leaves.get(i) != b.leaves.get(i) or a.winner.get(i) != b.winner.get(i))
        report.check(f"{label}: both sides converge: same documents, leaves and winners "
                     f"({len(a.ids())} documents, {w_couch.edits + w_local.edits} shared edits)", same and not differ,
                     sample(f"{i}: CouchDB {a.leaves.get(i)} {a.winner.get(i)} local {b.leaves.get(i)} {b.winner.get(i)}"
                            for i in differ))
    finally:
        stop.set()
        end = h.stop()
    report.check(f"{label}: SIGTERM stops the continuous sync cleanly (exit 0)", end is not None and end.rc == 0,
                 end.describe() if end else "no exit")

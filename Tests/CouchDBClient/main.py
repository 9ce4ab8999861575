"""The acceptance harness of Ferry's CouchDB replication client, `ferry sync http(s)://…`,
against a real Apache CouchDB 3.5 (README.md). Run by `check`:
python main.py --bin FERRY --couchdb TOOL --tmp DIR [--docs N] [--quick] [--seed S] [--only A,B] [--control]."""
import argparse
import os
import sys
import time
import traceback

import harness  # noqa: F401  (first: puts Tests/CouchDB and Tests/lib on the module path)
import auth
import bridge
import checkpoint
import continuous
import filters
import pull
import push
import restart
import openrevs
import resume
import speed
import tls
from dataset import Dataset, seed
from harness import ControlLocal, CouchDB, FerryLocal
from report import Report
from snapshot import Snapshot

SCENARIOS = ("pull", "push", "checkpoint", "auth", "filters", "resume", "continuous", "restart", "tls", "bridge", "openrevs", "speed")


def guarded(report, name, fn, *args):
    """One scenario; an exception inside it is one failed check and the next scenario runs."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - reported as a failed check with its traceback head
        tb = traceback.format_exception(e)
        report.check(f"{name} ran to the end", False, f"{type(e).__name__}: {e} ({tb[-2].strip()[:300]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--couchdb", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--docs", type=int, help="documents of the pull/push dataset and of resume (default 10000, quick 2000)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--batch-size", type=int, default=100, help="--batch-size of the resume scenario (its bound)")
    ap.add_argument("--speed-rounds", type=int, help="timed rounds of the speed scenario (default 3)")
    ap.add_argument("--speed-docs", type=int, help="documents of the speed scenario (default 10000, quick 2000)")
    ap.add_argument("--duration", type=float, help="seconds of the continuous scenario (default 60, quick 20)")
    ap.add_argument("--control", action="store_true",
                    help="self-test: a second CouchDB and its own replicator stand where `ferry sync` would")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        print(f"unknown scenario(s) {sorted(unknown)}; known: {','.join(SCENARIOS)}")
        return 2
    n = a.docs or (2000 if a.quick else 10000)
    duration = a.duration or (20 if a.quick else 60)
    report = Report()
    couchdb = local = None
    try:
        couchdb = CouchDB(a.couchdb, os.path.join(a.tmp, "couchdb"))
        couch = couchdb.server
        local = ControlLocal(a.couchdb, a.tmp, a.batch_size) if a.control else FerryLocal(a.bin, a.tmp)
        print(f"CouchDB {couch.base}; local side: {local.name} {local.server.base}"
              + ("" if a.control else f" ({a.bin})") + f"; {n} documents, seed {a.seed}" + (", quick" if a.quick else ""),
              flush=True)
        if a.control:
            print("CONTROL MODE: CouchDB-2 and its own replicator stand where `ferry sync` would (harness self-test)",
                  flush=True)
        ds = snap = None
        if "pull" in only or "push" in only:
            report.section("dataset")
            t0 = time.monotonic()
            ds = Dataset(n, a.seed)
        if "pull" in only:
            seed(couch, "pull-src", ds)
            snap = Snapshot(couch, "pull-src")
            report.note(f"CouchDB:pull-src seeded and read in {time.monotonic() - t0:.1f} s: {len(snap.ids())} documents, "
                        f"{sum(len(v) for v in snap.leaves.values())} leaves, {len(snap.conflicted())} in conflict")
            guarded(report, "[pull]", pull.run, report, couch, local, "pull-src", snap, ds.kind, a.control)
        if "push" in only:
            guarded(report, "[push]", push.run, report, couch, local, ds, ds.kind, a.control)
        if "checkpoint" in only:
            guarded(report, "[checkpoint]", checkpoint.run, report, couch, local, a.control)
        if "auth" in only:
            guarded(report, "[auth]", auth.run, report, couch, local, a.control)
        if "filters" in only:
            guarded(report, "[filters]", filters.run, report, couch, local, a.control)
        if "resume" in only:
            # Slowed so a whole pull takes ~12 s: the kill at a third lands mid-pull at any speed.
            rate = max(n * 4500 // 12, 100_000)
            guarded(report, "[resume]", resume.run, report, couch, local, a.control, n, a.batch_size, rate)
        if "continuous" in only:
            guarded(report, "[continuous]", continuous.run, report, couch, local, a.control, duration)
        if "restart" in only:
            rate = max(n * 4500 // 12, 100_000)
            guarded(report, "[restart]", restart.run, report, couch, couchdb, local, a.control, n, rate)
        if "tls" in only:
            guarded(report, "[tls]", tls.run, report, couch, couchdb, local, a.control, a.tmp)
        if "bridge" in only:
            guarded(report, "[bridge]", bridge.run, report, couch, local, a.control, a.bin, a.tmp)
        if "openrevs" in only:
            guarded(report, "[openrevs]", openrevs.run, report, couch, local, a.control, a.seed)
        if "speed" in only:
            guarded(report, "[speed]", speed.run, report, couch, local, a.control, a.speed_docs or (2000 if a.quick else 10000),
                    a.speed_rounds or 3, a.seed)
        crash = local.crashed()
        report.check(f"the local side's {'inspector daemon' if not a.control else 'CouchDB-2'} is still running, no crash",
                     crash is None, str(crash)[-400:])
    finally:
        if local:
            local.stop()
        if couchdb:
            couchdb.stop()
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())

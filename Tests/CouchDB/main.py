"""Issue 30's acceptance harness against a real Apache CouchDB 3.5 (README.md). Run by `check`:
python main.py --bin FERRY --couchdb TOOL --tmp DIR [--docs N] [--quick] [--seed S]
[--basic-auth] [--only SCENARIO,…]."""
import argparse
import os
import sys
import time
import traceback

import churn
import fidelity
import race
import speed
from common import create_ferry_db
from dataset import Dataset, seed
from report import Report, sample
from servers import CouchDB, Ferry
from snapshot import Snapshot

SCENARIOS = ("fidelity", "churn", "race", "speed")


def dataset_checks(report, couch, db, ds, snap):
    """The source holds the dataset the scenarios assume (else the harness, not Ferry, is wrong)."""
    info = couch.get(f"/{db}", expect=200).json()
    want = (ds.n - len(ds.deleted) + len(ds.design), len(ds.deleted))
    report.check(f"[dataset] CouchDB source holds {want[0]} live and {want[1]} deleted documents",
                 (info["doc_count"], info["doc_del_count"]) == want, f"got {info['doc_count']}/{info['doc_del_count']}")
    report.check(f"[dataset] {len(ds.conflicts)} documents in conflict (two leaves each)",
                 snap.conflicted() == set(ds.conflicts), f"got {len(snap.conflicted())}")
    text = next(i for i, atts in ds.attachments.items() if "note.txt" in atts)
    stub = couch.get(f"/{db}/{text}", params={"att_encoding_info": "true"}, expect=200).json()["_attachments"]["note.txt"]
    report.check("[dataset] CouchDB stores text/plain attachments gzip-encoded", stub.get("encoding") == "gzip", str(stub))
    sizes = [len(d) for atts in ds.attachments.values() for _, d in atts.values()]
    report.note(f"{len(ds.ids)} documents, {len(sizes)} attachments ({sum(sizes) >> 20} MiB, largest {max(sizes)} bytes), "
                f"{sum(len(v) for v in snap.leaves.values())} leaves")


def guarded(report, name, fn, *args):
    """Runs one scenario; an exception inside it (an unexpected answer the harness needed)
    is one failed check and the next scenario still runs."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - reported as a failed check with its traceback head
        tb = traceback.format_exception(e)
        report.check(f"{name} ran to the end", False, f"{type(e).__name__}: {e} ({tb[-2].strip()[:200]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--couchdb", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--docs", type=int)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--basic-auth", action="store_true",
                    help="diagnostic: CouchDB's replicator sends Basic auth instead of logging in with _session")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--speed-rounds", type=int, help="timed runs per direction (default 3)")
    ap.add_argument("--control", action="store_true",
                    help="self-test: a second CouchDB stands where Ferry would (keep-policy, race and churn "
                         "agreement checks must pass; conflict_policy and resolve-only checks cannot)")
    a = ap.parse_args()
    only = set(a.only.split(","))
    n = a.docs or (2000 if a.quick else 10000)
    report = Report()
    couch = ferry = None
    try:
        couch = CouchDB(a.couchdb, os.path.join(a.tmp, "couchdb"))
        if a.control:
            ferry = CouchDB(a.couchdb, os.path.join(a.tmp, "couchdb-2"))
            ferry.server.name = "CouchDB-2"
            ferry.crashed = lambda: None
        else:
            ferry = Ferry(a.bin, os.path.join(a.tmp, "ferry"), os.path.join(a.tmp, "ferry.err"))
        c, f = couch.server, ferry.server
        print(f"CouchDB {c.base}, Ferry {f.base} ({a.bin}); {n} documents, seed {a.seed}"
              + (", quick" if a.quick else ""), flush=True)
        if a.control:
            print("CONTROL MODE: a second CouchDB stands where Ferry would (harness self-test)", flush=True)
        if a.basic_auth:
            couch.set_config("replicator", "auth_plugins", "couch_replicator_auth_noop")
            print("DIAGNOSTIC MODE: CouchDB's replicator uses Basic auth (no _session login); "
                  "issue 30 accepts only the default", flush=True)
        if "fidelity" in only:
            report.section("dataset")
            t0 = time.monotonic()
            ds = Dataset(n, a.seed)
            seed(c, "source", ds)
            snap = Snapshot(c, "source")
            report.note(f"seeded and read in {time.monotonic() - t0:.1f} s")
            dataset_checks(report, c, "source", ds, snap)
            for policy in ("keep", "resolve"):
                guarded(report, f"[{policy}] fidelity", fidelity.run, report, c, f, "source", snap, policy, ds.kind)
        if "churn" in only:
            guarded(report, "[churn]", churn.run, report, c, f, a.seed)
        if "race" in only:
            report.section("a competing write never makes a listed revision unfetchable")
            batches = 15 if a.quick else 40
            c.put("/race", expect=201)
            guarded(report, "[race CouchDB]", race.run, report, c, "race", a.seed, batches, "[race CouchDB control]")
            for policy in ("resolve", "keep"):
                db = f"race-{policy}"
                create_ferry_db(report, f, db, policy, f"[race Ferry {policy}]")
                guarded(report, f"[race Ferry {policy}]", race.run, report, f, db, a.seed, batches, f"[race Ferry {policy}]")
        if "speed" in only:
            guarded(report, "[speed]", speed.run, report, c, f, n, a.speed_rounds or 3, a.seed)
        crash = ferry.crashed()
        report.check("Ferry's daemon is still running and printed no crash", crash is None, str(crash)[-400:])
    finally:
        if ferry:
            ferry.stop()
        if couch:
            couch.stop()
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())

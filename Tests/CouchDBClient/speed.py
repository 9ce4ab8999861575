"""Scenario `speed`: issue 31's side-by-side figures, in one run on one machine. N plain ~1 KiB
documents on CouchDB; per round, interleaved: CouchDB's own replicator copying them to a fresh
CouchDB database (`POST /_replicate`, logged in, jitter off: servers.py), `ferry sync --pull`
of the same database into a fresh local file, and `ferry sync --push` of that file into a fresh
CouchDB database. Wall time of each, median and fastest of `rounds`. The goal (issue 31) is
Ferry's client at least 2× faster than CouchDB's replicator both ways; the check fails only on
a collapse (a Ferry direction's fastest run slower than CouchDB's fastest), so a busy machine
cannot fail CI, and the figures say how far the goal is met (docs/performance.md)."""
import statistics
import time

from dataset import seed_plain
from harness import couch_url
from servers import replicate, stats


def run(report, couch, local, control, n, rounds, seed_value):
    report.section(f"speed: {n} documents, {rounds} round(s), CouchDB's replicator beside ferry sync")
    if control:
        report.note("control: the speed scenario compares Ferry with CouchDB; nothing to run")
        return None
    seed_plain(couch, "speed-src", n, seed_value)
    src = couch_url(couch, "speed-src")
    times = {"CouchDB → CouchDB (CouchDB's replicator)": [], "pull CouchDB → Ferry (ferry sync)": [],
             "push Ferry → CouchDB (ferry sync)": []}
    names = list(times)
    errors = []
    for k in range(rounds):
        couch.put(f"/speed-cc-{k}", expect=201)
        answer, seconds, error = replicate(couch, couch.replication_url("speed-src"), couch.replication_url(f"speed-cc-{k}"))
        if error or stats(answer).get("docs_written") != n:
            errors.append(f"CouchDB round {k}: {error or stats(answer)}")
        else:
            times[names[0]].append(seconds)
        db = f"speed-pull-{k}"
        ok, why = local.create(db)
        if not ok:
            errors.append(f"create {db}: {why}")
            continue
        r = local.sync(db, src, "pull")
        if r.rc != 0 or r.counts.get("pulled") != n:
            errors.append(f"pull round {k}: {r.describe()}")
        else:
            times[names[1]].append(r.seconds)
        couch.put(f"/speed-push-{k}", expect=201)
        r = local.sync(db, couch_url(couch, f"speed-push-{k}"), "push")
        if r.rc != 0 or r.counts.get("pushed") != n:
            errors.append(f"push round {k}: {r.describe()}")
        else:
            times[names[2]].append(r.seconds)
    print(f"  {'direction':<42}{'median s':>9}{'docs/s':>9}   (runs; {n} docs)")
    medians, best = {}, {}
    for name, ts in times.items():
        if ts:
            medians[name], best[name] = statistics.median(ts), min(ts)
            print(f"  {name:<42}{medians[name]:>9.2f}{n / medians[name]:>9.0f}   {', '.join(f'{t:.2f}' for t in ts)}")
    report.check("[speed] every timed replication copied all documents", not errors, "; ".join(errors[:3]))
    base = medians.get(names[0])
    for name in names[1:]:
        title = f"[speed] {name}: its fastest run no slower than CouchDB's replicator's fastest"
        if base is None or name not in medians:
            report.not_run(title, "no timing")
            continue
        factor = base / medians[name]
        figures = (f"median {medians[name]:.2f} s vs {base:.2f} s: {factor:.2f}× as fast as CouchDB's replicator "
                   f"(goal ≥ 2×: {'met' if factor >= 2 else 'not met'}); fastest {best[name]:.2f} s vs {best[names[0]]:.2f} s")
        report.check(title, best[name] <= best[names[0]], figures, info=figures)
    return medians

"""Scenario 5, speed side by side: CouchDB's replicator copying the same N plain documents
(~1 KiB, no attachments) CouchDB → CouchDB, CouchDB → Ferry and Ferry → CouchDB, each to a
fresh target, in the same run; the median of `rounds` runs each. The goal (issue 30) is both
Ferry directions faster than CouchDB → CouchDB; the check fails only on a collapse: either
direction's *fastest* run more than 2× slower than CouchDB → CouchDB's fastest. The CouchDB
under test has `startup_jitter` off (servers.py); with CouchDB's default each job first sleeps a
random 0–5 s, which once failed CI (stop 38: 5.68 s against 1.79 s, one round, for a direction
whose copy takes 0.7 s). The best of three keeps a busy machine's one slow run from failing."""
import statistics

from dataset import seed_plain
from servers import replicate, stats

COLLAPSE = 2.0


def run(report, couch, ferry, n, rounds, seed_value):
    report.section(f"speed: {n} documents, {rounds} round(s) per direction")
    seed_plain(couch, "bench", n, seed_value)
    ferry.put("/bench-source", expect=201)
    times = {"CouchDB → CouchDB": [], "CouchDB → Ferry": [], "Ferry → CouchDB": []}
    errors = []
    # Ferry's own source for Ferry → CouchDB: the same documents, copied there once (untimed).
    answer, _, error = replicate(couch, couch.replication_url("bench"), ferry.replication_url("bench-source"))
    if error or stats(answer).get("docs_written") != n:
        errors.append(f"seeding Ferry: {error or stats(answer)}")
    for k in range(rounds):
        couch.put(f"/cc-{k}", expect=201)
        couch.put(f"/fc-{k}", expect=201)
        ferry.put(f"/cf-{k}", expect=201)
        plan = (("CouchDB → CouchDB", couch, "bench", couch, f"cc-{k}"),
                ("CouchDB → Ferry", couch, "bench", ferry, f"cf-{k}"),
                ("Ferry → CouchDB", ferry, "bench-source", couch, f"fc-{k}"))
        for name, s, sdb, t, tdb in plan:
            if name == "Ferry → CouchDB" and errors:
                continue
            answer, seconds, error = replicate(couch, s.replication_url(sdb), t.replication_url(tdb))
            written = stats(answer).get("docs_written")
            if error or written != n:
                errors.append(f"{name} round {k}: {error or f'docs_written {written} of {n}'}")
            else:
                times[name].append(seconds)
    print(f"  {'direction':<20}{'seconds':>9}{'docs/s':>9}   (median of {rounds}; {n} docs)")
    medians, best = {}, {}
    for name, ts in times.items():
        if ts:
            medians[name] = statistics.median(ts)
            best[name] = min(ts)
            print(f"  {name:<20}{medians[name]:>9.2f}{n / medians[name]:>9.0f}   runs {', '.join(f'{t:.2f}' for t in ts)}")
        else:
            print(f"  {name:<20}{'—':>9}{'—':>9}   (failed)")
    report.check("[speed] every timed replication copied all documents", not errors, "; ".join(errors[:3]))
    base, base_best = medians.get("CouchDB → CouchDB"), best.get("CouchDB → CouchDB")
    for name in ("CouchDB → Ferry", "Ferry → CouchDB"):
        title = f"[speed] {name}'s fastest run within {COLLAPSE:g}× of CouchDB → CouchDB's"
        if base is None or name not in medians:
            report.not_run(title, "no timing")
            continue
        ratio, ratio_best = medians[name] / base, best[name] / base_best
        verdict = "faster than" if ratio < 1 else "slower than"
        figures = (f"fastest {best[name]:.2f} s vs {base_best:.2f} s: {ratio_best:.2f}×; median {medians[name]:.2f} s "
                   f"vs {base:.2f} s: {ratio:.2f}×, {verdict} CouchDB → CouchDB (goal: faster)")
        report.check(title, ratio_best <= COLLAPSE, figures, info=figures)
    return medians

"""Helpers shared by the scenarios: creating a Ferry database with a conflict policy, running
CouchDB's replicator as a check, reading winners and live bodies."""
from report import by_kind, sample
from servers import replicate, stats


def create_ferry_db(report, ferry, db, policy, label):
    """`PUT /db?conflict_policy=POLICY`, then `GET /db` must report it. When the PUT is refused
    the database is created without the parameter so the later checks still show what the
    default behaviour does (their evidence is then about that default)."""
    r = ferry.put(f"/{db}", params={"conflict_policy": policy})
    report.check(f"{label}: PUT /{db}?conflict_policy={policy} creates the database", r.status_code == 201,
                 f"HTTP {r.status_code} {r.text[:200]}")
    if r.status_code != 201:
        ferry.put(f"/{db}", expect=(201, 412))
        report.note(f"{db} created without conflict_policy: the checks below see Ferry's default")
    info = ferry.get(f"/{db}", expect=200).json()
    report.check(f"{label}: GET /{db} reports \"conflict_policy\": \"{policy}\"", info.get("conflict_policy") == policy,
                 f"got {info.get('conflict_policy', '(no conflict_policy member)')!r}")


def replicate_check(report, couch, source, target, label, expect_written=None):
    """Runs CouchDB's `_replicate` from `source` to `target` ((Server, db) pairs) and checks that
    it completed with no document write failure (and, when given, `docs_written` ==
    `expect_written`). Returns (stats, seconds, ok)."""
    (s, sdb), (t, tdb) = source, target
    answer, seconds, error = replicate(couch, s.replication_url(sdb), t.replication_url(tdb))
    st = stats(answer)
    name = f"{label}: CouchDB _replicate {s!r}:{sdb} → {t!r}:{tdb} completes"
    if error:
        report.check(name, False, error)
        return st, seconds, False
    failures = st.get("doc_write_failures", 0)
    ok = failures == 0 and (expect_written is None or st.get("docs_written") == expect_written)
    figures = f"docs_read {st.get('docs_read')} docs_written {st.get('docs_written')} doc_write_failures {failures} in {seconds:.1f} s"
    report.check(name + (f" writing {expect_written}" if expect_written is not None else "") + ", no write failures", ok,
                 figures, info=figures)
    return st, seconds, ok


def nothing_moves(report, couch, source, target, label):
    """A replication that must find nothing to write (`docs_written == 0`)."""
    (s, sdb), (t, tdb) = source, target
    answer, seconds, error = replicate(couch, s.replication_url(sdb), t.replication_url(tdb))
    st = stats(answer)
    written = st.get("docs_written")
    report.check(f"{label}: another _replicate {s!r}:{sdb} → {t!r}:{tdb} writes nothing", error is None and written == 0,
                 error or f"docs_written {written}, missing_found {st.get('missing_found')}, docs_read {st.get('docs_read')}")
    return written


def empty(server, db):
    """True when `db` holds no document at all (a replication into it failed outright)."""
    info = server.get(f"/{db}", expect=200).json()
    return info.get("doc_count", 0) + info.get("doc_del_count", 0) == 0


def winners(server, db):
    """{id: (winning rev, deleted)} from `_changes` (main_only)."""
    rows = server.get(f"/{db}/_changes", expect=200).json()["results"]
    return {r["id"]: (r["changes"][0]["rev"], bool(r.get("deleted", False))) for r in rows}


def live_bodies(server, db):
    """{id: body} of every live document as `_all_docs?include_docs=true` serves the winner,
    stubs reduced to type, length and revpos (Ferry's digest may differ: see README)."""
    rows = server.get(f"/{db}/_all_docs", params={"include_docs": "true"}, expect=200).json()["rows"]
    out = {}
    for row in rows:
        doc = dict(row.get("doc") or {})
        atts = doc.pop("_attachments", None)
        if atts:
            doc["_attachments"] = {n: {k: a.get(k) for k in ("content_type", "length", "revpos")} for n, a in atts.items()}
        out[row["id"]] = doc
    return out


def missing_revs(server, db, leaves):
    """`_revs_diff` for {id: [revs]}; returns [(id, rev)] the server says it lacks."""
    out, ids = [], sorted(leaves)
    for start in range(0, len(ids), 1000):
        chunk = {i: leaves[i] for i in ids[start:start + 1000]}
        answer = server.post(f"/{db}/_revs_diff", json=chunk, expect=200).json()
        out += [(i, r) for i, d in answer.items() for r in d.get("missing", [])]
    return out


def compare_winners(report, label, a, adb, b, bdb, ids=None, kind=None):
    """Same winner on both. The one tolerated difference (README, "Deliberate differences"): a
    document deleted on both whose every leaf is a tombstone may be named by another tombstone —
    CouchDB names the highest, Ferry the deletion that won over the closed losers — as long as
    each named tombstone is held by both servers."""
    wa, wb = winners(a, adb), winners(b, bdb)
    scope = sorted(ids if ids is not None else set(wa) | set(wb))
    differ = [i for i in scope if wa.get(i) != wb.get(i)]
    both_deleted = {i: sorted({wa[i][0], wb[i][0]}) for i in differ
                    if wa.get(i) and wb.get(i) and wa[i][1] and wb[i][1]}
    lacking = set(i for i, _ in missing_revs(a, adb, both_deleted)) | set(i for i, _ in missing_revs(b, bdb, both_deleted))
    tolerated = set(both_deleted) - lacking
    bad = [(i, f"{i}: {a!r} {wa.get(i)} {b!r} {wb.get(i)}") for i in differ if i not in tolerated]
    report.check(f"{label}: {a!r} and {b!r} report the same winner (_rev, deleted) for all {len(scope)} documents",
                 not bad, by_kind(bad, kind))
    return wa, wb

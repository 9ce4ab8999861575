"""Everything a server holds for one database, read through the replication surfaces a CouchDB
replicator uses, and the comparison of two such snapshots.

- leaves: `_changes?style=all_docs` (every leaf, deleted ones included);
- winner: `_changes` (`style=main_only`): the winning revision and its `deleted` flag;
- bodies: `POST _bulk_get?revs=true` for every leaf (body, `_deleted`, `_revisions`, stubs);
- attachments: each stub's bytes (`GET /db/doc/name?rev=`), compared as SHA-256 of the
  decoded content (`requests` undoes a `Content-Encoding: gzip` answer, as a client does).
"""
import hashlib

from report import by_kind, sample
from servers import doc_path


def short(rev):
    g, _, h = rev.partition("-")
    return f"{g}-{h[:8]}"


class Snapshot:
    def __init__(self, server, db, with_bytes=True):
        self.server, self.db = server, db
        self.leaves, self.winner, self.bodies, self.atts, self.digests, self.errors = {}, {}, {}, {}, {}, []
        rows = server.get(f"/{db}/_changes", params={"style": "all_docs"}, expect=200).json()["results"]
        for row in rows:
            self.leaves[row["id"]] = sorted(c["rev"] for c in row["changes"])
        for row in server.get(f"/{db}/_changes", expect=200).json()["results"]:
            self.winner[row["id"]] = (row["changes"][0]["rev"], bool(row.get("deleted", False)))
        ids = sorted(self.leaves)
        for start in range(0, len(ids), 400):
            wanted = [{"id": i, "rev": r} for i in ids[start:start + 400] for r in self.leaves[i]]
            r = server.post(f"/{db}/_bulk_get", params={"revs": "true"}, json={"docs": wanted}, expect=200)
            for result in r.json()["results"]:
                for item in result["docs"]:
                    if "ok" in item:
                        doc = item["ok"]
                        self.bodies.setdefault(doc["_id"], {})[doc["_rev"]] = self.normalise(doc, with_bytes)
                    else:
                        self.errors.append((result["id"], item.get("error")))

    def normalise(self, doc, with_bytes):
        """The body with stubs reduced to what must survive replication (type, length, revpos);
        the digest is kept apart (Ferry may use a digest of its own) and the bytes are read."""
        doc = dict(doc)
        atts = doc.pop("_attachments", None)
        if atts:
            doc["_attachments"] = {}
            for name, stub in sorted(atts.items()):
                doc["_attachments"][name] = {k: stub.get(k) for k in ("content_type", "length", "revpos")}
                self.digests[(doc["_id"], doc["_rev"], name)] = stub.get("digest")
                if with_bytes:
                    self.atts[(doc["_id"], doc["_rev"], name)] = self.attachment(doc["_id"], doc["_rev"], name)
        return doc

    def attachment(self, doc_id, rev, name):
        r = self.server.get(f"/{self.db}/{doc_path(doc_id)}/{name}", params={"rev": rev},
                            headers={"Accept": "*/*"}, expect=None)
        if r.status_code != 200:
            return f"HTTP {r.status_code} {r.text[:80]}"
        return f"{len(r.content)} bytes sha256 {hashlib.sha256(r.content).hexdigest()[:16]}"

    def ids(self):
        return set(self.leaves)

    def conflicted(self):
        """IDs with more than one leaf."""
        return {i for i, revs in self.leaves.items() if len(revs) > 1}


def tombstones_named(a, b, i):
    """Whether both sides name a deleted winner for `i` and each named one is a leaf on both."""
    wa, wb = a.winner.get(i), b.winner.get(i)
    if not (wa and wb and wa[1] and wb[1]):
        return False
    return all(rev in a.leaves.get(i, []) and rev in b.leaves.get(i, []) for rev in (wa[0], wb[0]))


def compare(report, label, a, b, ids=None, digests=False, kind=None, ferry_vs_couch=False):
    """Checks that `b` holds what `a` holds: document IDs, leaf sets, winners, every leaf's body
    and `_revisions`, attachment metadata and bytes (and digests when both are CouchDB).
    `ferry_vs_couch` tolerates the one deliberate difference in winners (README, "Deliberate
    differences"; common.compare_winners): a document whose every leaf is a tombstone, named by
    another tombstone on each side (CouchDB the highest, Ferry the deletion that won over the
    closed losers), both tombstones leaves on both sides."""
    name_a, name_b = repr(a.server), repr(b.server)
    if a.server.name == b.server.name:
        name_a, name_b = f"{name_a}:{a.db}", f"{name_b}:{b.db}"
    scope = ids if ids is not None else a.ids() | b.ids()
    only_a, only_b = sorted((a.ids() - b.ids()) & scope), sorted((b.ids() - a.ids()) & scope)
    report.check(f"{label}: same document IDs on {name_a} and {name_b} ({len(scope)})", not only_a and not only_b,
                 f"only on {name_a}: {by_kind([(i, i) for i in only_a], kind)}; only on {name_b}: {by_kind([(i, i) for i in only_b], kind)}")
    every = sorted(scope)  # a document missing on one side counts as a mismatch below too
    common = sorted(a.ids() & b.ids() & scope)
    bad = [(i, f"{i}: {name_a} {[short(r) for r in a.leaves.get(i, [])]} {name_b} {[short(r) for r in b.leaves.get(i, [])]}")
           for i in every if a.leaves.get(i) != b.leaves.get(i)]
    report.check(f"{label}: same leaf set for every document ({name_a} vs {name_b})", not bad, by_kind(bad, kind))
    bad = [(i, f"{i}: {name_a} {short(a.winner.get(i, ('?-', 0))[0])} deleted={a.winner.get(i, (0, '?'))[1]} "
           f"{name_b} {short(b.winner.get(i, ('?-', 0))[0])} deleted={b.winner.get(i, (0, '?'))[1]}")
           for i in every if a.winner.get(i) != b.winner.get(i) and not (ferry_vs_couch and tombstones_named(a, b, i))]
    report.check(f"{label}: same winner (_rev, _deleted) for every document ({name_a} vs {name_b})", not bad, by_kind(bad, kind))
    bad, unread = [], []
    for i in every:
        if i not in common:
            unread.append((i, f"{i} (only on {name_a if i in a.ids() else name_b})"))
            continue
        for rev in set(a.leaves[i]) & set(b.leaves[i]):
            x, y = a.bodies.get(i, {}).get(rev), b.bodies.get(i, {}).get(rev)
            if x is None or y is None:
                unread.append((i, f"{i} {short(rev)} ({name_a if x is None else name_b} _bulk_get)"))
            elif x != y:
                keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
                bad.append((i, f"{i} {short(rev)} differs in {keys}: {name_a} "
                               f"{ {k: x.get(k) for k in keys[:2]} } {name_b} { {k: y.get(k) for k in keys[:2]} }"[:400]))
    report.check(f"{label}: same body, _deleted, _revisions and stubs for every shared leaf ({name_a} vs {name_b})",
                 not bad and not unread, f"differ: {by_kind(bad, kind)}; missing: {by_kind(unread, kind)}")
    keys = sorted(k for k in set(a.atts) | set(b.atts) if k[0] in scope)
    bad = [(k[0], f"{k[0]} {short(k[1])} {k[2]}: {name_a} {a.atts.get(k)} {name_b} {b.atts.get(k)}")
           for k in keys if a.atts.get(k) != b.atts.get(k)]
    report.check(f"{label}: same attachment bytes ({len(keys)} attachments, {name_a} vs {name_b})",
                 not bad and bool(keys), by_kind(bad, kind) if keys else "no attachment compared")
    if digests:
        bad = [f"{k[0]} {k[2]}: {a.digests.get(k)} vs {b.digests.get(k)}" for k in keys if a.digests.get(k) != b.digests.get(k)]
        report.check(f"{label}: same attachment digests ({name_a} vs {name_b})", not bad, sample(bad, 3))

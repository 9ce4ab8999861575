"""The seeded, deterministic dataset, written on CouchDB (the source of every scenario):

- N documents `doc-NNNNN` with ~1 KiB JSON bodies;
- 100 of them with attachments up to 1 MiB: `note.txt` (`text/plain`, which CouchDB stores
  gzip-encoded by default) or `blob.bin` (`application/octet-stream`, random bytes); every
  tenth has both;
- 200 deleted (created, then deleted: a `2-` tombstone);
- 100 design documents `_design/dNN`, every third with `views`;
- 50 with conflicts written with `_bulk_docs` `new_edits:false` on top of a `1-` revision made by
  a normal write: 20 ties (two `2-` leaves), 20 deeper branches (`2-x` against `4-y`), 10
  live-vs-deleted (a live `2-x` against a deleted `3-y`: CouchDB's winner is the live one,
  a "deletion wins" rule picks the other); five of them carry an attachment on one branch.

The subsets are disjoint. Revision IDs written by the harness are MD5 hex digests of a seed
string, 32 characters like CouchDB's own."""
import base64
import hashlib
import json
import random

WORDS = ("ferry couch branch leaf revision winner tombstone replica harbour river crossing "
         "lantern anchor tide ledger quay pier ferryman current delta").split()
TEXT_TYPE, BINARY_TYPE = "text/plain", "application/octet-stream"


def digest(s):
    return hashlib.md5(s.encode()).hexdigest()


def gen(rev):
    return int(rev.split("-", 1)[0])


def words(rng, length):
    out, size = [], 0
    while size < length:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:length]


def body(rng, i, kind, target=1024):
    """A JSON body whose serialisation is about `target` bytes."""
    doc = {"n": i, "kind": kind, "group": i % 17, "tags": [rng.choice(WORDS) for _ in range(3)], "text": ""}
    pad = target - len(json.dumps(doc))
    doc["text"] = words(rng, max(pad, 0))
    return doc


class Dataset:
    """What was written, so checks can name expectations: `ids` (every document ID),
    `attachments` {id: {name: bytes}}, `deleted`, `design`, `conflicts` {id: shape}."""

    def __init__(self, n, seed, attachments=100, deleted=200, design=100, conflicts=50, branch_attachments=True):
        self.n, self.seed = n, seed
        rng = random.Random(seed)
        self.plain_ids = [f"doc-{i:05d}" for i in range(n)]
        special = rng.sample(range(n), attachments + deleted + conflicts)
        self.att_idx = special[:attachments]
        self.del_idx = special[attachments:attachments + deleted]
        self.conf_idx = special[attachments + deleted:]
        self.design = [f"_design/d{j:02d}" for j in range(design)]
        self.bodies = {self.plain_ids[i]: body(rng, i, "plain") for i in range(n)}
        self.attachments = {}
        for k, i in enumerate(self.att_idx):
            size = 1024 * 2 ** (k % 11) - rng.randint(0, 512)  # 0.5 KiB … 1 MiB, most small
            text = k % 2 == 0
            atts = {("note.txt" if text else "blob.bin"): (TEXT_TYPE if text else BINARY_TYPE,
                                                           words(rng, size).encode() if text else rng.randbytes(size))}
            if k % 10 == 0:
                small = 2048 + k
                atts["note.txt" if not text else "blob.bin"] = (BINARY_TYPE if text else TEXT_TYPE,
                                                                rng.randbytes(small) if text else words(rng, small).encode())
            self.attachments[self.plain_ids[i]] = atts
        self.deleted = {self.plain_ids[i] for i in self.del_idx}
        self.conflicts = {}
        for k, i in enumerate(self.conf_idx):
            self.conflicts[self.plain_ids[i]] = "tie" if k < 20 else "deeper" if k < 40 else "live-vs-deleted"
        self.conflict_atts = {self.plain_ids[i] for k, i in enumerate(self.conf_idx) if k % 10 == 5 and branch_attachments}
        self.design_bodies = {}
        for j, d in enumerate(self.design):
            b = {"language": "javascript", "meta": {"j": j, "note": words(rng, 64)}}
            if j % 3 == 0:
                b["views"] = {"by_group": {"map": "function (doc) { if (doc.group !== undefined) emit(doc.group, null); }"},
                              "by_n": {"map": f"function (doc) {{ if (doc.n % {j + 2} === 0) emit(doc.n, 1); }}",
                                       "reduce": "_count"}}
            self.design_bodies[d] = b
        self.ids = set(self.plain_ids) | set(self.design)

    def kind(self, doc_id):
        """What the document is in this dataset, for evidence lines."""
        if doc_id.startswith("_design/"):
            return "design"
        if doc_id in self.conflicts:
            return f"conflict:{self.conflicts[doc_id]}"
        if doc_id in self.attachments:
            return "attachments"
        return "deleted" if doc_id in self.deleted else "plain"

    def branches(self, doc_id, base_rev):
        """The `new_edits:false` documents that make `doc_id`'s conflict on top of `base_rev`."""
        shape, base = self.conflicts[doc_id], base_rev.split("-", 1)[1]
        i = int(doc_id.split("-")[1])
        h = lambda tag: digest(f"{self.seed}/{doc_id}/{tag}")  # noqa: E731
        rng = random.Random(f"{self.seed}/{doc_id}")
        x = {"_id": doc_id, "_rev": f"2-{h('x2')}", "_revisions": {"start": 2, "ids": [h("x2"), base]},
             **body(rng, i, "branch-x", 600)}
        if doc_id in self.conflict_atts:
            x["_attachments"] = {"branch.txt": {"content_type": TEXT_TYPE,
                                                "data": base64.b64encode(words(rng, 5000).encode()).decode()}}
        if shape == "tie":
            y = {"_id": doc_id, "_rev": f"2-{h('y2')}", "_revisions": {"start": 2, "ids": [h("y2"), base]},
                 **body(rng, i, "branch-y", 600)}
        elif shape == "deeper":
            y = {"_id": doc_id, "_rev": f"4-{h('y4')}", "_revisions": {"start": 4, "ids": [h("y4"), h("y3"), h("y2"), base]},
                 **body(rng, i, "branch-y", 600)}
        else:
            y = {"_id": doc_id, "_rev": f"3-{h('y3')}", "_revisions": {"start": 3, "ids": [h("y3"), h("y2"), base]},
                 "_deleted": True}
        return [x, y]


def bulk(server, db, docs, new_edits=True):
    """`_bulk_docs`; raises on an error row. Returns the answer rows."""
    rows = server.post(f"/{db}/_bulk_docs", json={"docs": docs, "new_edits": new_edits}, expect=201).json()
    errors = [r for r in rows if "error" in r]
    if errors:
        raise SystemExit(f"seeding {db}: _bulk_docs refused {errors[:3]}")
    return rows


def seed(server, db, ds, with_design=True):
    """Writes `ds` into `db` (created here) on `server` (CouchDB), batch by batch."""
    server.put(f"/{db}", expect=201)
    revs = {}
    batch, size = [], 0

    def flush():
        nonlocal batch, size
        if batch:
            for row in bulk(server, db, batch):
                revs[row["id"]] = row["rev"]
        batch, size = [], 0

    for doc_id in ds.plain_ids:
        doc = {"_id": doc_id, **ds.bodies[doc_id]}
        for name, (ctype, data) in ds.attachments.get(doc_id, {}).items():
            doc.setdefault("_attachments", {})[name] = {"content_type": ctype, "data": base64.b64encode(data).decode()}
            size += len(data)
        batch.append(doc)
        size += 1100
        if len(batch) >= 500 or size > 4 << 20:
            flush()
    flush()
    if with_design:
        bulk(server, db, [{"_id": d, **b} for d, b in ds.design_bodies.items()])
    bulk(server, db, [{"_id": d, "_rev": revs[d], "_deleted": True} for d in sorted(ds.deleted)])
    conflict_docs = [b for d in sorted(ds.conflicts) for b in ds.branches(d, revs[d])]
    bulk(server, db, conflict_docs, new_edits=False)
    return revs


def seed_plain(server, db, n, seed_value, prefix="bench"):
    """N plain ~1 KiB documents and nothing else (the speed dataset)."""
    rng = random.Random(f"{seed_value}/{prefix}")
    server.put(f"/{db}", expect=201)
    for start in range(0, n, 1000):
        bulk(server, db, [{"_id": f"{prefix}-{i:05d}", **body(rng, i, prefix)} for i in range(start, min(n, start + 1000))])

"""Mango oracle test (issue 33): Ferry's `_find`, `_index` and `_explain` against a real Apache
CouchDB 3.5 (`../shared/tools/couchdb`) on the same generated data and seeded queries.

The same documents (`--docs`, default 10,000: mixed types per field — null, booleans, integers,
floats, unicode strings, missing fields —, nested objects, arrays of scalars and of objects,
objects with varied keys, a key holding a literal `.`, some conflicted and some deleted
documents) are loaded with `_bulk_docs` into one database of each server. Then `--queries`
(default 500) seeded queries run in three phases:

1. no index but `_all_docs`;
2. after the same JSON indexes are created on both (one with a `partial_filter_selector`, one
   with a generated name, several in one design document) — `POST /_index` answers and the
   `GET /_index` listing compared — with sorts, `use_index`, `allow_fallback`;
3. after some indexes are deleted (`DELETE /_index/…` answers and the listing compared).

Each query is a selector built around one focus operator (`$and $or $nor $not $eq $ne $lt $lte
$gt $gte $exists $type $in $nin $size $mod $regex $all $elemMatch $allMatch $keyMapMatch
$beginsWith`, implicit `$and`/`$eq`), combined and nested, over plain, nested, dotted (`a.b`),
escaped (`a\\.b`) and array-index (`tags.0`) paths, with `sort`, `limit`, `skip`, `fields`,
bookmark paging, `use_index`, `r`, `conflicts`, `execution_stats`; some are invalid on purpose
(their error must match). Compared per query (case `mango.find#N`):

- `status` (`status:couchdb-5xx` when CouchDB crashed — 500 `unknown_error` with a `ref`, e.g.
  on `null` inside `$in` — or has no search service for `type: text`: no oracle there); for
  errors `json:$.error` (`reason` is free text, not compared);
- `keys`: the answer's top-level members (`docs`, `bookmark`, …; `warning` and
  `execution_stats` apart);
- `docs`: the documents answered, `_rev` reduced to its generation (`N-*`: each server makes its
  own hashes), `_conflicts` likewise (the conflict branches this harness wrote keep their
  revisions); as a sequence when the query sorts, as a multiset otherwise (CouchDB's unsorted
  order follows its index choice); `doc-body` when the same `_id` comes with other members
  (e.g. a projection), `order` when only the order differs;
- `pages`: with bookmark paging, every page followed on each server until a short page (at
  most 40 pages), the concatenations compared as above (bookmarks are opaque: never compared);
- `json:$.execution_stats`: its member names (the figures are each engine's own);
- `warning`: presence only, and only reported as a note (never a difference).

`POST /_explain` of each query (case `mango.explain#N`): `status`, `explain:index.type`,
`explain:index.def.fields` (the index CouchDB chose), counted apart. Index calls: cases
`mango.index.create#NAME`, `mango.index.list#PHASE`, `mango.index.delete#NAME`.

A difference is allowed only when a row of the table in Protocol/rest.md, section `## Deliberate
differences from CouchDB` (`| case-id glob | aspect glob | reason |`, parsed as
Tests/REST/differential does) matches it; any other is printed and the exit status is 1.

Modes: `--couch-only` validates the generator on CouchDB alone (how many queries answer no
document, all of them, an error, per operator); `--self-check` compares CouchDB with itself (two
databases of one server loaded identically: must show no difference).

Usage: oracle.py [--ferry BIN] [--couchdb TOOL] [--seed S] [--docs N] [--queries N] [--quick]
                 [--only TAG]… [--couch-only | --self-check] [--max-diffs N] [--json FILE] [-v]
Exit: 0 no unlisted difference, 1 some, 2 setup failed, 77 no CouchDB (SKIPPED).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "Tests", "REST", "differential"))
sys.path.insert(0, os.path.join(REPO, "Tests", "CouchDB"))

import ferryd  # noqa: E402  (Tests/lib: the one `ferry serve` driver of the Python checks)
import differential as dx  # noqa: E402  (Tests/REST/differential: servers, HTTP, the allowed rows)

dx.REQUEST_TIMEOUT = 600.0     # a first query on a new index waits for CouchDB to build it
SKIP = 77
DB = "mango"
MAX_PAGES = 40
SEED = 33
MISSING = object()

# -- paths -----------------------------------------------------------------------------------------


def split_path(path):
    """A Mango field path into its members: `.` separates, `\\.` is a literal dot."""
    parts, cur, i = [], "", 0
    while i < len(path):
        c = path[i]
        if c == "\\" and i + 1 < len(path) and path[i + 1] == ".":
            cur += "."
            i += 2
            continue
        if c == ".":
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur)
    return parts


def get_path(doc, parts):
    v = doc
    for p in parts:
        if isinstance(v, dict) and p in v:
            v = v[p]
        elif isinstance(v, list) and p.isdigit() and int(p) < len(v):
            v = v[int(p)]
        else:
            return MISSING
    return v


# -- the documents ---------------------------------------------------------------------------------

NAMES = ["alice", "Alice", "ALICE", "bob", "Bob", "Émile", "émile", "Emile", "Zoë", "zoe", "Ørjan", "Ångström",
         "Łukasz", "Ægir", "Mårten", "José", "jose", "Renée", "Björk", "Çelik", "Dvořák", "Straße", "strasse",
         "İlkay", "Σοφία", "Дмитрий", "張偉", "さくら", "김민준", "محمد", "🚀 rocket", "😀", "a", "A", "aa",
         "ab", "Ab", "b", "-dash", "_under", "123", "0042", "1e3", "-7", "3.14", " space", "tab\tname", "null", "true",
         "naïve", "O'Brien", "peña", "Peña", "zz top", "ÉCOLE", "école", "ecole"]
SURNAMES = ["Smith", "smith", "Müller", "Núñez", "O'Neil", "van Dijk", "Łoś", "李", "🙂", "", "Ng"]
CITIES = ["Paris", "paris", "PARIS", "Zürich", "Zurich", "zurich", "São Paulo", "Ōsaka", "New York", "new york",
          "Åre", "İstanbul", "", "München", "Berlin", "東京", "🏙️ City", "Reykjavík", "Kraków", "Montréal",
          "montreal", "Łódź", "Århus", "Ζάκυνθος", "Москва"]
TAGS = ["red", "green", "blue", "Red", "BLUE", "élan", "naïve", "日本", "🚀", "", "42", "x y", "zeta", "alpha",
        "beta", "Alpha"]
ATTR_KEYS = ["color", "size", "weight", "k.1", "ключ", "x", "Color", "é"]
KINDS = ["A", "B", "C", "a", "b", 1, 2, None, True, "A "]
DOMAINS = ["example.com", "Example.org", "mail.test", "exämple.de", "x.io"]
MIXED = [None, True, False, 0, 1, -1, 2.5, -0.5, 1e21, "", "a", "B", "10", "é", [], [1, 2], ["a"], {}, {"k": 1},
         {"k": "a"}, 9007199254740992, -9007199254740992]
ID_PREFIXES = ["Doc", "dóc", "DOC", "a", "Z", "é", "~", "0", "ä", "doc-🚀"]


def gen_doc(i, r, variant=False):
    """Document i (its body: `variant` is a conflict branch's other body)."""
    d = {}
    x = r.random()
    if x < 0.94:
        d["n"] = i if not variant else i + 100000
    elif x < 0.97:
        d["n"] = str(i)
    d["age"] = pick(r, [(0.66, lambda: r.randint(0, 99)), (0.08, lambda: r.randint(0, 99) + 0.5),
                        (0.05, lambda: None), (0.05, MISSING), (0.04, lambda: str(r.randint(0, 99))),
                        (0.03, lambda: r.random() < 0.5), (0.03, lambda: -r.randint(1, 50)),
                        (0.03, lambda: r.choice([2 ** 53, -2 ** 53, 10 ** 15, 1e300, -1e300, 1.5e-7])),
                        (0.03, lambda: r.choice([[1, 2], {"y": 3}, ""]))])
    d["score"] = pick(r, [(0.7, lambda: round(r.uniform(-1000, 1000), 2)), (0.1, lambda: r.randint(-5, 5)),
                          (0.05, lambda: r.choice([0.0, -0.0, 1e-300, 123456789.125, -2.5e-7, 1e20])),
                          (0.05, lambda: None), (0.1, MISSING)])
    name = r.choice(NAMES) + ((" " + r.choice(SURNAMES)) if r.random() < 0.4 else "")
    d["name"] = pick(r, [(0.86, lambda: name), (0.03, lambda: ""), (0.03, lambda: None), (0.05, MISSING),
                         (0.03, lambda: r.randint(0, 9))])
    if r.random() < 0.15:
        d["first name"] = r.choice(NAMES)
    d["active"] = pick(r, [(0.45, lambda: True), (0.43, lambda: False), (0.04, lambda: None), (0.05, MISSING),
                           (0.03, lambda: r.choice(["true", 1, 0]))])
    k = pick(r, [(0.92, lambda: r.choice(KINDS)), (0.08, MISSING)])
    if k is not MISSING:
        d["kind"] = k
    d["tags"] = pick(r, [(0.75, lambda: r.sample(TAGS, r.randint(0, 5))), (0.05, lambda: r.choice(TAGS)),
                         (0.08, MISSING), (0.06, lambda: [1, r.choice(TAGS), None, True, 2.5][:r.randint(1, 5)]),
                         (0.03, lambda: [[r.choice(TAGS)], r.choice(TAGS)]), (0.03, lambda: None)])
    d["scores"] = pick(r, [(0.85, lambda: [r.randint(0, 100) for _ in range(r.randint(0, 6))]),
                           (0.1, MISSING), (0.05, lambda: [r.randint(0, 100), "50", None][:r.randint(1, 3)])])

    def item():
        it = {"sku": f"S{r.randint(0, 20)}", "qty": r.randint(0, 10), "price": round(r.uniform(0, 100), 2)}
        if r.random() < 0.1:
            del it["qty"]
        if r.random() < 0.2:
            it["tags"] = r.sample(TAGS, r.randint(1, 3))
        return it
    d["items"] = pick(r, [(0.85, lambda: [item() for _ in range(r.randint(0, 4))]), (0.1, MISSING),
                          (0.05, lambda: [item(), "loose", 7])])

    def address():
        a = {}
        if r.random() < 0.9:
            a["city"] = r.choice(CITIES)
        if r.random() < 0.8:
            a["zip"] = r.choice([f"{r.randint(10000, 99999)}", r.randint(10000, 99999), None])
        if r.random() < 0.7:
            a["geo"] = {"lat": round(r.uniform(-90, 90), 4), "lon": round(r.uniform(-180, 180), 4)}
        return a
    d["address"] = pick(r, [(0.8, address), (0.05, lambda: r.choice(CITIES)), (0.05, lambda: None), (0.1, MISSING)])
    d["attrs"] = pick(r, [(0.8, lambda: {key: r.choice([r.randint(0, 10), r.choice(TAGS), r.random() < 0.5, None,
                                                          round(r.uniform(0, 10), 1)])
                                         for key in r.sample(ATTR_KEYS, r.randint(1, 4))}),
                          (0.05, lambda: {}), (0.1, MISSING), (0.05, lambda: [1, 2])])
    x = r.random()
    if x < 0.4:
        d["a.b"] = r.randint(0, 20)
    elif x < 0.6:
        d["a.b"] = r.choice(TAGS)
    if r.random() < 0.3:
        d["a"] = {"b": r.randint(0, 20)} if r.random() < 0.8 else r.randint(0, 20)
    if r.random() < 0.85:
        d["created"] = (f"{r.randint(2022, 2025)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
                        f"T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:00Z")
    elif r.random() < 0.5:
        d["created"] = r.randint(1600000000, 1750000000)
    if r.random() < 0.85:
        local = r.choice(NAMES).lower().replace(" ", ".")
        d["email"] = f"{local}{r.randint(0, 99)}@{r.choice(DOMAINS)}"
    d["nested"] = pick(r, [(0.6, lambda: {"x": {"y": {"z": r.choice(MIXED + [r.randint(0, 9)] * 6)}}}),
                           (0.1, lambda: {"x": {"y": r.randint(0, 9)}}), (0.05, lambda: {"x": [{"y": {"z": 1}}]}),
                           (0.25, MISSING)])
    d["mixed"] = pick(r, [(0.9, lambda: r.choice(MIXED)), (0.1, MISSING)])
    if r.random() < 0.1:
        d["empty"] = r.choice(["", [], {}, None, 0, False])
    return {k: v for k, v in d.items() if v is not MISSING}


def pick(r, options):
    """One of weighted options: (weight, MISSING or a function making the value)."""
    x, acc = r.random() * sum(w for w, _ in options), 0.0
    for w, f in options:
        acc += w
        if x < acc:
            return f if f is MISSING else f()
    f = options[-1][1]
    return f if f is MISSING else f()


def doc_id(i, r):
    if r.random() < 0.06:
        return f"{r.choice(ID_PREFIXES)}-{i:05d}"
    return f"doc{i:05d}"


def fixed_hash(*parts):
    return hashlib.md5("/".join(str(p) for p in parts).encode()).hexdigest()


class Data:
    """The generated documents, the conflict branches written with `new_edits:false` (their
    revisions are this harness's, the same on both servers) and the documents deleted after the
    load; `values[path]`: the values present at each path the queries use (to draw arguments)."""

    def __init__(self, seed, n):
        r = random.Random(f"docs/{seed}")
        self.docs = []
        for i in range(n):
            d = {"_id": doc_id(i, r)}
            d.update(gen_doc(i, r))
            self.docs.append(d)
        ids = list(range(n))
        r.shuffle(ids)
        ncon = max(2, n // 50)
        self.conflicts, self.fixed_revs = [], set()
        for i in ids[:ncon]:
            did = self.docs[i]["_id"]
            h3, h2, h1 = fixed_hash(seed, did, 3), fixed_hash(seed, did, 2), fixed_hash(seed, did, 1)
            b = {"_id": did, "_rev": f"3-{h3}", "_revisions": {"start": 3, "ids": [h3, h2, h1]}}
            b.update(gen_doc(i, random.Random(f"variant/{seed}/{did}"), variant=True))
            g2, g1 = fixed_hash(seed, did, "2b"), fixed_hash(seed, did, "1b")
            c = {"_id": did, "_rev": f"2-{g2}", "_revisions": {"start": 2, "ids": [g2, g1]}}
            c.update(gen_doc(i, random.Random(f"variant2/{seed}/{did}"), variant=True))
            self.conflicts += [b, c]
            self.fixed_revs |= {f"3-{h3}", f"2-{g2}"}
        self.deleted = [self.docs[i]["_id"] for i in ids[ncon:ncon + max(1, n // 100)]]
        live = {d["_id"]: d for d in self.docs}
        for c in self.conflicts:
            if c["_rev"].startswith("3-"):
                live[c["_id"]] = {k: v for k, v in c.items() if k not in ("_rev", "_revisions")}
        for did in self.deleted:
            del live[did]
        self.live = list(live.values())
        self.values = {}
        for p in PATHS:
            parts = split_path(p)
            self.values[p] = [v for v in (get_path(d, parts) for d in self.live) if v is not MISSING]


# -- the queries -----------------------------------------------------------------------------------

COMBINATION = ["$and", "$or", "$nor", "$not"]
CONDITION = ["$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$exists", "$type", "$in", "$nin", "$size", "$mod",
             "$regex", "$all", "$elemMatch", "$allMatch", "$keyMapMatch", "$beginsWith"]
IMPLICIT = ["implicit-eq", "implicit-and"]
FOCUS = COMBINATION + CONDITION + IMPLICIT
OPERATORS = set(COMBINATION + CONDITION)
SCALAR_PATHS = ["age", "score", "n", "name", "kind", "active", "address.city", "address.zip", "address.geo.lat",
                "created", "email", "a\\.b", "a.b", "nested.x.y.z", "mixed", "tags.0", "items.0.qty", "items.1.sku",
                "_id", "first name", "empty", "scores.0"]
RANGE_PATHS = ["age", "age", "score", "n", "name", "address.city", "created", "_id", "address.geo.lat",
               "items.0.qty", "a\\.b", "nested.x.y.z", "kind", "email"]
STRING_PATHS = ["name", "address.city", "email", "created", "_id", "tags.0", "first name", "items.0.sku", "kind"]
ARRAY_PATHS = ["tags", "scores", "items", "items.0.tags", "mixed"]
OBJECT_PATHS = ["attrs", "address", "address.geo", "nested.x", "mixed", "a"]
PATHS = sorted(set(SCALAR_PATHS + RANGE_PATHS + STRING_PATHS + ARRAY_PATHS + OBJECT_PATHS +
                   ["items.0.sku", "items.0.price"]))
TYPES = ["null", "boolean", "number", "string", "array", "object"]
FIELD_CHOICES = ["_id", "name", "age", "address.city", "a\\.b", "a.b", "tags", "items.0.sku", "nested.x", "_rev",
                 "missing_field", "kind", "score", "attrs", "first name", "_conflicts"]
CROSS = [None, 0, "", "m", True, False, [], {}]
BROAD = ["$exists", "$exists", "$exists", "$gt", "$gte", "$lt", "$lte", "$ne", "$ne", "$nin", "$type", "$type"]


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(v)]


# The indexes of phase 2: (ddoc, name, fields, partial_filter_selector).
INDEXES = [
    ("idx-age", "age", ["age"], None),
    ("idx-name", "name", ["name"], None),
    ("idx-score", "score", [{"score": "asc"}], None),
    ("idx-kind-age", "kind-age", ["kind", "age"], None),
    ("idx-city", "city", ["address.city"], None),
    ("idx-n", "n", ["n"], None),
    ("idx-created", "created", ["created"], None),
    ("idx-dot", "dot", ["a\\.b"], None),
    ("idx-partial", "active-age", ["age"], {"active": True}),
    ("idx-multi", "tags", ["tags"], None),
    ("idx-multi", "email", ["email"], None),
    ("idx-active-name", "active-name", ["active", "name"], None),
    ("idx-nested", "nested", ["nested.x.y.z"], None),
    ("_design/idx-id-score", "id-score", ["_id", "score"], None),
]
AUTO_INDEX = {"index": {"fields": ["address.zip"]}}          # named by CouchDB (a hash)
DELETED = [("idx-name", "name", "/_index/idx-name/json/name"),
           ("idx-multi", "tags", "/_index/_design/idx-multi/json/tags"),
           ("idx-nested", "nested", "/_index/idx-nested/json/nested")]
DELETE_BAD = [("missing-name", "/_index/idx-age/json/nosuch"), ("missing-ddoc", "/_index/nosuch/json/age"),
              ("bad-type", "/_index/idx-n/text/n")]
INDEX_BAD = [
    ("no-index", {"fields": ["age"]}),
    ("empty-index", {"index": {}}),
    ("fields-string", {"index": {"fields": "age"}}),
    ("type-text", {"index": {"fields": ["age"]}, "type": "text", "ddoc": "tmp-text", "name": "t"}),
    ("type-bogus", {"index": {"fields": ["age"]}, "type": "bogus", "ddoc": "tmp-bogus", "name": "t"}),
    ("dir-bogus", {"index": {"fields": [{"age": "sideways"}]}, "ddoc": "tmp-dir", "name": "t"}),
    ("mixed-dirs", {"index": {"fields": [{"age": "asc"}, {"name": "desc"}]}, "ddoc": "tmp-mixed", "name": "t"}),
    ("name-number", {"index": {"fields": ["age"]}, "name": 5, "ddoc": "tmp-num"}),
    ("ddoc-number", {"index": {"fields": ["age"]}, "ddoc": 5, "name": "t"}),
    ("pfs-string", {"index": {"fields": ["age"], "partial_filter_selector": "x"}, "ddoc": "tmp-pfs", "name": "t"}),
    ("pfs-bad-op", {"index": {"fields": ["age"], "partial_filter_selector": {"age": {"$foo": 1}}},
                    "ddoc": "tmp-pfs2", "name": "t"}),
    ("fields-empty", {"index": {"fields": []}, "ddoc": "tmp-empty", "name": "t"}),
    ("field-number", {"index": {"fields": [5]}, "ddoc": "tmp-fnum", "name": "t"}),
    ("body-array", [1]),
]


def index_body(ddoc, name, fields, pfs):
    idx = {"fields": fields}
    if pfs is not None:
        idx["partial_filter_selector"] = pfs
    return {"index": idx, "ddoc": ddoc, "name": name, "type": "json"}


def sort_field(s):
    return next(iter(s)) if isinstance(s, dict) else s


class Query:
    def __init__(self, qid, phase, body, raw=None):
        self.qid, self.phase, self.body, self.raw = qid, phase, body, raw
        self.paging = False
        self.tags = set()

    @property
    def sorted(self):
        return isinstance(self.body, dict) and isinstance(self.body.get("sort"), list) and bool(self.body["sort"])

    def text(self):
        return self.raw if self.raw is not None else json.dumps(self.body, ensure_ascii=False, sort_keys=False)


class Generator:
    """The seeded query generator: selectors from the data's own values (so that most queries
    answer some documents and not all of them), options per phase, invalid queries."""

    def __init__(self, seed, data):
        self.r = random.Random(f"queries/{seed}")
        self.data = data

    # values drawn from the data
    def sample(self, path, scalar=True):
        vals = self.data.values.get(path) or []
        if scalar:
            vals = [v for v in vals if not isinstance(v, (list, dict))]
        if not vals or self.r.random() < 0.05:
            return self.r.choice(CROSS if not scalar else [None, 0, "", "m", True])
        return self.r.choice(vals)

    def sample_string(self, path):
        vals = [v for v in self.data.values.get(path) or [] if isinstance(v, str) and v]
        return self.r.choice(vals) if vals else "a"

    def range_value(self, path):
        if self.r.random() < 0.12:
            return self.r.choice(CROSS)
        return self.sample(path)

    # one field condition: (path, condition) — the condition a value (implicit $eq) or {op: arg}
    def leaf(self, op):
        r = self.r
        if op == "implicit-eq":
            path = r.choice(SCALAR_PATHS + ["tags"])
            v = self.sample(path, scalar=path != "tags")
            return path, (v if not isinstance(v, dict) else {"$eq": v})
        if op == "$eq":
            if r.random() < 0.2:
                # an object of two or more members crashes CouchDB 3.5 (500 function_clause):
                # the invalid queries keep one such
                path = r.choice(["tags", "scores", "attrs", "mixed", "nested.x"])
                v = self.sample(path, scalar=False)
                if isinstance(v, dict) and len(v) > 1:
                    v = dict(list(v.items())[:1])
                return path, {"$eq": v}
            path = r.choice(SCALAR_PATHS)
            return path, {"$eq": self.sample(path)}
        if op == "$ne":
            path = r.choice(SCALAR_PATHS)
            return path, {"$ne": self.sample(path)}
        if op in ("$lt", "$lte", "$gt", "$gte"):
            path = r.choice(RANGE_PATHS)
            cond = {op: self.range_value(path)}
            if r.random() < 0.35:      # a range: the other bound too
                other = {"$lt": "$gt", "$lte": "$gte", "$gt": r.choice(["$lt", "$lte"]),
                         "$gte": r.choice(["$lt", "$lte"])}[op]
                a, b = cond[op], self.range_value(path)
                lo, hi = (a, b) if comparable_le(a, b) else (b, a)
                if op in ("$gt", "$gte"):
                    cond = {op: lo, other: hi}
                else:
                    cond = {other: lo, op: hi}
            return path, cond
        if op == "$exists":
            path = r.choice(SCALAR_PATHS + ARRAY_PATHS + OBJECT_PATHS + ["nosuch", "a.b.c"])
            return path, {"$exists": r.random() < 0.7}
        if op == "$type":
            path = r.choice(SCALAR_PATHS + ARRAY_PATHS + OBJECT_PATHS)
            t = json_type(self.sample(path, scalar=False)) if r.random() < 0.7 else r.choice(TYPES)
            return path, {"$type": t}
        if op in ("$in", "$nin"):
            path = r.choice(SCALAR_PATHS + ["tags", "tags", "scores"])
            scalar_path = {"tags": "tags.0", "scores": "scores.0"}.get(path, path)
            # no null, array or object: CouchDB 3.5 crashes on them (500 function_clause); the
            # invalid queries keep three such, for the record
            vals = [v for v in (self.sample(scalar_path) for _ in range(r.randint(1, 6))) if v is not None] or [0]

            if r.random() < 0.05:
                vals = []
            return path, {op: vals}
        if op == "$size":
            path = r.choice(["tags", "tags", "scores", "items", "mixed", "name", "items.0.tags"])
            return path, {"$size": r.choice([0, 1, 1, 2, 2, 3, 4, 5])}
        if op == "$mod":
            path = r.choice(["n", "n", "age", "score", "a\\.b", "scores.0", "items.0.qty"])
            d = r.choice([2, 3, 5, 7, 10, -3, 1])
            rem = r.randint(0, abs(d) - 1) if r.random() < 0.9 else -r.randint(0, abs(d) - 1)
            return path, {"$mod": [d, rem]}
        if op == "$regex":
            path = r.choice(STRING_PATHS + ["age", "tags"])
            s = self.sample_string(path if path not in ("age", "tags") else "name")
            pat = r.choice([
                "^" + re.escape(s[:r.randint(1, 3)]), re.escape(s[-2:]) + "$", "(?i)^" + re.escape(s[:2]),
                "^" + re.escape(s[:1]), re.escape(s[1:3]), "(?i)" + re.escape(s[:1]) + ".*",
                "^[A-M]", "^[a-m]", "[0-9]{2}", "^$", "é", "🚀", "(?i)zürich", "\\.com$", "^doc0*1", "o.*e",
                "^.{3}$", "(?i)ALICE|bob", "\\s", "^[^a-z]", "Ü|ü", "(?i)émile", "^\\d+$"])
            return path, {"$regex": pat}
        if op == "$all":
            path = r.choice(["tags", "tags", "scores", "items.0.tags", "name"])
            have = [v for v in self.data.values.get(path if path != "name" else "tags") or []
                    if isinstance(v, list) and v]
            if have and r.random() < 0.7:
                v = r.choice(have)
                vals = r.sample(v, min(len(v), r.randint(1, 2)))
            elif path == "scores":
                vals = [r.randint(0, 100) for _ in range(r.randint(1, 2))]
            else:
                vals = r.sample(TAGS, r.randint(1, 2))
            return path, {"$all": vals}
        if op in ("$elemMatch", "$allMatch"):
            path = r.choice(["tags", "scores", "items", "items", "mixed", "name", "items.0.tags"])
            if path in ("tags", "items.0.tags", "name", "mixed"):
                sub = r.choice([{"$eq": r.choice(TAGS)}, {"$in": r.sample(TAGS, 3)},
                                {"$regex": r.choice(["^[a-z]", "^r", "e"])}, {"$type": r.choice(["string", "number"])},
                                {"$beginsWith": r.choice(["a", "r", "b", "é"])}, {"$ne": r.choice(TAGS)}])
            elif path == "scores":
                lo = r.randint(0, 90)
                sub = r.choice([{"$gte": lo, "$lt": lo + r.randint(5, 30)}, {"$gt": lo}, {"$lt": lo},
                                {"$mod": [2, 0]}, {"$type": "number"}])
            else:
                sub = r.choice([{"sku": f"S{r.randint(0, 20)}", "qty": {"$gte": r.randint(0, 10)}},
                                {"qty": {"$gt": r.randint(0, 9)}}, {"price": {"$lt": r.randint(10, 100)}},
                                {"sku": {"$in": [f"S{r.randint(0, 20)}" for _ in range(3)]}},
                                {"qty": {"$exists": True}}, {"tags": {"$elemMatch": {"$eq": r.choice(TAGS)}}},
                                {"$or": [{"qty": {"$lt": 2}}, {"price": {"$gt": 90}}]}])
            return path, {op: sub}
        if op == "$keyMapMatch":
            path = r.choice(["attrs", "attrs", "address", "nested.x", "mixed", "address.geo"])
            inner = [x for v in self.data.values.get(path) or [] if isinstance(v, dict) for x in v.values()
                     if not isinstance(x, (list, dict)) and x is not None][:500]
            sub = r.choice([{"$eq": r.choice(inner or [1])}, {"$eq": r.choice(inner or [1])},
                            {"$eq": r.randint(0, 10)}, {"$eq": r.choice(TAGS)}, {"$type": r.choice(TYPES)},
                            {"$gt": r.randint(0, 10)}, {"$in": [True, False]}, {"$regex": "^[a-z]"},
                            {"$exists": True}, {"$gte": r.choice(CITIES)}])
            return path, {"$keyMapMatch": sub}
        if op == "$beginsWith":
            path = r.choice(STRING_PATHS + ["age"])
            s = self.sample_string(path if path != "age" else "name")
            prefix = s[:r.choice([1, 1, 2, 3, 5])]
            if r.random() < 0.08:
                prefix = ""
            return path, {"$beginsWith": prefix}
        raise ValueError(op)

    def place(self, path, cond):
        """{path: cond}, or the nested-object form of a dotted path ({"a": {"b": cond}})."""
        parts = split_path(path)
        if len(parts) > 1 and "\\" not in path and self.r.random() < 0.25:
            out = cond
            for p in reversed(parts):
                out = {p: out}
            return out
        return {path: cond}

    def clause(self, op, depth):
        r = self.r
        if op in ("$and", "$or", "$nor"):
            n = r.choice([1, 2, 2, 2, 3, 3])
            return {op: [self.selector(r.choice(CONDITION + ["implicit-eq"]), depth + 1, small=True)
                         for _ in range(n)]}
        if op == "$not":
            if r.random() < 0.5:
                path, cond = self.leaf(r.choice(CONDITION))
                if not (isinstance(cond, dict) and all(k.startswith("$") for k in cond)):
                    cond = {"$eq": cond}
                return self.place(path, {"$not": cond})
            return {"$not": self.selector(r.choice(CONDITION + ["$or"]), depth + 1, small=True)}
        if op == "implicit-and":
            return self.clause(r.choice(CONDITION), depth)
        path, cond = self.leaf(op)
        return self.place(path, cond)

    def selector(self, focus, depth=0, small=False):
        r = self.r
        clauses = [self.clause(focus, depth)]
        if focus == "implicit-and":
            clauses.append(self.clause(r.choice(CONDITION + ["implicit-eq"]), depth))
        extra = r.choice([0, 0, 0, 1, 1, 2]) if not small else r.choice([0, 0, 0, 0, 1])
        for _ in range(extra):
            op = r.choice(BROAD + CONDITION + ["implicit-eq"] + (["$or", "$not", "$and", "$nor"] if depth < 2 else []))
            clauses.append(self.clause(op, depth + 1))
        out = {}
        for c in clauses:
            merge(out, c)
        return out

    # options
    def options(self, q, phase, indexes):
        r, b = self.r, q.body
        if phase == 1:
            if r.random() < 0.12:
                b["sort"] = r.choice([["_id"], [{"_id": "asc"}], [{"_id": "desc"}]])
                if r.random() < 0.85:
                    merge(b["selector"], {"_id": {"$gt": None}})
        else:
            x = r.random()
            if x < 0.5:
                live = [ix for ix in indexes if ix[3] is None]
                ddoc, name, fields, _ = r.choice(live)
                cols = [sort_field(f) for f in fields]
                n = r.randint(1, len(cols))
                direction = r.choice(["asc", "desc"])
                b["sort"] = [c if (direction == "asc" and r.random() < 0.4) else {c: direction} for c in cols[:n]]
                if r.random() < 0.3:
                    b["use_index"] = r.choice([ddoc, [ddoc, name], ddoc.replace("_design/", "")])
            elif x < 0.58:
                b["sort"] = [r.choice(["mixed", "email", "scores", "address.geo.lat"])]    # no index: an error
            elif x < 0.62:
                b["sort"] = [{"age": "asc"}, {"kind": "desc"}]
            if r.random() < 0.2:
                partial = [ix for ix in INDEXES if ix[3] is not None]
                ddoc, name, fields, pfs = r.choice(INDEXES + partial * 2)
                b["use_index"] = r.choice([ddoc, [ddoc, name], "_design/" + ddoc.replace("_design/", ""),
                                           "nosuch-ddoc", ["idx-age", "nosuch"]])
                if pfs and r.random() < 0.5:
                    merge(b["selector"], {"active": True})
                if r.random() < 0.25:
                    b["allow_fallback"] = r.random() < 0.3
        if r.random() < 0.1:
            q.paging = True
            b["limit"] = r.choice([3, 7, 10, 25, 50])
        else:
            x = r.random()
            if x < 0.35:
                pass
            elif x < 0.85:
                b["limit"] = r.choice([0, 1, 2, 3, 5, 10, 10, 25, 50, 100, 100, 200, 500, 500] if r.random() < 0.1 else
                                      [1, 2, 3, 5, 10, 10, 25, 50, 100, 100, 200, 500, 500])
            else:
                b["limit"] = r.choice([2000, 20000])
                b["fields"] = r.sample(["_id", "name", "age", "address.city", "a\\.b"], r.randint(1, 3))
        if r.random() < 0.15:
            b["skip"] = r.choice([1, 2, 5, 10, 30, 100])
        if "fields" not in b and r.random() < 0.3:
            b["fields"] = r.sample(FIELD_CHOICES, r.randint(1, 5))
            if r.random() < 0.3 and "_id" not in b["fields"]:
                b["fields"].append("_id")
        if r.random() < 0.08:
            b["conflicts"] = True
            if r.random() < 0.6:       # and some conflicted documents among the answers
                ids = [c["_id"] for c in r.sample(self.data.conflicts, 3)] + [r.choice(self.data.docs)["_id"]]
                b["selector"] = {"$or": [b["selector"], {"_id": {"$in": ids}}]}
        if r.random() < 0.05:
            # r > 1 reads each document by quorum, and CouchDB 3.5 then drops `_conflicts`: not with conflicts
            b["r"] = r.choice([1, 1, 2, 3]) if not b.get("conflicts") else 1
            if b["r"] > 1:     # a quorum read per document examined: keep the scan short
                merge(b["selector"], {"_id": {"$lt": "doc00" + str(r.randint(1, 9))}})
        if r.random() < 0.08:
            b["execution_stats"] = True
        if r.random() < 0.04:
            b[r.choice(["update", "stable"])] = r.random() < 0.5

    def invalid(self, q):
        """An invalid query: its error must match."""
        r = self.r
        ok_sel = {"age": {"$gt": 30}}
        choices = [
            {"selector": {"age": {"$foo": 1}}}, {"selector": {"age": {"$in": 5}}}, {"selector": {"age": {"$nin": "x"}}},
            {"selector": {"tags": {"$size": 1.5}}}, {"selector": {"tags": {"$size": "2"}}},
            {"selector": {"tags": {"$size": -1}}}, {"selector": {"name": {"$regex": "["}}},
            {"selector": {"name": {"$regex": 5}}}, {"selector": ok_sel, "limit": -1}, {"selector": ok_sel, "skip": -5},
            {"selector": ok_sel, "limit": "10"}, {"selector": ok_sel, "limit": 2.5},
            {"selector": ok_sel, "sort": [{"age": "asc"}, {"name": "desc"}]},
            {"selector": ok_sel, "sort": [{"age": "up"}]}, {"selector": ok_sel, "sort": "age"},
            {"selector": ok_sel, "sort": [{"age": "asc", "name": "asc"}]},
            {"selector": "x"}, {"selector": []}, {"selector": None}, {}, {"selector": {"$and": {}}},
            {"selector": {"$or": "x"}}, {"selector": {"$nor": 5}}, {"selector": {"$not": []}},
            {"selector": {"age": {"$not": 5}}}, {"selector": ok_sel, "fields": "name"},
            {"selector": ok_sel, "fields": [5]}, {"selector": ok_sel, "use_index": 5},
            {"selector": ok_sel, "use_index": ["a", "b", "c"]}, {"selector": ok_sel, "bogus": 1},
            {"selector": {"age": {"$exists": "yes"}}}, {"selector": {"age": {"$type": 5}}},
            {"selector": {"n": {"$mod": [0, 1]}}}, {"selector": {"n": {"$mod": [2]}}},
            {"selector": {"n": {"$mod": ["a", 1]}}}, {"selector": {"n": {"$mod": [2.5, 1]}}},
            {"selector": {"tags": {"$all": "red"}}}, {"selector": {"name": {"$beginsWith": 5}}},
            {"selector": {"tags": {"$elemMatch": 5}}}, {"selector": {"tags": {"$allMatch": [1]}}},
            {"selector": {"attrs": {"$keyMapMatch": "x"}}}, {"selector": {"$keyMapMatch": {"x": 1}}},
            {"selector": ok_sel, "use_index": "nosuch", "allow_fallback": False},
            {"selector": ok_sel, "r": 0}, {"selector": ok_sel, "r": "x"},
            {"selector": ok_sel, "bookmark": "garbage"}, {"selector": ok_sel, "bookmark": 5},
            {"selector": ok_sel, "execution_stats": "yes"}, {"selector": ok_sel, "conflicts": "yes"},
            {"selector": {"": 5}}, {"selector": {"$regex": "x"}}, {"selector": {"age": {"$eq": 1, "$foo": 2}}},
            {"selector": {"age": {"$where": "x"}}}, {"selector": {"$text": "x"}},
            {"selector": ok_sel, "partition": "p"}, {"selector": ok_sel, "allow_fallback": "no"},
            {"selector": ok_sel, "sort": [{"age": "asc"}], "use_index": "idx-name", "allow_fallback": False},
            {"selector": {"age": {"$in": [None, 1]}}}, {"selector": {"kind": {"$nin": [None]}}},
            {"selector": {"tags": {"$in": [["red"]]}}}, {"selector": {"tags": {"$all": [["red", "blue"]]}}},
            {"selector": {"address.geo": {"$eq": {"lat": 1, "lon": 2}}}},
        ]
        raw = [None] * len(choices) + ['{"selector":', "[1,2]", '"selector"', "{\"selector\":{\"age\":1},}"]
        i = r.randrange(len(raw))
        if raw[i] is not None:
            q.raw, q.body = raw[i], None
        else:
            q.body = json.loads(json.dumps(choices[i]))
        q.tags.add("invalid")

    def queries(self, total):
        r = self.r
        n1 = int(total * 0.4)
        n3 = max(1, int(total * 0.1))
        n2 = total - n1 - n3
        out, focus_cycle = [], []
        indexes2 = INDEXES
        indexes3 = [ix for ix in INDEXES if (ix[0], ix[1]) not in {(d, n) for d, n, _ in DELETED}]
        for qid in range(total):
            phase = 1 if qid < n1 else 2 if qid < n1 + n2 else 3
            q = Query(qid, phase, None)
            if r.random() < 0.08:
                self.invalid(q)
            else:
                if not focus_cycle:
                    focus_cycle = list(FOCUS)
                    r.shuffle(focus_cycle)
                focus = focus_cycle.pop()
                q.body = {"selector": self.selector(focus)}
                self.options(q, phase, indexes2 if phase == 2 else indexes3)
                if phase == 3 and r.random() < 0.3:
                    ddoc, name, fields = r.choice([("idx-name", "name", ["name"]),
                                                   ("idx-nested", "nested", ["nested.x.y.z"])])
                    b = q.body
                    if r.random() < 0.5:
                        b["sort"] = [fields[0]]
                    else:
                        b["use_index"] = [ddoc, name]
            q.tags |= tags_of(q)
            out.append(q)
        return out


def comparable_le(a, b):
    """a <= b in (roughly) CouchDB's collation: null, false, true, numbers, strings, arrays,
    objects; strings by code point here (ICU differs on case and accents: fine for drawing
    the two bounds of a range)."""
    def key(v):
        if v is None:
            return (0, 0)
        if v is False:
            return (1, 0)
        if v is True:
            return (2, 0)
        if isinstance(v, (int, float)):
            return (3, v)
        if isinstance(v, str):
            return (4, v.lower())
        return (5 if isinstance(v, list) else 6, 0)
    return key(a) <= key(b)


def merge(out, clause):
    """Adds a one-field clause to a selector object: an implicit $and of the members, operators
    of one field merged into one object when they do not collide, an explicit $and otherwise."""
    for k, v in clause.items():
        if k not in out:
            out[k] = v
        elif (isinstance(out[k], dict) and isinstance(v, dict) and not set(out[k]) & set(v)
              and all(x.startswith("$") for x in list(out[k]) + list(v))):
            out[k] = {**out[k], **v}
        elif isinstance(out[k], dict) and isinstance(v, dict) and not k.startswith("$") \
                and not any(x.startswith("$") for x in list(out[k]) + list(v)):
            merge(out[k], v)
        else:
            out.setdefault("$and", [])
            if k == "$and":
                out["$and"] = out["$and"] + v if isinstance(v, list) and isinstance(out["$and"], list) else out["$and"]
            else:
                out["$and"] = (out["$and"] if isinstance(out["$and"], list) else [out["$and"]]) + [{k: v}]


def tags_of(q):
    """The operators and features a query uses (what the per-operator counts and --only use)."""
    tags = set()
    b = q.body
    if not isinstance(b, dict):
        return tags

    def sel(s, field_ctx):
        if not isinstance(s, dict):
            if field_ctx:
                tags.add("implicit-eq")
            return
        if len(s) > 1 and not all(k.startswith("$") for k in s):
            tags.add("implicit-and")
        elif len(s) > 1 and field_ctx:
            tags.add("implicit-and")
        for k, v in s.items():
            if k.startswith("$"):
                tags.add(k if k in OPERATORS else "unknown-operator")
                if k in ("$and", "$or", "$nor") and isinstance(v, list):
                    for x in v:
                        sel(x, False)
                elif k in ("$not", "$elemMatch", "$allMatch", "$keyMapMatch"):
                    sel(v, True)
            else:
                if "\\." in k:
                    tags.add("escaped-path")
                elif "." in k:
                    tags.add("dotted-path")
                if isinstance(v, dict) and v and not all(x.startswith("$") for x in v):
                    tags.add("nested-object")
                sel(v, True)
    sel(b.get("selector"), False)
    for opt in ("sort", "limit", "skip", "fields", "use_index", "r", "conflicts", "execution_stats",
                "allow_fallback", "update", "stable", "bookmark"):
        if opt in b:
            tags.add(opt)
    if q.paging:
        tags.add("bookmark-paging")
    return tags


# -- one server ------------------------------------------------------------------------------------

class Target:
    """One database on one server, spoken to as the harness's admin."""

    def __init__(self, label, base, db, user=dx.ADMIN, password=dx.PASSWORD):
        self.label, self.db = label, db
        self.seconds = collections.Counter()     # query id -> seconds spent on its _find calls
        u = urllib.parse.urlsplit(base)
        self.host, self.port = u.hostname, u.port
        self.auth = dx.basic(user, password)

    def request(self, method, path, body=None, raw=None):
        """(status, JSON answer or None, text); `path` is below /{db} when it starts with /."""
        h = {"Authorization": self.auth, "Accept": "application/json"}
        data = None
        if raw is not None:
            data = raw.encode()
            h["Content-Type"] = "application/json"
        elif body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        a = dx.send(self.host, self.port, method, f"/{self.db}{path}", h, data)
        if a.error:
            return 0, None, a.error
        text = a.body.decode("utf-8", "replace")
        try:
            js = json.loads(text) if text.strip() else None
        except ValueError:
            js = None
        return a.status, js, text

    def find(self, q, body=None, path="/_find"):
        t0 = time.monotonic()
        try:
            if body is None and q.raw is not None:
                return self.request("POST", path, raw=q.raw)
            return self.request("POST", path, body if body is not None else q.body)
        finally:
            if path == "/_find":
                self.seconds[q.qid] += time.monotonic() - t0

    def find_pages(self, q):
        """The query, then its bookmark followed while pages come full: [(status, json)]."""
        pages, bm = [], None
        limit = q.body.get("limit", 25)
        for _ in range(MAX_PAGES):
            b = dict(q.body)
            if bm is not None:
                b["bookmark"] = bm
            st, js, _ = self.find(q, b)
            pages.append((st, js))
            if st != 200 or not isinstance(js, dict):
                break
            docs = js.get("docs") or []
            bm = js.get("bookmark")
            if not docs or len(docs) < limit or not isinstance(bm, str):
                break
        return pages

    def load(self, data):
        """The documents (batches of 1,000), the conflict branches (`new_edits:false`), then the
        deletions (with this server's own revisions)."""
        st, _, text = self.request("PUT", "?q=1")
        if st not in (201, 202):
            raise ferryd.SetupError(f"{self.label}: PUT /{self.db} -> {st} {text[:200]}")
        revs = {}
        for i in range(0, len(data.docs), 1000):
            st, js, text = self.request("POST", "/_bulk_docs", {"docs": data.docs[i:i + 1000]})
            if st != 201 or not isinstance(js, list) or any("error" in x for x in js):
                raise ferryd.SetupError(f"{self.label}: _bulk_docs -> {st} {text[:300]}")
            revs.update({x["id"]: x["rev"] for x in js})
        st, js, text = self.request("POST", "/_bulk_docs", {"docs": data.conflicts, "new_edits": False})
        if st != 201:
            raise ferryd.SetupError(f"{self.label}: _bulk_docs new_edits:false -> {st} {text[:300]}")
        dels = [{"_id": d, "_rev": revs[d], "_deleted": True} for d in data.deleted]
        st, js, text = self.request("POST", "/_bulk_docs", {"docs": dels})
        if st != 201 or any("error" in x for x in js or []):
            raise ferryd.SetupError(f"{self.label}: deleting -> {st} {text[:300]}")


# -- comparing -------------------------------------------------------------------------------------

REVISION = re.compile(r"^(\d+)-([0-9a-zA-Z]+)$")
HEXNAME = re.compile(r"[0-9a-f]{32,64}")


class Norm:
    def __init__(self, fixed_revs):
        self.fixed = fixed_revs

    def rev(self, v):
        if isinstance(v, str) and v not in self.fixed:
            m = REVISION.match(v)
            if m:
                return f"{m.group(1)}-*"
        return v

    def value(self, v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 63:
            return int(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v

    def doc(self, d):
        if not isinstance(d, dict):
            return d
        out = {}
        for k, v in d.items():
            if k == "_rev":
                out[k] = self.rev(v)
            elif k in ("_conflicts", "_deleted_conflicts") and isinstance(v, list):
                out[k] = sorted(str(self.rev(x)) for x in v)
            else:
                out[k] = self.value(v)
        return out


def canon(v):
    return json.dumps(v, sort_keys=True, ensure_ascii=False)


def short(v, n=160):
    s = v if isinstance(v, str) else canon(v)
    return s if len(s) <= n else s[:n] + "…"


def err_of(st, js, text):
    if isinstance(js, dict) and "error" in js:
        return js.get("error")
    return None if st == 200 else short(text, 60)


def has_integral_float(v):
    """Whether a JSON value holds a float with an integral value (`5.0`) anywhere."""
    if isinstance(v, float):
        return v == int(v)
    if isinstance(v, dict):
        return any(has_integral_float(x) for x in v.values())
    if isinstance(v, list):
        return any(has_integral_float(x) for x in v)
    return False


def number_spelling_matters(q, differing, floaty):
    """Whether a difference in which documents match can come from the spelling of numbers
    (Protocol/rest.md, "Queries": Ferry keeps `5.0` as the integer 5): the query uses an
    operator that tells an integral float from an integer (`$mod`, `$all`, `$size`) and either
    spells such a float itself or a differing document holds one (one such document moves
    every later page's rows, so the others can differ too)."""
    text = json.dumps(q.body) if q is not None and q.body is not None else (q.raw if q is not None else "")
    if not any(op in (text or "") for op in ('"$mod"', '"$all"', '"$size"')):
        return False
    return has_integral_float(q.body) or bool(set(differing) & floaty)


def compare_docs(da, db, ordered, cut, used=None, q=None, floaty=frozenset()):
    """[(aspect, detail)] between two document lists (normalised already). `cut`: the answer
    was cut by limit or skip; `used`: the index CouchDB's `_explain` named (whose order decides
    which documents an unsorted, cut answer holds); `floaty`: the IDs of documents holding an
    integral float."""
    out = []
    note = ""
    if cut and not ordered:
        note = f" (unsorted, cut by limit/skip: CouchDB's answer follows the order of index {used or '?'})"
    if all(isinstance(d, dict) and "_id" in d for d in da + db):
        ia, ib = [d["_id"] for d in da], [d["_id"] for d in db]
        ca, cb = collections.Counter(ia), collections.Counter(ib)
        if ca != cb:
            miss, extra = list((ca - cb).elements()), list((cb - ca).elements())
            aspect = "docs:integral-float" if number_spelling_matters(q, miss + extra, floaty) else "docs"
            out.append((aspect, f"{len(da)} vs {len(db)} docs; missing {len(miss)} {short(miss[:6], 120)}; "
                                f"extra {len(extra)} {short(extra[:6], 120)}{note}"))
        ma, mb = {d["_id"]: d for d in da}, {d["_id"]: d for d in db}
        for i in ia:
            if i in mb and canon(ma[i]) != canon(mb[i]):
                out.append(("doc-body", f"_id {json.dumps(i, ensure_ascii=False)}: couchdb {short(ma[i], 200)} | "
                                        f"other {short(mb[i], 200)}"))
                break
        if ordered and ca == cb and ia != ib:
            k = next(j for j, (x, y) in enumerate(zip(ia, ib)) if x != y)
            out.append(("order", f"first mismatch at #{k}: couchdb {short(ia[k:k + 4], 100)} | other "
                                 f"{short(ib[k:k + 4], 100)}"))
        return out
    sa, sb = [canon(d) for d in da], [canon(d) for d in db]
    ca, cb = collections.Counter(sa), collections.Counter(sb)
    if ca != cb:
        miss, extra = list((ca - cb).elements()), list((cb - ca).elements())
        # Without `_id` in the answers the documents cannot be named: any document holding an
        # integral float may be the one.
        aspect = "docs:integral-float" if number_spelling_matters(q, list(floaty)[:1], floaty) else "docs"
        out.append((aspect, f"{len(da)} vs {len(db)} docs; missing {len(miss)} {short(miss[:3], 160)}; "
                            f"extra {len(extra)} {short(extra[:3], 160)}{note}"))
    elif ordered and sa != sb:
        k = next(j for j, (x, y) in enumerate(zip(sa, sb)) if x != y)
        out.append(("order", f"first mismatch at #{k}: couchdb {short(sa[k], 100)} | other {short(sb[k], 100)}"))
    return out


def status_aspect(sa, sb):
    """`status`, or `status:couchdb-5xx` when CouchDB crashed (500 `unknown_error` and a
    `ref`): its behaviour then is no oracle."""
    return "status:couchdb-5xx" if sa >= 500 and not sb >= 500 else "status"


def status_diff(a, b):
    (sa, ja, ta), (sb, jb, tb) = a, b
    return status_aspect(sa, sb), f"couchdb {sa} {err_of(sa, ja, ta) or ''} | other {sb} {err_of(sb, jb, tb) or ''}"


def compare_find(q, a, b, norm, used=None, floaty=frozenset()):
    """Differences [(aspect, detail)] and notes [text] between two `_find` answers."""
    (sa, ja, ta), (sb, jb, tb) = a, b
    diffs, notes = [], []
    if sa != sb:
        diffs.append(status_diff(a, b))
        return diffs, notes
    if sa != 200:
        ea, eb = err_of(sa, ja, ta), err_of(sb, jb, tb)
        if ea != eb:
            diffs.append(("json:$.error", f"couchdb {ea} | other {eb}"))
        return diffs, notes
    if not isinstance(ja, dict) or not isinstance(jb, dict) or not isinstance(ja.get("docs"), list) \
            or not isinstance(jb.get("docs"), list):
        diffs.append(("body", f"couchdb {short(ta, 100)} | other {short(tb, 100)}"))
        return diffs, notes
    ka, kb = set(ja) - {"warning", "execution_stats"}, set(jb) - {"warning", "execution_stats"}
    if ka != kb:
        diffs.append(("keys", f"couchdb {sorted(ka)} | other {sorted(kb)}"))
    if ("warning" in ja) != ("warning" in jb):
        notes.append(f"warning: couchdb {'present' if 'warning' in ja else 'absent'} | other "
                     f"{'present' if 'warning' in jb else 'absent'}")
    if "execution_stats" in ja or "execution_stats" in jb:
        xa, xb = ja.get("execution_stats"), jb.get("execution_stats")
        sxa = sorted(xa) if isinstance(xa, dict) else xa
        sxb = sorted(xb) if isinstance(xb, dict) else xb
        if sxa != sxb:
            diffs.append(("json:$.execution_stats", f"couchdb {short(sxa)} | other {short(sxb)}"))
    body = q.body if isinstance(q.body, dict) else {}
    limit = body.get("limit") if isinstance(body.get("limit"), int) else 25
    cut = bool(body.get("skip")) or len(ja["docs"]) >= limit
    diffs += compare_docs([norm.doc(d) for d in ja["docs"]], [norm.doc(d) for d in jb["docs"]], q.sorted, cut, used,
                          q, floaty)
    return diffs, notes


def compare_pages(q, pa, pb, norm, used=None, floaty=frozenset()):
    sa = [(st, err_of(st, js, "") if st != 200 else None) for st, js in pa]
    sb = [(st, err_of(st, js, "") if st != 200 else None) for st, js in pb]
    if [x for x in sa if x[0] != 200] != [x for x in sb if x[0] != 200]:
        return [("pages", f"page statuses couchdb {sa} | other {sb}")]
    da = [norm.doc(d) for st, js in pa if st == 200 and isinstance(js, dict) for d in js.get("docs") or []]
    db = [norm.doc(d) for st, js in pb if st == 200 and isinstance(js, dict) for d in js.get("docs") or []]
    capped = len(pa) >= MAX_PAGES or len(pb) >= MAX_PAGES
    out = compare_docs(da, db, q.sorted, capped or bool(q.body.get("skip")), used, q, floaty)
    return [("pages:integral-float" if aspect == "docs:integral-float" else "pages", f"{len(pa)} vs {len(pb)} pages: {aspect} {detail}")
            for aspect, detail in out]


def explain_index(js):
    ix = js.get("index") if isinstance(js, dict) else None
    if not isinstance(ix, dict):
        return None, None, None
    d = ix.get("def") if isinstance(ix.get("def"), dict) else {}
    return ix.get("type"), d.get("fields"), (f"{ix['ddoc']}/" if ix.get("ddoc") else "") + str(ix.get("name"))


def compare_explain(a, b):
    (sa, ja, ta), (sb, jb, tb) = a, b
    if sa != sb:
        return [status_diff(a, b)]
    if sa != 200:
        ea, eb = err_of(sa, ja, ta), err_of(sb, jb, tb)
        return [("json:$.error", f"couchdb {ea} | other {eb}")] if ea != eb else []
    (ta_, fa, na), (tb_, fb, nb) = explain_index(ja), explain_index(jb)
    out = []
    if ta_ != tb_:
        out.append(("explain:index.type", f"couchdb {ta_} ({na}) | other {tb_} ({nb})"))
    if canon(fa) != canon(fb):
        out.append(("explain:index.def.fields", f"couchdb {short(fa)} ({na}) | other {short(fb)} ({nb})"))
    return out


def norm_name(v):
    return HEXNAME.sub("<hash>", v) if isinstance(v, str) else v


def compare_plain(a, b, members):
    """An index call's answers: status, `error`, and the named members (hash names normalised)."""
    (sa, ja, ta), (sb, jb, tb) = a, b
    if sa != sb:
        return [status_diff(a, b)]
    out = []
    ea, eb = err_of(sa, ja, ta), err_of(sb, jb, tb)
    if ea != eb:
        out.append(("json:$.error", f"couchdb {ea} | other {eb}"))
    if sa < 300:
        for m in members:
            va = norm_name(ja.get(m, "<absent>")) if isinstance(ja, dict) else "<no JSON>"
            vb = norm_name(jb.get(m, "<absent>")) if isinstance(jb, dict) else "<no JSON>"
            if va != vb:
                out.append((f"json:$.{m}", f"couchdb {short(va)} | other {short(vb)}"))
    return out


def index_rows(js):
    rows = []
    for ix in (js or {}).get("indexes") or []:
        d = ix.get("def") or {}
        row = {"ddoc": norm_name(ix.get("ddoc")), "name": norm_name(ix.get("name")), "type": ix.get("type"),
               "fields": d.get("fields")}
        if "partial_filter_selector" in d:
            row["partial_filter_selector"] = d["partial_filter_selector"]
        rows.append(row)
    return rows


def compare_listing(a, b):
    (sa, ja, _), (sb, jb, _) = a, b
    if sa != sb:
        return [status_diff(a, b)]
    if sa != 200:
        return []
    out = []
    ja, jb = ja if isinstance(ja, dict) else {}, jb if isinstance(jb, dict) else {}
    if ja.get("total_rows") != jb.get("total_rows"):
        out.append(("json:$.total_rows", f"couchdb {ja.get('total_rows')} | other {jb.get('total_rows')}"))
    ra, rb = index_rows(ja), index_rows(jb)
    if ra != rb:
        sa_, sb_ = [canon(x) for x in ra], [canon(x) for x in rb]
        if sorted(sa_) == sorted(sb_):
            out.append(("json:$.indexes", f"same indexes, other order: couchdb {[x['name'] for x in ra]} | other "
                                          f"{[x['name'] for x in rb]}"))
        else:
            miss = [x for x in sa_ if x not in sb_]
            extra = [x for x in sb_ if x not in sa_]
            out.append(("json:$.indexes", f"missing {short(miss, 400)}; extra {short(extra, 400)}"))
    return out


# -- the run ---------------------------------------------------------------------------------------

class Report:
    def __init__(self, rows, max_diffs, verbose, label_b):
        self.rows, self.max_diffs, self.verbose, self.label_b = rows, max_diffs, verbose, label_b
        self.per_tag = collections.defaultdict(lambda: [0, 0, 0, 0])   # queries, agree, differ, allowed-only
        self.kinds = collections.Counter()
        self.examples = collections.defaultdict(list)
        self.explain = [0, 0, 0]      # compared, agree, differ
        self.index = [0, 0, 0]
        self.notes = collections.Counter()
        self.unlisted = 0
        self.allowed = 0
        self.printed_by = collections.Counter()
        self.results = []

    def record(self, case, q, diffs, status_a, status_b, count_tags=True, request=None):
        unlisted, allowed = [], []
        for aspect, detail in diffs:
            row = dx.match_row(self.rows, case, aspect)
            (allowed if row else unlisted).append((aspect, detail, row))
        self.unlisted += len(unlisted)
        self.allowed += len(allowed)
        if q is not None and count_tags:
            for t in q.tags | {"(all)"}:
                s = self.per_tag[t]
                s[0] += 1
                if unlisted:
                    s[2] += 1
                elif allowed:
                    s[3] += 1
                else:
                    s[1] += 1
        for aspect, detail, _ in unlisted:
            kind = f"{case.split('#')[0]} {aspect}"
            if (aspect.startswith("status") or aspect == "json:$.error") and " | " in detail:
                x, y = (p.split(" ", 1)[-1].strip() for p in detail.split(" | ", 1))
                kind += f" (couchdb {x} vs other {y})"
            self.kinds[kind] += 1
            if len(self.examples[kind]) < 3 and (q is not None or request is not None):
                self.examples[kind].append(f"{q.text() if q is not None else request}  -> {detail}")
        self.results.append({"case": case, "query": None if q is None else (q.body if q.raw is None else q.raw),
                             "status": [status_a, status_b],
                             "diffs": [{"aspect": a, "detail": d, "allowed": row} for a, d, row in unlisted + allowed]})
        family = case.split("#")[0].split(".")[1]          # find, explain, index
        limit = self.max_diffs if family != "explain" else max(5, self.max_diffs // 4)
        if unlisted and self.printed_by[family] < limit:
            self.printed_by[family] += 1
            print(f"DIFF {case}" + (f" [phase {q.phase}; {' '.join(sorted(q.tags))}]" if q else "") +
                  f" couchdb {status_a} | {self.label_b} {status_b}")
            if q is not None:
                print(f"  query: {short(q.text(), 600)}")
            elif request is not None:
                print(f"  request: {short(request, 600)}")
            for aspect, detail, _ in unlisted:
                print(f"  {aspect}: {detail.replace('| other', '| ' + self.label_b)}")
        if self.verbose:
            for aspect, detail, row in allowed:
                print(f"ALLOWED {case} {aspect}: {detail}  ({row})")
        return bool(unlisted)


def pair(ex, fa, fb, *args):
    """fa(*args) and fb(*args) at once (one on each server)."""
    x, y = ex.submit(fa, *args), ex.submit(fb, *args)
    return x.result(), y.result()


def run_compare(args, A, B, data, queries, rows, label_b):
    rep = Report(rows, args.max_diffs, args.verbose, label_b)
    norm = Norm(data.fixed_revs)
    floaty = frozenset(d["_id"] for d in data.live if has_integral_float(d))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        phase = 0
        for q in queries:
            while phase < q.phase:
                phase += 1
                if phase == 2:
                    index_phase(ex, A, B, rep, data)
                elif phase == 3:
                    delete_phase(ex, A, B, rep)
                print(f"-- phase {phase} ({time.monotonic() - t0:.0f} s)", flush=True)
            ea = eb = None
            if q.raw is None and isinstance(q.body, dict):
                ea, eb = pair(ex, lambda x: A.find(x, path="/_explain"), lambda x: B.find(x, path="/_explain"), q)
            used = explain_index(ea[1])[2] if ea and ea[0] == 200 else None
            if q.paging and q.raw is None:
                pa, pb = pair(ex, A.find_pages, B.find_pages, q)
                a, b = (pa[0][0], pa[0][1], json.dumps(pa[0][1])), (pb[0][0], pb[0][1], json.dumps(pb[0][1]))
            else:
                pa = pb = None
                a, b = pair(ex, A.find, B.find, q)
            diffs, notes = compare_find(q, a, b, norm, used, floaty)
            if pa is not None and a[0] == 200 == b[0]:
                diffs += compare_pages(q, pa, pb, norm, used, floaty)
            for n in notes:
                rep.notes[n.split(":")[0]] += 1
            if args.verbose and notes:
                print(f"NOTE mango.find#{q.qid}: {'; '.join(notes)}")
            rep.record(f"mango.find#{q.qid}", q, diffs, a[0], b[0])
            if ea is not None:
                ed = compare_explain(ea, eb)
                rep.explain[0] += 1
                rep.explain[1 if not ed else 2] += 1
                rep.record(f"mango.explain#{q.qid}", None if not ed else q, ed, ea[0], eb[0], count_tags=False)
    return rep, time.monotonic() - t0


def index_phase(ex, A, B, rep, data):
    """Creates the indexes on both (answers compared), the odd and invalid ones (then removed
    where they were made), compares the listing, and builds each index before the queries."""
    def create(t, body):
        return t.request("POST", "/_index", body)

    def one(case, body):
        a, b = create(A, body), create(B, body)
        d = compare_plain(a, b, ("result", "id", "name"))
        rep.index[0] += 1
        rep.index[1 if not d else 2] += 1
        rep.record(case, None, d, a[0], b[0], request=f"POST /{{db}}/_index {canon(body)}")
        return a, b

    for ddoc, name, fields, pfs in INDEXES:
        one(f"mango.index.create#{name}", index_body(ddoc, name, fields, pfs))
    one("mango.index.create#auto", AUTO_INDEX)
    one("mango.index.create#again", index_body("idx-age", "age", ["age"], None))
    one("mango.index.create#again-other-ddoc-form", index_body("_design/idx-n", "n", ["n"], None))
    for case, body in INDEX_BAD:
        a, b = one(f"mango.index.create#{case}", body)
        for t, (st, js, _) in ((A, a), (B, b)):       # an odd index must not steer later queries
            if st in (200, 201) and isinstance(js, dict) and js.get("id") and js.get("name"):
                t.request("DELETE", f"/_index/{urllib.parse.quote(js['id'], safe='/')}/json/"
                                    f"{urllib.parse.quote(str(js['name']), safe='')}")
    a, b = A.request("GET", "/_index"), B.request("GET", "/_index")
    d = compare_listing(a, b)
    rep.index[0] += 1
    rep.index[1 if not d else 2] += 1
    rep.record("mango.index.list#created", None, d, a[0], b[0], request="GET /{db}/_index")
    warm = [{"selector": {}, "use_index": [ddoc, name], "limit": 1, "sort": [sort_field(f) for f in fields]}
            for ddoc, name, fields, pfs in INDEXES if pfs is None]
    warm.append({"selector": {"active": True}, "use_index": ["idx-partial", "active-age"], "limit": 1})
    warm.append({"selector": {"address.zip": {"$gt": None}}, "limit": 1})

    def build(t):
        for body in warm:
            t.request("POST", "/_find", body)
    t0 = time.monotonic()
    pair(ex, lambda: build(A), lambda: build(B))
    print(f"   indexes built in {time.monotonic() - t0:.1f} s", flush=True)


def delete_phase(ex, A, B, rep):
    for ddoc, name, path in DELETED:
        a, b = A.request("DELETE", path), B.request("DELETE", path)
        d = compare_plain(a, b, ("ok",))
        rep.index[0] += 1
        rep.index[1 if not d else 2] += 1
        rep.record(f"mango.index.delete#{name}", None, d, a[0], b[0], request=f"DELETE /{{db}}{path}")
    for case, path in DELETE_BAD:
        a, b = A.request("DELETE", path), B.request("DELETE", path)
        d = compare_plain(a, b, ("ok",))
        rep.index[0] += 1
        rep.index[1 if not d else 2] += 1
        rep.record(f"mango.index.delete#{case}", None, d, a[0], b[0], request=f"DELETE /{{db}}{path}")
    a, b = A.request("GET", "/_index"), B.request("GET", "/_index")
    d = compare_listing(a, b)
    rep.index[0] += 1
    rep.index[1 if not d else 2] += 1
    rep.record("mango.index.list#after-delete", None, d, a[0], b[0], request="GET /{db}/_index")
    pair(ex, lambda: settle(A), lambda: settle(B))


def settle(t, deadline=15.0):
    """Waits until no query can pick a deleted index any more. CouchDB drops it from its
    design-document cache a moment after the `DELETE` answers; a query in between was seen
    answering 404 `not_found` (once in 500, timing-dependent)."""
    fields = [fs[0] for ddoc, name, _ in DELETED for d, n, fs, _ in INDEXES if (d, n) == (ddoc, name)]
    t0 = time.monotonic()
    for f in fields:
        while time.monotonic() - t0 < deadline:
            st, _, _ = t.request("POST", "/_find", {"selector": {}, "sort": [f], "limit": 1})
            if st != 404:
                break
            time.sleep(0.2)


def replication_aspect(q, got, want, floaty):
    """`replication`, or `replication:integral-float` when the difference can come from the
    spelling of numbers (`number_spelling_matters`)."""
    differing = sorted(set(got) ^ set(want))
    return "replication:integral-float" if number_spelling_matters(q, differing, floaty) else "replication"


def replication_phase(A, B, ferry_bin, tmp, queries, count, floaty):
    """Selector replication (issue 33): for `count` generated selectors CouchDB's `_find`
    answers, CouchDB's replicator pulls from Ferry with the selector, and a Ferry BLIP pull
    (`ferry sync --selector`) pulls from the same Ferry database into a fresh file; each
    must deliver exactly the live documents `_find` returns on CouchDB's copy. Returns the
    (case, differences) found."""
    out = []
    picked = [q for q in queries if q.raw is None and isinstance(q.body, dict) and "selector" in q.body
              and not q.body.get("sort") and q.phase == 1][:count]
    couch_base = f"http://{dx.ADMIN}:{dx.PASSWORD}@{A.host}:{A.port}"
    ferry_base = f"http://{dx.ADMIN}:{dx.PASSWORD}@{B.host}:{B.port}"
    for i, q in enumerate(picked):
        sel = q.body["selector"]
        st, js, text = A.request("POST", "/_find", {"selector": sel, "limit": 1000000})
        if st != 200:
            continue
        want = sorted(d["_id"] for d in js["docs"] if not d["_id"].startswith("_design/"))
        target = f"rep-{i}"
        st, js, text = Target("couchdb", f"http://{A.host}:{A.port}", "_replicate").request("POST", "", {"source": f"{ferry_base}/{B.db}", "target": f"{couch_base}/{target}",
                                                           "create_target": True, "selector": sel})
        if st not in (200, 201):
            out.append((f"mango.replicate.couchdb#{q.qid}", [("replication", f"_replicate answered {st}: {text[:200]}")]))
        else:
            st, js, _ = Target("couchdb", f"http://{A.host}:{A.port}", target).request("GET", "/_all_docs")
            got = sorted(r["id"] for r in js["rows"] if not r["id"].startswith("_design/"))
            if got != want:
                out.append((f"mango.replicate.couchdb#{q.qid}",
                            [(replication_aspect(q, got, want, floaty), f"CouchDB's replicator pulled {len(got)} documents, _find answers {len(want)}: "
                             f"extra {sorted(set(got) - set(want))[:5]}, missing {sorted(set(want) - set(got))[:5]}")]))
        db = os.path.join(tmp, f"pull-{i}.db")
        r = subprocess.run([ferry_bin, "sync", "--db", db, "--pull", "--user", dx.ADMIN, "--password", dx.PASSWORD,
                            "--selector", json.dumps(sel), f"ws://{B.host}:{B.port}/{B.db}"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            out.append((f"mango.replicate.blip#{q.qid}", [("replication", f"ferry sync failed: {r.stderr[-300:]}")]))
            continue
        ls = subprocess.run([ferry_bin, "ls", "--db", db], capture_output=True, text=True, timeout=60)
        got = sorted(line.split("\t")[0] for line in ls.stdout.splitlines()
                     if line.strip() and not line.startswith("_design/"))
        if got != want:
            out.append((f"mango.replicate.blip#{q.qid}",
                        [(replication_aspect(q, got, want, floaty), f"the BLIP pull delivered {len(got)} documents, _find answers {len(want)}: "
                         f"extra {sorted(set(got) - set(want))[:5]}, missing {sorted(set(want) - set(got))[:5]}")]))
    print(f"selector replication: {len(picked)} selectors, each pulled by CouchDB's replicator and by a Ferry BLIP pull; "
          f"{len(out)} differ from CouchDB's _find", flush=True)
    return out


def print_summary(rep, label_b, elapsed):
    print(f"\n{'tag':<18}{'queries':>8}{'agree':>7}{'differ':>8}{'allowed':>9}")
    order = ["(all)"] + FOCUS + ["invalid"]
    tags = order + sorted(t for t in rep.per_tag if t not in order)
    for t in tags:
        if t in rep.per_tag:
            s = rep.per_tag[t]
            print(f"{t:<18}{s[0]:>8}{s[1]:>7}{s[2]:>8}{s[3]:>9}")
    print(f"explain: {rep.explain[0]} compared, {rep.explain[1]} agree, {rep.explain[2]} differ")
    print(f"index calls: {rep.index[0]} compared, {rep.index[1]} agree, {rep.index[2]} differ")
    if rep.notes:
        print("notes (informational): " + ", ".join(f"{k} presence differs in {v}" for k, v in rep.notes.items()))
    if rep.kinds:
        print("\nkinds of unlisted differences (count, first examples):")
        for kind, n in rep.kinds.most_common():
            print(f"  {n:5}  {kind.replace('other', label_b)}")
            for e in rep.examples[kind][:2]:
                print(f"           e.g. {short(e, 300)}")
    print(f"\n{rep.per_tag['(all)'][0]} queries; {rep.unlisted + rep.allowed} differences ({rep.allowed} allowed, "
          f"{rep.unlisted} unlisted); {elapsed:.0f} s")


def run_couch_only(args, A, data, queries):
    """The generator on CouchDB alone: per tag, how many queries answer an error, no document,
    every live document, or some (the true match count: the same selector, no limit)."""
    stats = collections.defaultdict(collections.Counter)
    errors = collections.Counter()
    sizes = []
    t0 = time.monotonic()
    nlive = len(data.live)
    phase = n = 0
    for q in queries:
        while phase < q.phase:
            phase += 1
            if phase == 2:
                for ddoc, name, fields, pfs in INDEXES:
                    A.request("POST", "/_index", index_body(ddoc, name, fields, pfs))
                A.request("POST", "/_index", AUTO_INDEX)
            elif phase == 3:
                for _, _, path in DELETED:
                    A.request("DELETE", path)
        tq = time.monotonic()
        st, js, text = A.find(q)
        tq = time.monotonic() - tq
        if st != 200:
            cat = "error"
            errors[err_of(st, js, text)] += 1
        else:
            b = {k: v for k, v in q.body.items() if k not in ("limit", "skip", "fields", "bookmark")}
            b.update(limit=10 ** 6, fields=["_id"])
            _, jc, _ = A.find(q, b)
            n = len((jc or {}).get("docs") or [])
            sizes.append(n)
            cat = "empty" if n == 0 else "all" if n >= nlive else ">90%" if n > 0.9 * nlive else "some"
            if len(js.get("docs") or []) >= q.body.get("limit", 25) and len(js.get("docs") or []) > 0:
                stats["(all)"]["cut by limit"] += 1
        for t in q.tags | {"(all)"}:
            stats[t][cat] += 1
            stats[t]["n"] += 1
        if args.verbose:
            print(f"#{q.qid} {cat} {n if st == 200 else err_of(st, js, text)} {tq:.2f}s {short(q.text(), 300)}")
    cats = ["n", "error", "empty", "some", ">90%", "all"]
    print(f"{'tag':<18}" + "".join(f"{c:>8}" for c in cats))
    order = ["(all)"] + FOCUS + ["invalid"]
    for t in order + sorted(t for t in stats if t not in order):
        if t in stats:
            print(f"{t:<18}" + "".join(f"{stats[t][c]:>8}" for c in cats))
    print(f"answers cut by their limit: {stats['(all)']['cut by limit']}")
    print("errors: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()))
    if sizes:
        s = sorted(sizes)
        print(f"match counts of the valid queries ({nlive} live documents): median {s[len(s) // 2]}, "
              f"p10 {s[len(s) // 10]}, p90 {s[len(s) * 9 // 10]}")
    print(f"{len(queries)} queries on CouchDB alone; {time.monotonic() - t0:.0f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ferry", default=os.environ.get("FERRY_BIN") or os.path.join(REPO, ".build", "debug", "ferry"))
    ap.add_argument("--couchdb", default=os.path.join(REPO, "..", "shared", "tools", "couchdb", "couchdb"))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--docs", type=int, default=None, help="documents (default 10000; --quick 2000)")
    ap.add_argument("--queries", type=int, default=None, help="queries (default 500; --quick 150)")
    ap.add_argument("--quick", action="store_true", help="CI's size: 2000 documents, 150 queries")
    ap.add_argument("--only", action="append", default=[], help="run the queries with this tag (operator or option; "
                                                                "glob; repeatable)")
    ap.add_argument("--couch-only", action="store_true", help="run the generator on CouchDB alone and report")
    ap.add_argument("--self-check", action="store_true", help="CouchDB against CouchDB (two databases)")
    ap.add_argument("--max-diffs", type=int, default=40, help="differences printed in full (default 40)")
    ap.add_argument("--allowed", default=os.path.join(REPO, "Protocol", "rest.md"))
    ap.add_argument("--json", help="write every compared case and its differences to this file")
    ap.add_argument("--list", action="store_true", help="print the generated queries and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the allowed differences and notes too")
    args = ap.parse_args()
    ndocs = args.docs or (2000 if args.quick else 10000)
    nq = args.queries or (150 if args.quick else 500)

    t0 = time.monotonic()
    data = Data(args.seed, ndocs)
    queries = Generator(args.seed, data).queries(nq)
    if args.only:
        pats = [dx.glob_re(g) for g in args.only]
        queries = [q for q in queries if any(p.match(t) for p in pats for t in q.tags)]
    if args.list:
        for q in queries:
            print(f"#{q.qid} phase {q.phase} [{' '.join(sorted(q.tags))}] {q.text()}")
        return 0
    if not os.path.exists(args.couchdb):
        print(f"SKIPPED: no CouchDB at {os.path.dirname(os.path.abspath(args.couchdb))} (../shared/tools/couchdb)")
        return SKIP
    need_ferry = not (args.couch_only or args.self_check)
    if need_ferry and not os.path.exists(args.ferry):
        print(f"no ferry binary at {args.ferry} (FERRY_BIN)")
        return 2
    rows = dx.allowed_rows(args.allowed)
    tmp = tempfile.mkdtemp(prefix="ferry-mango-")
    couch = ferry = None
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            fc = ex.submit(dx.start_couchdb, args.couchdb, tmp)
            ff = None
            if need_ferry:
                ferry_bin = os.path.join(tmp, "ferry")
                shutil.copy2(args.ferry, ferry_bin)       # a rebuild cannot swap it mid-run
                ff = ex.submit(dx.start_ferry, ferry_bin, tmp)
            try:
                ferry = ff.result() if ff else None
            finally:
                couch = fc.result()
        A = Target("couchdb", couch.server.base, DB)
        if args.couch_only:
            B, label_b = None, None
        elif args.self_check:
            B, label_b = Target("couchdb-2", couch.server.base, DB + "-2"), "couchdb-2"
        else:
            B, label_b = Target("ferry", ferry.url, DB), "ferry"
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda t: t.load(data), [t for t in (A, B) if t]))
        print(f"CouchDB {couch.server.base}" + (f", Ferry {ferry.url}" if ferry else "") +
              f"; {ndocs} documents ({len(data.live)} live, {len(data.conflicts) // 2} conflicted), "
              f"{len(queries)} queries, seed {args.seed}; set up in {time.monotonic() - t0:.1f} s", flush=True)
        if args.couch_only:
            run_couch_only(args, A, data, queries)
            return 0
        rep, elapsed = run_compare(args, A, B, data, queries, rows, label_b)
        if ferry is not None and not args.only:
            floaty = frozenset(d["_id"] for d in data.live if has_integral_float(d))
            for case, diffs in replication_phase(A, B, ferry_bin, tmp, queries, 6 if args.quick else 20, floaty):
                rep.record(case, None, diffs, 200, 200, request="selector replication")
        if sum(rep.printed_by.values()) < rep.unlisted:
            print(f"… (the first {args.max_diffs} of each kind of case shown, {max(5, args.max_diffs // 4)} of "
                  f"_explain; --max-diffs N for more, --json FILE for all)")
        print_summary(rep, label_b, time.monotonic() - t0)
        slow = sorted(queries, key=lambda q: -max(A.seconds[q.qid], B.seconds[q.qid]))[:5]
        print(f"_find time: couchdb {sum(A.seconds.values()):.0f} s, {label_b} {sum(B.seconds.values()):.0f} s; "
              f"slowest: " + ", ".join(f"#{q.qid} {A.seconds[q.qid]:.1f}/{B.seconds[q.qid]:.1f} s" for q in slow))
        crashed = ferry.crashed() if ferry else None
        if crashed:
            print(f"FERRY CRASHED: {crashed}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rep.results, f, ensure_ascii=False, default=str, indent=0)
        return 1 if rep.unlisted or crashed else 0
    except ferryd.SetupError as e:
        print(f"setup failed: {e}")
        return 2
    finally:
        if ferry is not None:
            ferry.stop()
        if couch is not None:
            couch.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

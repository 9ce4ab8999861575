"""Scenario `filters`: what a filtered pull lets through, each evaluated by CouchDB: --doc-id,
--selector (Mango), --filter DDOC/NAME --param k=v (a JavaScript filter function in a design
document) (README.md)."""
from harness import SyncOptions, couch_url, plain_docs
from report import sample

FILTER_JS = "function (doc, req) { return doc.owner === req.query.owner; }"


def run(report, couch, local, control, n=300):
    report.section("filtered pulls")
    owners = ("ann", "bob", "cid")
    plain_docs(couch, "filt-src", n, prefix="fi",
               extra=lambda i: {"type": "x" if i % 3 == 0 else "y", "owner": owners[i % len(owners) if i % 5 else 0]})
    couch.put("/filt-src/_design/f", json={"filters": {"by_owner": FILTER_JS}}, expect=201)
    rows = couch.get("/filt-src/_all_docs", params={"include_docs": "true"}, expect=200).json()["rows"]
    docs = {r["id"]: r["doc"] for r in rows}
    cases = [
        ("--doc-id", SyncOptions(doc_ids=["fi-00007", "fi-00100", "fi-00299"]), {"fi-00007", "fi-00100", "fi-00299"}),
        ("--selector {\"type\":\"x\"}", SyncOptions(selector={"type": "x"}),
         {i for i, d in docs.items() if d.get("type") == "x"}),
        ("--filter f/by_owner --param owner=bob", SyncOptions(filter="f/by_owner", params={"owner": "bob"}),
         {i for i, d in docs.items() if d.get("owner") == "bob"}),
    ]
    url = couch_url(couch, "filt-src")
    for k, (name, opts, want) in enumerate(cases):
        label = f"[filter {name}]"
        db = f"filt-{k}"
        local.create(db)
        r = local.sync(db, url, "pull", opts)
        report.check(f"{label}: sync --pull exits 0", r.rc == 0, r.describe())
        got = {row["id"] for row in local.server.get(f"/{db}/_all_docs", expect=200).json()["rows"]}
        report.check(f"{label}: exactly the {len(want)} documents CouchDB's filter lets through arrive",
                     got == want, f"missing {sample(sorted(want - got), 3)}; unexpected {sample(sorted(got - want), 3)}")
        bad = []
        for i in sorted(got & want)[:50]:
            body = local.server.get(f"/{db}/{i}", expect=200).json()
            if body != docs[i]:
                bad.append(f"{i}: {str(body)[:100]} vs {str(docs[i])[:100]}")
        report.check(f"{label}: their bodies and revisions are CouchDB's", bool(got & want) and not bad,
                     sample(bad, 2) if bad else "no document to compare")

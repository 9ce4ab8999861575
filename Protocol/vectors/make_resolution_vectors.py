#!/usr/bin/env python3
"""Independent generator of Protocol/vectors/resolutions.json (Protocol/revisions.md,
"Storing a resolution"): for two branches of one document, the leaves every Ferry store must
hold after the default rule resolved them — whichever branch arrived first, and whether the
conflict met a BLIP pull or a REST `new_edits:false` write.

Model (written from the text of Protocol/revisions.md, not from Ferry's Swift):
- revision IDs by the digest formula of make_revision_vectors.py;
- default rule: a deletion wins; else the higher generation; else the higher revision ID
  (generation numerically, then the digest's bytes);
- the winner stays as it is; a losing live leaf gets a tombstone child with the body
  {"ferry:closed":true}; nothing is removed;
- current revision: live before deleted before closed, then the higher revision ID.
"""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_revision_vectors import rev  # noqa: E402

CLOSED = {"ferry:closed": True}

def key(r):
    g, _, d = r.partition('-')
    return (int(g), bytes.fromhex(d))

def chain(parent, steps):
    """Revisions made by local edits from `parent`: steps are (deleted, body)."""
    out = []
    for deleted, body in steps:
        r = rev(parent, deleted, body)
        out.append({"rev": r, "parent": parent or None, "deleted": deleted, "body": body})
        parent = r
    return out

def resolve(a, b):
    """Leaves after the default rule: a and b are (rev, deleted) of two conflicting leaves."""
    (ra, da), (rb, db) = a, b
    leaves = {ra: "deleted" if da else "live", rb: "deleted" if db else "live"}
    if da and db:
        return leaves
    if da or db:
        loser = rb if da else ra
    else:
        ga, gb = key(ra)[0], key(rb)[0]
        winner = (ra if ga > gb else rb) if ga != gb else max(ra, rb, key=key)
        loser = rb if winner == ra else ra
    del leaves[loser]
    leaves[rev(loser, True, CLOSED)] = "closed"
    return leaves

def current(leaves):
    rank = {"live": 2, "deleted": 1, "closed": 0}
    return max(leaves, key=lambda r: (rank[leaves[r]], key(r)))

base = chain('', [(False, {"title": "milk", "n": 1})])
root = base[-1]["rev"]
cases = {
    "tie": ([(False, {"title": "milk", "n": 2})], [(False, {"title": "oat milk", "n": 1})]),
    "deeper branch": ([(False, {"n": 2}), (False, {"n": 3}), (False, {"n": 4})], [(False, {"title": "bread"})]),
    "live vs deleted": ([(False, {"title": "milk", "done": True})], [(True, {})]),
    "deeper live vs deleted": ([(False, {"n": 2}), (False, {"n": 3})], [(True, {})]),
    "both deleted": ([(True, {})], [(True, {"by": "other"})]),
}
vectors = []
for name, (steps_a, steps_b) in cases.items():
    a = chain(root, steps_a)
    b = chain(root, steps_b)
    leaves = resolve((a[-1]["rev"], a[-1]["deleted"]), (b[-1]["rev"], b[-1]["deleted"]))
    vectors.append({"name": name, "base": base, "branchA": a, "branchB": b,
                    "leaves": dict(sorted(leaves.items())), "current": current(leaves)})

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, 'resolutions.json'), 'w') as f:
    f.write(json.dumps({"generator": "make_resolution_vectors.py",
                        "note": "leaves: revision -> live | deleted | closed after the default rule (Protocol/revisions.md, \"Storing a resolution\")",
                        "vectors": vectors}, indent=1, sort_keys=True) + "\n")

"""The checker: what must hold once the cluster is healed, and the failure report.

Input: the history (``history.jsonl``) and each participant's final state
(``states/<participant>.jsonl``, one ``ferry ls --json --deleted`` record per document).
Participants are the hosts (h1…hN) and the library client (``lib``).

Checks:

(a) convergence: for every document, every participant shows the same thing: the same
    live revision with the same body, or deleted with the same tombstone revision, or
    absent (absent counts only if absent everywhere);
(b) no lost or invented writes, per participant:
    - a document whose last acknowledged op (by acknowledgement time) is a put (or an
      attachment) must be live, unless some delete of it (acknowledged or ambiguous) may be
      concurrent with that put: by Ferry's rule a deletion beats a concurrent update. A
      delete is known to precede the put only if it was acknowledged on the same
      participant before the put began; any other delete excuses the put;
    - symmetrically, a document whose last acknowledged op is a delete must not be live
      unless a put/attach (acknowledged or ambiguous) was not over before the delete began,
      or the document had more than one unrelated history (several generation-1
      revisions, or an ambiguous put): Ferry keeps unrelated histories as separate lives;
    - every live body carries the token of a put of that document that was acknowledged
      or ambiguous (never of a failed one), and equals what that put wrote;
    - every attachment present is one that was written to that document under that name
      (same digest and length);
(c) conflicts resolved by the rules, per participant: no open conflicts, at most one live
    leaf, and the current revision is the winner among the leaves (live before deleted
    before closed, then higher generation, then higher digest; when all leaves are
    tombstones and ``ls --json`` does not say which closed a losing branch, only that the
    current one is a deleted leaf);
(d) time to converge after heal (from the history's ``converge`` record); a run that never
    converged is divergent.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Optional

from .history import load as load_history, of_type

MAX_REPORTED_DOCS = 20


# -- states ---------------------------------------------------------------------------------

def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def view(rec: Optional[dict]) -> tuple:
    """What must be equal across participants for one document."""
    if rec is None:
        return ("absent",)
    if rec.get("deleted"):
        return ("deleted", rec.get("rev"))
    return ("live", rec.get("rev"), canonical(rec.get("body")))


def divergent_docs(states: dict[str, dict[str, dict]]) -> list[str]:
    """The documents on which the participants do not all agree."""
    ids = set().union(*(s.keys() for s in states.values())) if states else set()
    return sorted(i for i in ids if len({view(s.get(i)) for s in states.values()}) > 1)


def fingerprint(states: dict[str, dict[str, dict]]) -> str:
    """A digest of everything every participant shows (to see that nothing moves)."""
    return canonical({p: {i: view(r) for i, r in s.items()} for p, s in sorted(states.items())})


def save_states(states: dict[str, dict[str, dict]], directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    for participant, docs in states.items():
        with open(os.path.join(directory, f"{participant}.jsonl"), "w") as f:
            for doc_id in sorted(docs):
                f.write(canonical(docs[doc_id]) + "\n")


def load_states(directory: str) -> dict[str, dict[str, dict]]:
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        name = os.path.basename(path)[:-len(".jsonl")]
        docs = {}
        with open(path) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    docs[rec["id"]] = rec
        out[name] = docs
    return out


def rev_key(rev: str) -> tuple[int, str]:
    gen, _, digest = rev.partition("-")
    return (int(gen) if gen.isdigit() else 0, digest)


# -- ops ------------------------------------------------------------------------------------

@dataclass
class Op:
    client: str
    participant: str
    op: str                      # put | delete | attach
    id: str
    t_start: float
    t_end: float
    outcome: str                 # ok | failed | ambiguous
    token: Optional[str] = None
    body: Optional[dict] = None
    attachments: list = field(default_factory=list)
    rev: Optional[str] = None
    error: Optional[str] = None

    def may_have_happened(self) -> bool:
        return self.outcome in ("ok", "ambiguous")

    def short(self) -> str:
        what = self.op + (f" {self.token}" if self.token else "")
        if self.attachments:
            what += " +" + ",".join(a["name"] for a in self.attachments)
        res = self.outcome + (f" {self.rev}" if self.rev else "") + (f" ({self.error[:80]})" if self.error else "")
        end = "       ?" if self.t_end == float("inf") else f"{self.t_end:8.3f}"
        return f"[{self.t_start:8.3f}–{end}] {self.client}@{self.participant} {what}: {res}"


def ops_from_history(history: list[dict]) -> list[Op]:
    """The client ops, with late library-client answers applied (a late ``ok`` is an
    acknowledgement at the time it arrived; a library-client op never answered may have
    taken effect at any time after it was sent, so it ends at infinity)."""
    late = {r["seq"]: r for r in of_type(history, "late")}
    ops = []
    for r in of_type(history, "op"):
        op = Op(client=r["client"], participant=r["participant"], op=r["op"], id=r["id"],
                t_start=r["t_start"], t_end=r["t_end"], outcome=r["outcome"], token=r.get("token"),
                body=r.get("body"), attachments=r.get("attachments") or [], rev=r.get("rev"),
                error=r.get("error"))
        if op.outcome == "ambiguous" and r.get("seq") is not None:
            if r["seq"] in late:
                lr = late[r["seq"]]
                op.outcome = "ok" if lr.get("ok") else "failed"
                op.rev, op.error, op.t_end = lr.get("rev"), lr.get("error"), lr["t"]
            else:   # still queued in the client: it may have taken effect at any later time
                op.t_end = float("inf")
        ops.append(op)
    return ops


# -- checks ---------------------------------------------------------------------------------

@dataclass
class Finding:
    kind: str          # divergent | not-converged | lost-write | lost-delete | unknown-body | …
    doc: str
    participants: list[str]
    detail: str


@dataclass
class Verdict:
    findings: list[Finding]
    converged: bool
    time_to_converge: Optional[float]
    notes: list[str]

    @property
    def passed(self) -> bool:
        return self.converged and not self.findings

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out

    def bad_docs(self) -> list[str]:
        seen: list[str] = []
        for f in self.findings:
            if f.doc and f.doc not in seen:
                seen.append(f.doc)
        return seen


def check(history: list[dict], states: dict[str, dict[str, dict]]) -> Verdict:
    """Runs checks (a)–(d)."""
    findings: list[Finding] = []
    notes: list[str] = []
    conv = next(of_type(history, "converge"), None)
    converged = bool(conv and conv.get("converged"))
    ttc = conv.get("time_to_converge") if conv else None
    if conv is None:
        notes.append("no converge record in the history (run interrupted?)")

    # (a) convergence
    for doc in divergent_docs(states):
        groups: dict[tuple, list[str]] = {}
        for p, s in sorted(states.items()):
            groups.setdefault(view(s.get(doc)), []).append(p)
        kinds = {v[0] for v in groups}
        label = "tombstones differ" if kinds == {"deleted"} else "states differ"
        findings.append(Finding("divergent", doc, sorted(states), label + ": " + "; ".join(
            f"{'/'.join(ps)}={_short_view(v)}" for v, ps in groups.items())))
    if states and not converged and not findings:
        findings.append(Finding("not-converged", "", sorted(states),
                                "the participants agreed only after the convergence timeout"))

    ops = ops_from_history(history)
    by_doc: dict[str, list[Op]] = {}
    for o in ops:
        by_doc.setdefault(o.id, []).append(o)
    tokens = {o.token: o for o in ops if o.token}
    # (b) lost writes and invented bodies
    for doc, doc_ops in sorted(by_doc.items()):
        findings += _check_last_write(doc, doc_ops, states)
    for p, s in sorted(states.items()):
        for doc, rec in sorted(s.items()):
            if rec.get("deleted"):
                continue
            findings += _check_body(p, doc, rec, tokens, by_doc.get(doc, []))
    # (c) conflicts
    leaves_known = True
    for p, s in sorted(states.items()):
        for doc, rec in sorted(s.items()):
            if rec.get("leaves") is None:
                leaves_known = False
                continue
            findings += _check_leaves(p, doc, rec)
    if not leaves_known:
        notes.append("leaves/conflicts unknown (no ls --json): check (c) skipped")
    return Verdict(_merge(findings), converged, ttc, notes)


def _short_view(v: tuple) -> str:
    if v[0] == "absent":
        return "absent"
    if v[0] == "deleted":
        return f"deleted {v[1]}"
    body = json.loads(v[2])
    return f"{v[1]} w={body.get('w')}"


def _check_last_write(doc: str, ops: list[Op], states: dict[str, dict[str, dict]]) -> list[Finding]:
    # Revision IDs are digests of (parent, body, deleted): an op that produced a revision some
    # earlier op already produced (a replica that had not heard of it deleting the same
    # revision again) is that earlier event replayed, and counts at the earlier time.
    first: dict[str, Op] = {}
    for o in sorted((o for o in ops if o.outcome == "ok"), key=lambda o: o.t_end):
        first.setdefault(o.rev or f"?{id(o)}", o)
    acked = sorted(first.values(), key=lambda o: o.t_end)
    if not acked:
        return []
    last = acked[-1]
    out = []
    if last.op in ("put", "attach"):
        excuses = [d for d in ops if d.op == "delete" and d.may_have_happened()
                   and not (d.outcome == "ok" and d.participant == last.participant and d.t_end <= last.t_start)]
        if excuses:
            return []
        lost = [p for p, s in sorted(states.items()) if s.get(doc) is None or s[doc].get("deleted")]
        if lost:
            out.append(Finding("lost-write", doc, lost,
                               f"last acknowledged write {last.client}@{last.participant} {last.op} "
                               f"{last.token or ''} {last.rev} at {last.t_end:.3f} is not live, and no delete "
                               "could have been concurrent with it"))
    else:
        excuses = [w for w in ops if w.op in ("put", "attach") and w.may_have_happened()
                   and w.t_end > last.t_start]
        # A put on a host that had never seen the document starts a new, unrelated history
        # (generation 1); Ferry keeps unrelated histories as separate lives, and deleting one
        # does not delete another. Only with a single life must the delete win.
        roots = {w.rev for w in ops if w.op == "put" and w.outcome == "ok" and (w.rev or "").startswith("1-")}
        unknown = any(w.op == "put" and w.outcome == "ambiguous" for w in ops)
        if excuses or len(roots) > 1 or unknown:
            return []
        live = [p for p, s in sorted(states.items()) if s.get(doc) is not None and not s[doc].get("deleted")]
        if live:
            out.append(Finding("lost-delete", doc, live,
                               f"last acknowledged op is the delete {last.client}@{last.participant} "
                               f"{last.rev} at {last.t_end:.3f}, no write overlapped or followed it, "
                               "yet the document is live"))
    return out


def _check_body(p: str, doc: str, rec: dict, tokens: dict[str, Op], doc_ops: list[Op]) -> list[Finding]:
    body = dict(rec.get("body") or {})
    atts = body.pop("_attachments", None) or {}
    token = body.get("w")
    src = tokens.get(token) if isinstance(token, str) else None
    out = []
    if src is None:
        out.append(Finding("unknown-body", doc, [p], f"live body {canonical(body)[:120]} carries no known write token"))
    elif src.id != doc:
        out.append(Finding("unknown-body", doc, [p], f"body written by {token} to {src.id}, not {doc}"))
    elif src.outcome == "failed":
        out.append(Finding("phantom-write", doc, [p], f"body of {token}, a put that failed ({src.error})"))
    elif canonical(body) != canonical(src.body):
        out.append(Finding("unknown-body", doc, [p], f"body differs from what {token} wrote"))
    written = {(a["name"], a["digest"], a["length"]) for o in doc_ops if o.may_have_happened()
               for a in o.attachments}
    generation = rev_key(rec.get("rev") or "0-")[0]
    for name, meta in sorted(atts.items()):
        if not isinstance(meta, dict) or (name, meta.get("digest"), meta.get("length")) not in written:
            out.append(Finding("unknown-attachment", doc, [p],
                               f"attachment {name} {canonical(meta)[:100]} was never written to {doc}"))
        elif isinstance(meta.get("revpos"), int) and not 1 <= meta["revpos"] <= generation:
            out.append(Finding("invalid-revpos", doc, [p],
                               f"attachment {name} has revpos {meta['revpos']} in revision {rec.get('rev')}: "
                               f"peers reject it (revpos must be 1…{generation})"))
    return out


def _check_leaves(p: str, doc: str, rec: dict) -> list[Finding]:
    out = []
    leaves = rec.get("leaves") or []
    live = [lf for lf in leaves if not lf.get("deleted")]
    if rec.get("conflicts") or len(live) > 1:
        out.append(Finding("open-conflict", doc, [p],
                           f"conflicts {rec.get('conflicts')} live leaves {[lf['rev'] for lf in live]}"))
    if not leaves:
        return out + [Finding("wrong-winner", doc, [p], "no leaves listed")]
    current = next((lf for lf in leaves if lf["rev"] == rec.get("rev")), None)
    if live or all("closed" in lf for lf in leaves):
        # live before deleted before closed (when leaves say which tombstones are closed
        # branches), then the higher revision ID
        winner = max(leaves, key=lambda lf: (not lf.get("deleted"), not lf.get("closed"), rev_key(lf["rev"])))
    else:
        # which tombstone is current depends on which ones closed a losing branch, which
        # `ls --json` does not say: only require the current one to be a deleted leaf
        winner = current if current is not None and current.get("deleted") else None
    if winner is None or winner["rev"] != rec.get("rev") or bool(winner.get("deleted")) != bool(rec.get("deleted")):
        picked = f"{winner['rev']} (deleted={winner.get('deleted')})" if winner else "a deleted leaf"
        out.append(Finding("wrong-winner", doc, [p],
                           f"current {rec.get('rev')} (deleted={rec.get('deleted')}) but the rule picks "
                           f"{picked} among {leaves}"))
    return out


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (kind, doc, detail) with the participants merged."""
    merged: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.kind, f.doc, f.detail)
        if key in merged:
            merged[key].participants = sorted(set(merged[key].participants) | set(f.participants))
        else:
            merged[key] = f
    return list(merged.values())


# -- report ---------------------------------------------------------------------------------

FAILURE_CLASSES = {
    "divergent": "divergent", "not-converged": "divergent",
    "lost-write": "lost", "lost-delete": "lost", "phantom-write": "lost",
    "unknown-body": "lost", "unknown-attachment": "lost",
    "open-conflict": "conflict", "wrong-winner": "conflict",
    "invalid-revpos": "invalid",
}


def classes(verdict: Verdict) -> dict[str, int]:
    """Findings counted by class: divergent, lost, conflict, invalid."""
    out = {"divergent": 0, "lost": 0, "conflict": 0, "invalid": 0}
    for f in verdict.findings:
        out[FAILURE_CLASSES.get(f.kind, "lost")] += 1
    if not verdict.converged and out["divergent"] == 0:
        out["divergent"] = 1
    return out


def _state_line(rec: Optional[dict]) -> str:
    if rec is None:
        return "absent"
    body = rec.get("body") or {}
    extra = ""
    if rec.get("conflicts"):
        extra += f" conflicts={rec['conflicts']}"
    if rec.get("leaves") and len(rec["leaves"]) > 1:
        extra += " leaves=" + ",".join(lf["rev"] + ("(d)" if lf.get("deleted") else "") for lf in rec["leaves"])
    atts = sorted((body.get("_attachments") or {}).keys())
    if atts:
        extra += f" attachments={atts}"
    if rec.get("deleted"):
        return f"{rec.get('rev')} deleted{extra}"
    return f"{rec.get('rev')} w={body.get('w')}{extra}"


def report(verdict: Verdict, history: list[dict], states: dict[str, dict[str, dict]],
           meta: Optional[dict] = None) -> str:
    """A human-readable report: verdict, rerun command, offending documents with each
    participant's state and the ops on them."""
    meta = meta or next(of_type(history, "meta"), {}) or {}
    lines = []
    status = "PASS" if verdict.passed else "FAIL"
    cfg = meta.get("config", {})
    lines.append(f"{status}: seed {cfg.get('seed')} hosts {cfg.get('hosts')} {cfg.get('topology')} "
                 f"faults {cfg.get('faults')} duration {cfg.get('duration')}s docs {cfg.get('docs')}"
                 + (f" plant {cfg.get('plant')}" if cfg.get("plant") else ""))
    ttc = verdict.time_to_converge
    lines.append(f"converged: {'yes' if verdict.converged else 'NO'}"
                 + (f" in {ttc:.2f}s after heal" if ttc is not None else ""))
    if meta.get("rerun"):
        lines.append(f"rerun: {meta['rerun']}")
    for n in verdict.notes:
        lines.append(f"note: {n}")
    if verdict.passed:
        return "\n".join(lines) + "\n"
    lines.append("findings: " + ", ".join(f"{k}={v}" for k, v in sorted(verdict.counts().items())))
    ops = ops_from_history(history)
    docs = verdict.bad_docs()
    for doc in docs[:MAX_REPORTED_DOCS]:
        lines.append("")
        lines.append(f"== {doc}")
        for f in verdict.findings:
            if f.doc == doc:
                lines.append(f"  {f.kind} on {','.join(f.participants)}: {f.detail}")
        for p in sorted(states):
            lines.append(f"  state {p:>4}: {_state_line(states[p].get(doc))}")
        doc_ops = sorted((o for o in ops if o.id == doc), key=lambda o: o.t_start)
        for o in doc_ops[-25:]:
            lines.append(f"  op {o.short()}")
        if len(doc_ops) > 25:
            lines.append(f"  … {len(doc_ops) - 25} earlier ops")
    if len(docs) > MAX_REPORTED_DOCS:
        lines.append(f"\n… and {len(docs) - MAX_REPORTED_DOCS} more documents (see result.json)")
    for f in verdict.findings:
        if not f.doc:
            lines.append(f"{f.kind}: {f.detail}")
    faults = [r for r in of_type(history, "fault") if r.get("phase") in ("start", "end")]
    if faults:
        lines.append("\nfaults:")
        for r in faults:
            lines.append(f"  {r['t']:8.3f} {r['phase']:5} #{r['id']} {r['kind']} {canonical(r.get('params', {}))}")
    heal = next(of_type(history, "heal"), None)
    if heal:
        lines.append(f"  {heal['t']:8.3f} heal")
    return "\n".join(lines) + "\n"


def check_saved(history_path: str) -> tuple[Verdict, str]:
    """``cluster check``: re-runs the checker on a saved history and its ``states/``."""
    history = load_history(history_path)
    states = load_states(os.path.join(os.path.dirname(os.path.abspath(history_path)), "states"))
    verdict = check(history, states)
    return verdict, report(verdict, history, states)

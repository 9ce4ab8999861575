"""The Ferry binaries: where they are, which options they support, and the CLI commands.

Options still being added to Ferry are detected once, from ``--help``:
``serve --heartbeat``, ``put --attach``, ``ls --json`` and the optional
``ferry-cluster-client`` binary. Without ``ls --json`` the state of a database is read from
the tab-separated ``ls`` plus ``get`` for bodies (then leaves and conflicts are unknown).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Optional

from .netns import SetupError

DROP_DELETIONS_ENV = "FERRY_TEST_DROP_INCOMING_DELETIONS"


@dataclass
class Outcome:
    """How one CLI write ended: ``ok`` (acknowledged), ``failed`` or ``ambiguous``."""
    status: str
    rev: Optional[str] = None
    error: Optional[str] = None
    rc: Optional[int] = None


@dataclass
class Capabilities:
    heartbeat: bool = False
    attach: bool = False
    ls_json: bool = False
    client: Optional[str] = None
    client_heartbeat: bool = False
    drop_deletions_env: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"heartbeat": self.heartbeat, "attach": self.attach, "ls_json": self.ls_json,
                "client": self.client, "client_heartbeat": self.client_heartbeat,
                "drop_deletions_env": self.drop_deletions_env, "notes": self.notes}


def _help(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout + p.stderr


class Ferry:
    """The ``ferry`` CLI found in ``bin_dir`` (and ``ferry-cluster-client`` if present)."""

    def __init__(self, bin_dir: str) -> None:
        self.bin_dir = os.path.abspath(bin_dir)
        self.path = os.path.join(self.bin_dir, "ferry")
        if not os.access(self.path, os.X_OK):
            raise SetupError(f"no ferry binary at {self.path}")
        self.caps = self._detect()
        self._body_cache: dict[tuple[str, str, str], dict] = {}

    def _detect(self) -> Capabilities:
        c = Capabilities()
        c.heartbeat = "--heartbeat" in _help([self.path, "serve", "--help"])
        c.attach = "--attach" in _help([self.path, "put", "--help"])
        c.ls_json = "--json" in _help([self.path, "ls", "--help"])
        client = os.path.join(self.bin_dir, "ferry-cluster-client")
        if os.access(client, os.X_OK):
            c.client = client
            c.client_heartbeat = "--heartbeat" in _help([client, "--help"])
        try:
            with open(self.path, "rb") as f:
                c.drop_deletions_env = DROP_DELETIONS_ENV.encode() in f.read()
        except OSError:
            pass
        if not c.heartbeat:
            c.notes.append("ferry serve has no --heartbeat: servers run without it")
        if not c.attach:
            c.notes.append("ferry put has no --attach: CLI attachment writes skipped")
        if not c.ls_json:
            c.notes.append("ferry ls has no --json: states read from ls + get; leaf/conflict checks skipped")
        if not c.client:
            c.notes.append("no ferry-cluster-client: library-client ops skipped")
        return c

    # -- writes -------------------------------------------------------------------------

    def _write(self, argv: list[str], timeout: float) -> Outcome:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Outcome("ambiguous", error=f"timed out after {timeout}s (killed)")
        if p.returncode == 0:
            return Outcome("ok", rev=p.stdout.strip() or None, rc=0)
        text = p.stderr.strip() or p.stdout.strip()
        err = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:300]
        if p.returncode < 0:   # killed by a signal: it may or may not have committed
            return Outcome("ambiguous", error=f"signal {-p.returncode}: {err}", rc=p.returncode)
        return Outcome("failed", error=err, rc=p.returncode)

    def put(self, db: str, doc_id: str, body: dict, attach: Optional[list[tuple[str, str]]] = None,
            timeout: float = 10) -> Outcome:
        argv = [self.path, "put", "--db", db, doc_id, json.dumps(body, separators=(",", ":"))]
        for name, path in attach or []:
            argv += ["--attach", f"{name}={path}"]
        return self._write(argv, timeout)

    def delete(self, db: str, doc_id: str, timeout: float = 10) -> Outcome:
        return self._write([self.path, "delete", "--db", db, doc_id], timeout)

    # -- state --------------------------------------------------------------------------

    def state(self, db: str, timeout: float = 20) -> dict[str, dict]:
        """Every document of ``db`` (deleted ones too) as ``{id: record}``, where a record
        has ``id, rev, deleted, body`` and, with ``ls --json``, ``conflicts`` and ``leaves``
        (None otherwise). Raises RuntimeError if the database cannot be read."""
        if self.caps.ls_json:
            p = subprocess.run([self.path, "ls", "--db", db, "--deleted", "--json"],
                               capture_output=True, text=True, timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"ferry ls --json: exit {p.returncode}: {p.stderr.strip()[-300:]}")
            out = {}
            for line in p.stdout.splitlines():
                if line.strip():
                    rec = json.loads(line)
                    out[rec["id"]] = rec
            return out
        return self._state_from_tabs(db, timeout)

    def _state_from_tabs(self, db: str, timeout: float) -> dict[str, dict]:
        p = subprocess.run([self.path, "ls", "--db", db, "--deleted"],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"ferry ls: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        out = {}
        for line in p.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) < 2:
                continue
            doc_id, rev, deleted = parts[0], parts[1], len(parts) > 2 and parts[2] == "deleted"
            body: dict = {}
            if not deleted:
                key = (db, doc_id, rev)   # a revision's body never changes
                if key not in self._body_cache:
                    g = subprocess.run([self.path, "get", "--db", db, doc_id],
                                       capture_output=True, text=True, timeout=timeout)
                    if g.returncode != 0:
                        raise RuntimeError(f"ferry get {doc_id}: {g.stderr.strip()[-300:]}")
                    b = json.loads(g.stdout)
                    if b.get("_rev") != rev:   # changed between ls and get: read again next poll
                        raise RuntimeError(f"{doc_id} changed while being read")
                    b.pop("_id", None)
                    b.pop("_rev", None)
                    self._body_cache[key] = b
                body = self._body_cache[key]
            out[doc_id] = {"id": doc_id, "rev": rev, "deleted": deleted, "body": body,
                           "conflicts": None, "leaves": None}
        return out

"""The good clients, all from 127.0.0.1 with the right password: REST workers (keep-alive GETs
and writes, a new connection every few requests), a continuous `_changes` reader, and a
continuous BLIP pull (`ferry sync --pull --continuous`) whose database is polled; and the ledger
of acknowledged writes the checker reads back."""
from __future__ import annotations

import bisect
import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from typing import Optional

from daemon import die_with_parent, stop_process

REQUEST_TIMEOUT = 10.0


def generation(rev: str) -> int:
    try:
        return int(rev.split("-", 1)[0])
    except ValueError:
        return 0


class Ledger:
    """Acknowledged writes: per document its last acknowledged revision (one writer per
    document, so that is what must be current) and whether a later attempt went unanswered
    (then the acknowledged one must at least be in its history); and (time, id, rev) of every
    acknowledgement, for the feeds' lag."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last: dict[str, str] = {}
        self.in_doubt: set[str] = set()
        self.acks: list[tuple[float, str, str]] = []

    def acked(self, t: float, doc: str, rev: str) -> None:
        with self.lock:
            self.last[doc] = rev
            self.in_doubt.discard(doc)
            self.acks.append((t, doc, rev))

    def doubt(self, doc: str) -> None:
        with self.lock:
            self.in_doubt.add(doc)


class Sightings:
    """When a feed first showed each generation of each document: `first(doc, gen)` is the
    first time it showed that generation or a later one (a feed shows a document's current
    revision, so it may skip one that was overwritten quickly)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen: dict[str, list[tuple[int, float]]] = {}   # doc -> [(gen, t)] in order seen

    def saw(self, doc: str, rev: str, t: float) -> None:
        g = generation(rev)
        with self.lock:
            lst = self.seen.setdefault(doc, [])
            if not lst or g > lst[-1][0]:
                lst.append((g, t))

    def first(self, doc: str, gen: int) -> Optional[float]:
        with self.lock:
            lst = self.seen.get(doc)
            if not lst:
                return None
            i = bisect.bisect_left(lst, (gen, -1.0))
            return lst[i][1] if i < len(lst) else None

    def has(self, doc: str, gen: int) -> bool:
        return self.first(doc, gen) is not None


class Recorder:
    """Every good request: (end, latency s, op, ok, status). A window holds the requests that
    ended in it (so one stuck across the window's start shows there, with its whole wait)."""

    def __init__(self):
        self.rows: list[tuple[float, float, str, bool, int]] = []

    def add(self, t0: float, lat: float, op: str, ok: bool, status: int) -> None:
        self.rows.append((t0 + lat, lat, op, ok, status))     # list.append is atomic

    def window(self, t0: float, t1: float):
        return [r for r in list(self.rows) if t0 <= r[0] < t1]


class GoodWorker(threading.Thread):
    """A closed loop over one keep-alive connection (a new one every `reconnect_every`
    requests, so that new connections are measured too): 60 % GET of a seeded document,
    20 % PUT of a new one, 20 % update of one of its own."""

    def __init__(self, idx: int, port: int, auth: str, db: str, seeded: list[str], ledger: Ledger,
                 rec: Recorder, stop: threading.Event, reconnect_every: int, seed: int, pad: int):
        super().__init__(daemon=True, name=f"good-{idx}")
        self.idx, self.port, self.auth, self.db = idx, port, auth, db
        self.seeded, self.ledger, self.rec, self.stop = seeded, ledger, rec, stop
        self.reconnect_every = reconnect_every
        self.rng = random.Random(seed * 1000 + idx)
        self.pad = "g" * pad
        self.mine: dict[str, str] = {}      # own documents not in doubt -> last acked rev
        self.n = 0
        self.conn: Optional[http.client.HTTPConnection] = None
        self.used = 0
        self.inflight_since: Optional[float] = None     # the start of the request in flight

    def _conn(self) -> http.client.HTTPConnection:
        if self.conn is None or self.used >= self.reconnect_every:
            if self.conn is not None:
                self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
            self.used = 0
        self.used += 1
        return self.conn

    def _drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def run(self) -> None:
        while not self.stop.is_set():
            r = self.rng.random()
            if r < 0.6 or (r >= 0.8 and not self.mine):
                self.one("get", "GET", f"/{self.db}/{self.rng.choice(self.seeded)}", None, None)
            elif r < 0.8:
                self.n += 1
                doc = f"good-{self.idx}-{self.n:06d}"
                self.one("put", "PUT", f"/{self.db}/{doc}", doc, {"w": self.idx, "n": self.n, "pad": self.pad})
            else:
                doc = self.rng.choice(list(self.mine))
                rev = self.mine[doc]
                self.one("update", "PUT", f"/{self.db}/{doc}", doc,
                         {"_rev": rev, "w": self.idx, "n": self.n, "u": generation(rev) + 1, "pad": self.pad})
        self._drop()

    def one(self, op: str, method: str, path: str, doc: Optional[str], body) -> None:
        headers = {"Authorization": self.auth, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        t0 = time.monotonic()
        self.inflight_since = t0
        status = 0
        raw = b""
        try:
            c = self._conn()
            c.request(method, path, body=data, headers=headers)
            resp = c.getresponse()
            raw = resp.read()
            status = resp.status
            if resp.will_close:
                self._drop()
        except (OSError, http.client.HTTPException):
            self._drop()
        t1 = time.monotonic()
        self.inflight_since = None
        ok = 200 <= status < 300
        self.rec.add(t0, t1 - t0, op, ok, status)
        if doc is None:
            return
        if status in (201, 202):
            try:
                rev = json.loads(raw)["rev"]
            except (ValueError, KeyError, TypeError):
                rev = None
            if rev:
                self.ledger.acked(t1, doc, rev)
                self.mine[doc] = rev
                return
        if status == 0 or status >= 500:
            # No answer, or one that does not say whether it was stored: the document's state is
            # unknown; it is not written again.
            self.ledger.doubt(doc)
            self.mine.pop(doc, None)


class ChangesReader(threading.Thread):
    """`GET /db/_changes?feed=continuous&since=0&heartbeat=1000`; reconnects from its last
    sequence when the feed ends or stalls past the request timeout."""

    def __init__(self, port: int, auth: str, db: str, sightings: Sightings, stop: threading.Event):
        super().__init__(daemon=True, name="changes-reader")
        self.port, self.auth, self.db, self.sightings, self.stop = port, auth, db, sightings, stop
        self.since = "0"
        self.reconnects = 0
        self.errors: list[str] = []
        self.rows = 0
        self.last_line = time.monotonic()

    def run(self) -> None:
        first = True
        while not self.stop.is_set():
            if not first:
                self.reconnects += 1
            first = False
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
            try:
                conn.request("GET", f"/{self.db}/_changes?feed=continuous&heartbeat=1000&since={self.since}",
                             headers={"Authorization": self.auth})
                resp = conn.getresponse()
                if resp.status != 200:
                    self.errors.append(f"status {resp.status}")
                    resp.read()
                    self.stop.wait(0.5)
                    continue
                while not self.stop.is_set():
                    line = resp.readline()
                    if not line:
                        break
                    self.last_line = time.monotonic()
                    line = line.strip()
                    if not line:
                        continue
                    row = json.loads(line)
                    if "last_seq" in row and "id" not in row:
                        self.since = row["last_seq"]
                        break
                    t = time.monotonic()
                    self.rows += 1
                    self.since = row.get("seq", self.since)
                    for ch in row.get("changes", []):
                        self.sightings.saw(row["id"], ch["rev"], t)
            except (OSError, http.client.HTTPException, ValueError) as e:
                if not self.stop.is_set():
                    self.errors.append(type(e).__name__)
                    self.stop.wait(0.2)
            finally:
                conn.close()


class BlipPull:
    """`ferry sync ws://USER:PW@127.0.0.1:PORT/db --db LOCAL --pull --continuous`, and a thread
    polling LOCAL's `docs` table (read-only) every 50 ms for what it has pulled."""

    def __init__(self, bin_path: str, port: int, user: str, password: str, db: str, run_dir: str,
                 sightings: Sightings, stop: threading.Event):
        self.local = os.path.join(run_dir, "blip-pull.ferry")
        self.argv = [bin_path, "sync", f"ws://{user}:{password}@127.0.0.1:{port}/{db}", "--db", self.local,
                     "--pull", "--continuous"]
        self.run_dir, self.sightings, self.stop = run_dir, sightings, stop
        self.proc: Optional[subprocess.Popen] = None
        self.poll_errors: list[str] = []
        self.thread = threading.Thread(target=self._poll, daemon=True, name="blip-poller")

    def start(self) -> None:
        out = open(os.path.join(self.run_dir, "blip-pull.out"), "wb")
        err = open(os.path.join(self.run_dir, "blip-pull.err"), "wb")
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent(signal.SIGKILL))
        out.close()
        err.close()
        self.thread.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _poll(self) -> None:
        db = None
        last_seq = 0
        while not self.stop.is_set():
            try:
                if db is None:
                    if not os.path.exists(self.local):
                        self.stop.wait(0.05)
                        continue
                    db = sqlite3.connect(f"file:{self.local}?mode=ro", uri=True, timeout=1)
                rows = db.execute("SELECT doc_id, rev_id, sequence FROM docs WHERE sequence > ? ORDER BY sequence",
                                  (last_seq,)).fetchall()
                t = time.monotonic()
                for doc, rev, seq in rows:
                    self.sightings.saw(doc, rev, t)
                    last_seq = max(last_seq, seq)
            except sqlite3.Error as e:
                # The schema not made yet, or busy: try again; a schema this poller does not know
                # shows as no BLIP sightings at all (reported).
                msg = str(e)
                if not self.poll_errors or self.poll_errors[-1] != msg:
                    self.poll_errors.append(msg)
                if db is not None and "no such" in msg:
                    db.close()
                    db = None
            self.stop.wait(0.05)
        if db is not None:
            db.close()

    def stop_process(self) -> Optional[int]:
        return stop_process(self.proc, signal.SIGINT, 10)

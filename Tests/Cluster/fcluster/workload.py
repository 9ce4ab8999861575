"""The seeded workload: two CLI clients and, if present, one library client.

Each CLI client, a few times a second, picks a random host and writes that host's database
with the ``ferry`` CLI (a plain subprocess: the server replicates the write): a put
(create or update), a delete, a re-create of a document it deleted, or a put with an
attachment (``--attach``). Half the ops go to a hot tenth of the keyspace so that
concurrent writes to one document (and so conflicts) are common. The library client does
the same through its stdin protocol on its own database.

Every put carries a unique write token ``{"w": "c1-42", …}`` so the checker can tell which
put wrote a body. Every op is recorded with its start and end time and its outcome:
``ok`` (acknowledged), ``failed`` (an error: not committed), or ``ambiguous`` (no answer in
time: it may or may not have committed). Writes go to hosts whose server is down, paused
or whose disk is full too; those simply fail or succeed locally.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import threading
from typing import Optional

from .ferrycli import Ferry
from .history import History
from .netns import Topology
from .servers import LibClient

ATTACHMENT_NAMES = ("a.bin", "b.bin", "c.bin")
OP_TIMEOUT = 10.0


def doc_ids(n: int) -> list[str]:
    width = max(3, len(str(n - 1)))
    return [f"doc-{i:0{width}d}" for i in range(n)]


def attachment_digest(data: bytes) -> str:
    """Ferry's (and Couchbase's) attachment digest: ``sha1-`` + base64 of the SHA-1."""
    return "sha1-" + base64.b64encode(hashlib.sha1(data).digest()).decode()


class Chooser:
    """One client's seeded choices, and what it believes about the documents it wrote."""

    def __init__(self, rng: random.Random, ids: list[str], attach: bool) -> None:
        self.rng, self.ids, self.attach = rng, ids, attach
        self.hot = ids[:max(5, len(ids) // 10)]
        self.live: dict[str, bool] = {}

    def _doc(self, among: Optional[list[str]] = None) -> str:
        if among:
            return self.rng.choice(among)
        return self.rng.choice(self.hot if self.rng.random() < 0.5 else self.ids)

    def next_op(self) -> tuple[str, str, str]:
        """(op, doc id, intent): op is put/delete/attach; intent says create/update/recreate."""
        r = self.rng.random()
        if r < 0.20:
            live = [d for d, v in self.live.items() if v]
            return "delete", self._doc(live if live and self.rng.random() < 0.8 else None), "delete"
        if r < 0.30:
            dead = [d for d, v in self.live.items() if not v]
            if dead:
                return "put", self._doc(dead), "recreate"
        if r >= 0.85 and self.attach:
            doc = self._doc()
            return "attach", doc, "attach"
        doc = self._doc()
        return "put", doc, "update" if self.live.get(doc) else "create"

    def body(self, token: str, client: str) -> dict:
        pad = "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(self.rng.randrange(0, 120)))
        return {"w": token, "c": client, "n": self.rng.randrange(1_000_000), "pad": pad}

    def attachment(self) -> tuple[str, bytes]:
        return self.rng.choice(ATTACHMENT_NAMES), self.rng.randbytes(self.rng.randrange(1, 4096))

    def pause(self) -> float:
        return self.rng.uniform(0.1, 0.4)


class Workload:
    """Runs the clients in threads until ``stop`` is set."""

    def __init__(self, seed: int, ferry: Ferry, topo: Topology, lib: Optional[LibClient],
                 history: History, docs: int, attach_dir: str) -> None:
        self.seed, self.ferry, self.topo, self.lib = seed, ferry, topo, lib
        self.history, self.attach_dir = history, attach_dir
        self.ids = doc_ids(docs)
        self.threads: list[threading.Thread] = []
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        os.makedirs(attach_dir, exist_ok=True)

    def start(self, stop: threading.Event) -> None:
        for client in ("c1", "c2"):
            t = threading.Thread(target=self._cli_client, args=(client, stop), name=client, daemon=True)
            t.start()
            self.threads.append(t)
        if self.lib is not None:
            self.lib.on_late = self._late
            t = threading.Thread(target=self._lib_client, args=(stop,), name="lib", daemon=True)
            t.start()
            self.threads.append(t)

    def join(self) -> None:
        for t in self.threads:
            t.join()

    def _count(self, status: str) -> None:
        with self._lock:
            self.counts[status] = self.counts.get(status, 0) + 1

    # CLI clients

    def _cli_client(self, client: str, stop: threading.Event) -> None:
        rng = random.Random(f"{self.seed}:{client}")
        ch = Chooser(rng, self.ids, self.ferry.caps.attach)
        n = 0
        while not stop.wait(ch.pause()):
            host = rng.choice(self.topo.hosts)
            op, doc, intent = ch.next_op()
            n += 1
            token = f"{client}-{n}"
            rec = {"client": client, "participant": host.name, "op": op, "id": doc, "intent": intent}
            t_start = self.history.now()
            if op == "delete":
                out = self.ferry.delete(host.db, doc, timeout=OP_TIMEOUT)
            else:
                body = ch.body(token, client)
                rec.update(token=token, body=body)
                attach = None
                if op == "attach":
                    name, data = ch.attachment()
                    path = os.path.join(self.attach_dir, f"{token}-{name}")
                    with open(path, "wb") as f:
                        f.write(data)
                    attach = [(name, path)]
                    rec["op"] = "put"
                    rec["attachments"] = [{"name": name, "digest": attachment_digest(data), "length": len(data)}]
                out = self.ferry.put(host.db, doc, body, attach=attach, timeout=OP_TIMEOUT)
            t_end = self.history.now()
            if out.status == "ok":
                ch.live[doc] = op != "delete"
            self._count(out.status)
            self.history.record("op", t_start=round(t_start, 4), t_end=round(t_end, 4), outcome=out.status,
                                rev=out.rev, error=out.error, **rec)

    # library client

    def _lib_client(self, stop: threading.Event) -> None:
        assert self.lib is not None
        rng = random.Random(f"{self.seed}:lib")
        ch = Chooser(rng, self.ids, attach=True)
        n = 0
        while not stop.wait(ch.pause()):
            if not self.lib.alive():
                self.history.record("server", host="lib", event="exited", unexpected=True,
                                    rc=self.lib.proc.poll() if self.lib.proc else None)
                return
            if self.lib.busy():    # an earlier command is still unanswered
                continue
            op, doc, intent = ch.next_op()
            n += 1
            token = f"lib-{n}"
            rec = {"client": "lib", "participant": "lib", "op": op, "id": doc, "intent": intent}
            if op == "delete":
                cmd = {"op": "delete", "id": doc}
            elif op == "attach":
                if not ch.live.get(doc):          # attach needs a live document: write one first
                    op, intent = "put", "create"
                    rec.update(op=op, intent=intent)
                    body = ch.body(token, "lib")
                    rec.update(token=token, body=body)
                    cmd = {"op": "put", "id": doc, "body": body}
                else:
                    name, data = ch.attachment()
                    rec["attachments"] = [{"name": name, "digest": attachment_digest(data), "length": len(data)}]
                    cmd = {"op": "attach", "id": doc, "name": name, "data": base64.b64encode(data).decode()}
            else:
                body = ch.body(token, "lib")
                rec.update(token=token, body=body)
                cmd = {"op": "put", "id": doc, "body": body}
            t_start = self.history.now()
            seq, answer = self.lib.request(cmd, timeout=OP_TIMEOUT)
            t_end = self.history.now()
            if answer is None:
                status, rev, error = "ambiguous", None, f"no answer within {OP_TIMEOUT}s"
            elif answer.get("ok"):
                status, rev, error = "ok", answer.get("rev"), None
            else:
                status, rev, error = "failed", None, str(answer.get("error"))
            if status == "ok":
                ch.live[doc] = op != "delete"
            self._count(status)
            self.history.record("op", t_start=round(t_start, 4), t_end=round(t_end, 4), outcome=status,
                                rev=rev, error=error, seq=seq, **rec)

    def _late(self, seq: int, answer: dict) -> None:
        self.history.record("late", client="lib", seq=seq, ok=bool(answer.get("ok")),
                            rev=answer.get("rev"), error=answer.get("error"))

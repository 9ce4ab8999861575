"""The run's history: an append-only JSON-lines log of everything that happened.

Every record has ``t`` (seconds since the run started, monotonic clock) and ``type``.
Types written by the harness:

- ``meta``: configuration, capabilities, rerun command (first record);
- ``server``: a server started, became ready, was killed/paused/resumed or exited;
- ``op``: one client operation with ``t_start``/``t_end``, ``client``, ``participant``
  (the host whose database was written, or ``lib``), ``op`` (put/delete/attach),
  ``id``, ``token``/``body``/attachment data, and ``outcome`` (ok/failed/ambiguous);
- ``late``: a library-client answer that arrived after its op was recorded as ambiguous;
- ``fault``: a nemesis fault's ``start``/``end`` (or ``error``);
- ``rss``: one RSS sample of one server (``kb``);
- ``heal-start``/``heal``: the end of the fault window and the moment healing finished;
- ``converge``: the result of polling for convergence.

The checker only needs this file and the final states saved beside it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator


class History:
    """Thread-safe writer of ``history.jsonl``; each record is flushed at once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self.t0 = time.monotonic()
        self.wall0 = time.time()

    def now(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.t0

    def record(self, type_: str, **fields: Any) -> dict:
        """Appends a record stamped with the current time (unless ``t`` is given)."""
        rec = {"t": round(fields.pop("t", self.now()), 4), "type": type_}
        rec.update(fields)
        line = json.dumps(rec, sort_keys=True, separators=(",", ":"))
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()
        return rec

    def close(self) -> None:
        with self._lock:
            self._file.close()


def load(path: str) -> list[dict]:
    """Reads a history file (a truncated last line, from a crash, is skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def of_type(history: list[dict], *types: str) -> Iterator[dict]:
    """The records of the given types, in file order."""
    return (r for r in history if r.get("type") in types)

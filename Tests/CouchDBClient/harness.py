"""What every scenario of Tests/CouchDBClient uses: the module path to the shared harness
(Tests/CouchDB: dataset, snapshot, report, servers; Tests/lib: ferryd), the local side under
test (`FerryLocal`: `ferry sync` on a database file, read through a `ferry serve` inspector over
the same data directory; `ControlLocal`: a second CouchDB and its own replicator in its place),
one sync's outcome (`Run`) and small helpers.

Both local kinds offer the same operations, so each scenario is written once:
- `create(db, policy)`: a new local database (Ferry: `PUT /db?conflict_policy=`; CouchDB-2 has
  no policy and keeps every leaf: `keep`);
- `sync(db, url, direction, opts)`: one-shot, blocking; a `Run` with the exit status Ferry's CLI
  documents (0 done, 1 failed, 2 usage, 3 unreachable, 4 authentication refused, 5 TLS refused);
- `start(db, url, direction, opts)`: the same in the background (a `Handle`: `kill()` = SIGKILL,
  `stop()` = SIGTERM, `wait(timeout)`);
- `count(db)`: how many documents the local database holds now (Ferry: a read-only SQLite
  query on the file, safe while a sync writes it);
- `server`: the local database's REST surface (`servers.Server`), what Snapshot reads.
"""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit, urlunsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.join(HERE, "..", "CouchDB"))
sys.path.insert(2, os.path.join(HERE, "..", "lib"))

import ferryd  # noqa: E402
import servers  # noqa: E402
from servers import COUCH_PASSWORD, COUCH_USER, CouchDB, Server  # noqa: E402,F401

SUMMARY = re.compile(r"(\d+) (pushed|pulled|conflicts resolved|errors)")
EXIT = {0: "done", 1: "failed", 2: "usage", 3: "unreachable", 4: "authentication refused", 5: "TLS refused"}


def with_credentials(url, user=COUCH_USER, password=COUCH_PASSWORD):
    """`http://host:port/db` with `user:password@` written in."""
    u = urlsplit(url)
    host = u.netloc.rsplit("@", 1)[-1]
    return urlunsplit((u.scheme, f"{quote(user, safe='')}:{quote(password, safe='')}@{host}", u.path, u.query, ""))


def couch_url(couch_server, db, user=COUCH_USER, password=COUCH_PASSWORD, base=None):
    """The URL a user hands `ferry sync` for a CouchDB database, credentials in it."""
    return with_credentials(f"{(base or couch_server.base).rstrip('/')}/{quote(db, safe='')}", user, password)


def update_seq(server, db):
    return server.get(f"/{db}", expect=200).json().get("update_seq")


def seq_number(seq):
    """The numeric prefix of a CouchDB sequence (`"12-g1AA…"` → 12; Ferry's are numbers)."""
    if isinstance(seq, int):
        return seq
    m = re.match(r"^(\d+)", str(seq))
    return int(m.group(1)) if m else None


def poll(what, deadline_s, step, every=0.05):
    """ferryd.poll_until, returning False instead of raising when time runs out."""
    try:
        ferryd.poll_until(what, deadline_s, step, every=every, retry=(OSError, ValueError, servers.HTTPError,
                                                                    servers.requests.RequestException))
        return True
    except ferryd.CheckFailed:
        return False


@dataclass
class SyncOptions:
    """What `ferry sync` is told besides URL, --db and the direction."""
    doc_ids: list = field(default_factory=list)
    selector: dict = None
    filter: str = None
    params: dict = field(default_factory=dict)
    user: str = None
    password: str = None
    ca: str = None
    pins: list = field(default_factory=list)
    batch_size: int = None
    timeout: float = None
    max_attempts: int = None
    continuous: bool = False
    reset_checkpoint: bool = False

    def cli(self):
        a = []
        for i in self.doc_ids:
            a += ["--doc-id", i]
        if self.selector is not None:
            a += ["--selector", json.dumps(self.selector)]
        if self.filter:
            a += ["--filter", self.filter]
        for k, v in self.params.items():
            a += ["--param", f"{k}={v}"]
        if self.user is not None:
            a += ["--user", self.user, "--password", self.password]
        if self.ca:
            a += ["--ca", self.ca]
        for p in self.pins:
            a += ["--pin", p]
        if self.batch_size:
            a += ["--batch-size", str(self.batch_size)]
        if self.timeout is not None:
            a += ["--timeout", str(self.timeout)]
        if self.max_attempts is not None:
            a += ["--max-attempts", str(self.max_attempts)]
        if self.continuous:
            a.append("--continuous")
        if self.reset_checkpoint:
            a.append("--reset-checkpoint")
        return a


@dataclass
class Run:
    """One sync's outcome. `counts`: the summary line's figures ({} when there is none: they are
    evidence, never what a check rests on, except where a scenario says so)."""
    rc: int
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    argv: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    def describe(self):
        tail = lambda s, n: s.strip().replace("\n", " | ")[-n:]  # noqa: E731
        return (f"exit {self.rc} ({EXIT.get(self.rc, '?')}) after {self.seconds:.1f} s; stdout: {tail(self.out, 200)!r}; "
                f"stderr: {tail(self.err, 400)!r}")

    def figure(self, key):
        return self.counts.get(key)


def parse_summary(text):
    """{"pushed": N, "pulled": N, …} from the last line naming any of them (lenient)."""
    for line in reversed(text.splitlines()):
        found = SUMMARY.findall(line)
        if found:
            return {k: int(n) for n, k in found}
    return {}


class Handle:
    """A sync running in the background."""

    def kill(self):
        raise NotImplementedError

    def stop(self, timeout=30):
        raise NotImplementedError

    def wait(self, timeout):
        """The Run once it ends within `timeout` seconds, else None."""
        raise NotImplementedError

    def alive(self):
        raise NotImplementedError


# -- Ferry ---------------------------------------------------------------------------------------

class FerryHandle(Handle):
    def __init__(self, argv, log_stem):
        self.argv, self.t0 = argv, time.monotonic()
        self.out_path, self.err_path = log_stem + ".out", log_stem + ".err"
        with open(log_stem + ".argv", "a") as f:
            f.write(" ".join(argv) + "\n")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         preexec_fn=ferryd.die_with_parent())

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        return self.wait(30)

    def stop(self, timeout=30):
        ferryd.stop_process(self.proc, signal.SIGTERM, timeout)
        return self.wait(5)

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        out = open(self.out_path, errors="replace").read()
        err = open(self.err_path, errors="replace").read()
        return Run(rc, out, err, time.monotonic() - self.t0, self.argv, parse_summary(out))


class FerryLocal:
    """The side under test: `ferry sync URL --db DIR/NAME.ferry`; DIR is also served by one
    `ferry serve --data DIR` (the inspector: it watches the files for other processes' writes,
    so it reads what a sync wrote, and its writes reach a running `--continuous` sync the same
    way), which is how the checks read and write the local database through REST."""
    kind, name = "ferry", "Ferry"

    def __init__(self, binary, tmp):
        self.bin, self.dir, self.logs = binary, os.path.join(tmp, "local"), os.path.join(tmp, "sync-logs")
        os.makedirs(self.logs, exist_ok=True)
        self.daemon = servers.Ferry(binary, self.dir, os.path.join(tmp, "inspector.err"))
        self.server = self.daemon.server
        self.runs = 0

    def create(self, db, policy="resolve"):
        """(ok, evidence): the database made with PUT /db?conflict_policy=POLICY (a file DIR/db.ferry)."""
        r = self.server.put(f"/{db}", params={"conflict_policy": policy})
        got = self.server.get(f"/{db}").json().get("conflict_policy") if r.status_code == 201 else None
        return r.status_code == 201 and got == policy, f"PUT -> {r.status_code} {r.text[:200]}; conflict_policy {got!r}"

    def path(self, db):
        return os.path.join(self.dir, f"{db}.ferry")

    def argv(self, db, url, direction, opts):
        d = {"push": ["--push"], "pull": ["--pull"], None: [], "both": []}[direction]
        return [self.bin, "sync", url, "--db", self.path(db), *d, *(opts or SyncOptions()).cli()]

    def start(self, db, url, direction=None, opts=None):
        self.runs += 1
        return FerryHandle(self.argv(db, url, direction, opts), os.path.join(self.logs, f"{self.runs:03d}-{db}"))

    def sync(self, db, url, direction=None, opts=None, timeout=1800):
        h = self.start(db, url, direction, opts)
        run = h.wait(timeout)
        if run is None:
            h.kill()
            run = h.wait(30)
            run.err += f"\n(harness: killed after {timeout} s)"
        return run

    def count(self, db):
        """Rows in the file's `docs` table (every document, deleted ones too), read-only."""
        path = self.path(db)
        if not os.path.exists(path):
            return 0
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM docs").fetchone()[0]
        except sqlite3.OperationalError:
            return 0
        finally:
            con.close()

    def ferry_peer_url(self, daemon_server, db):
        """How this local side reaches another Ferry (`ferry serve`): BLIP, ws://user:pw@host/db."""
        return "ws://" + daemon_server.replication_url(db).split("://", 1)[1]

    def crashed(self):
        return self.daemon.crashed()

    def stop(self):
        self.daemon.stop()


# -- control: a second CouchDB and its own replicator ----------------------------------------------

def _error_status(answer, status):
    """An exit status like Ferry's for a failed CouchDB replication (control mode)."""
    text = json.dumps(answer).lower()
    if status in (401, 403) or "unauthorized" in text or "forbidden" in text or "401" in text or "403" in text:
        return 4
    if any(w in text for w in ("ssl", "tls", "certificate", "cert")):
        return 5
    if "econnrefused" in text or "nxdomain" in text or "timeout" in text:
        return 3
    return 1


class ControlHandle(Handle):
    """A `_replicator` document per direction on CouchDB-2 (one-shot or continuous)."""

    def __init__(self, local, docs):
        self.local, self.docs, self.t0 = local, docs, time.monotonic()
        for doc_id, body in docs:
            local.server.put(f"/_replicator/{doc_id}", json=body, expect=201)
        self.ended = None

    def _states(self):
        out = []
        for doc_id, _ in self.docs:
            r = self.local.server.get(f"/_scheduler/docs/_replicator/{doc_id}")
            out.append(r.json() if r.status_code == 200 else {"state": f"HTTP {r.status_code}"})
        return out

    def alive(self):
        return self.ended is None and not all(s.get("state") in ("completed", "failed") for s in self._states())

    def _remove(self):
        for doc_id, _ in self.docs:
            r = self.local.server.get(f"/_replicator/{doc_id}")
            if r.status_code == 200:
                self.local.server.request("DELETE", f"/_replicator/{doc_id}", params={"rev": r.json()["_rev"]})

    def kill(self):
        self._remove()
        self.ended = Run(137, "", "control: _replicator document deleted (job cancelled)", time.monotonic() - self.t0)
        return self.ended

    def stop(self, timeout=30):
        if self.ended is None:
            states = self._states()
            self._remove()
            self.ended = Run(0, json.dumps(states)[:400], "", time.monotonic() - self.t0)
        return self.ended

    def wait(self, timeout):
        if self.ended:
            return self.ended
        states = []

        def done():
            nonlocal states
            states = self._states()
            return all(s.get("state") in ("completed", "failed") for s in states)
        if not poll("control replication ends", timeout, done, every=0.2):
            return None
        failed = [s for s in states if s.get("state") == "failed"]
        written = sum((s.get("info") or {}).get("docs_written", 0) or 0 for s in states)
        rc = _error_status(failed, 0) if failed else 0
        self.ended = Run(rc, json.dumps(states)[:600], json.dumps(failed)[:600], time.monotonic() - self.t0,
                         counts={"written": written})
        self._remove()
        return self.ended


class ControlLocal:
    """CouchDB-2 where Ferry would be: `sync` is `POST /_replicate` on CouchDB-2 (pull: the
    given URL → CouchDB-2's db; push: the reverse; both: push, then pull), `start` a
    `_replicator` document per direction. Its replicator is set to one worker, batches of
    `batch` documents and a checkpoint every 200 ms, the nearest CouchDB comes to a client
    that checkpoints after each batch (the `resume` bound)."""
    kind, name = "control", "CouchDB-2"

    def __init__(self, tool, tmp, batch=100):
        self.couch = CouchDB(tool, os.path.join(tmp, "couchdb-2"))
        self.server = self.couch.server
        self.server.name = "CouchDB-2"
        self.settings = {"startup_jitter": "0", "worker_processes": "1", "worker_batch_size": str(batch),
                         "checkpoint_interval": "200"}
        self.configure()

    def configure(self, **more):
        """[replicator] settings (kept across `restart`)."""
        self.settings.update(more)
        for k, v in self.settings.items():
            self.couch.set_config("replicator", k, v)

    def restart(self):
        """CouchDB-2 stopped (data kept) and started on its port: its replicator's connection
        pool forgets earlier TLS connections (the tool rewrites the ini the settings went to)."""
        port = self.server.base.rsplit(":", 1)[1]
        subprocess.run([self.couch.tool, "stop", self.couch.dir], capture_output=True, timeout=120)
        subprocess.run([self.couch.tool, "start", self.couch.dir, "--port", port], capture_output=True, timeout=180,
                       check=True)
        self.configure()

    def create(self, db, policy="keep"):
        r = self.server.put(f"/{db}")
        return r.status_code == 201, f"PUT -> {r.status_code} {r.text[:200]} (CouchDB-2 keeps every leaf: policy {policy} not applicable)"

    def own_url(self, db):
        return couch_url(self.server, db)

    def body(self, db, url, direction, opts):
        opts = opts or SyncOptions()
        if opts.user is not None:
            url = with_credentials(url, opts.user, opts.password)
        b = {}
        if opts.doc_ids:
            b["doc_ids"] = opts.doc_ids
        if opts.selector is not None:
            b["selector"] = opts.selector
        if opts.filter:
            b["filter"] = opts.filter
            b["query_params"] = opts.params
        if opts.continuous:
            b["continuous"] = True
        pairs = []
        if direction in ("push", None, "both"):
            pairs.append({"source": self.own_url(db), "target": url, **b})
        if direction in ("pull", None, "both"):
            pairs.append({"source": url, "target": self.own_url(db), **b})
        return pairs

    def sync(self, db, url, direction=None, opts=None, timeout=1800):
        t0, counts, outs = time.monotonic(), {"written": 0}, []
        for body in self.body(db, url, direction, opts):
            try:
                r = self.server.post("/_replicate", json=body, timeout=timeout)
                answer, status = r.json(), r.status_code
            except (servers.requests.RequestException, ValueError) as e:
                return Run(1, "", f"{type(e).__name__}: {e}", time.monotonic() - t0)
            outs.append(json.dumps(answer)[:500])
            if status not in (200, 201) or not answer.get("ok"):
                return Run(_error_status(answer, status), " ".join(outs), f"HTTP {status} {json.dumps(answer)[:500]}",
                           time.monotonic() - t0, counts=counts)
            st = servers.stats(answer)
            counts["written"] += st.get("docs_written", 0) or 0
            key = "pulled" if body["target"] == self.own_url(db) else "pushed"
            counts[key] = counts.get(key, 0) + (st.get("docs_written", 0) or 0)
        return Run(0, " ".join(outs), "", time.monotonic() - t0, counts=counts)

    def start(self, db, url, direction=None, opts=None):
        docs = [(f"h-{uuid.uuid4().hex[:12]}", body) for body in self.body(db, url, direction, opts)]
        return ControlHandle(self, docs)

    def count(self, db):
        r = self.server.get(f"/{db}")
        if r.status_code != 200:
            return 0
        info = r.json()
        return info.get("doc_count", 0) + info.get("doc_del_count", 0)

    def ferry_peer_url(self, daemon_server, db):
        """CouchDB's replicator reaches a `ferry serve` through its REST API (issue 30)."""
        return daemon_server.replication_url(db)

    def crashed(self):
        return None

    def stop(self):
        self.couch.stop()


def seed_into(local, server, db, ds, policy):
    """Tests/CouchDB's `dataset.seed` into a database made first with `local.create` (seed
    itself creates its database with a plain PUT, which cannot carry the conflict policy): a
    thin wrapper answering that one PUT, not a copy of the seeding."""
    import dataset
    ok, evidence = local.create(db, policy)
    if not ok:
        raise SystemExit(f"seeding {db}: {evidence}")

    class Created:
        def put(self, path, **kw):
            if path == f"/{db}":
                return None
            return server.put(path, **kw)

        def post(self, path, **kw):
            return server.post(path, **kw)

        def get(self, path, **kw):
            return server.get(path, **kw)
    return dataset.seed(Created(), db, ds)


def plain_docs(server, db, n, prefix="doc", size=1024, extra=None, start=0, create=True):
    """`n` plain documents `PREFIX-NNNNN` of about `size` bytes (extra(i) adds fields)."""
    import dataset
    import random
    rng = random.Random(f"{db}/{prefix}")
    if create:
        server.put(f"/{db}", expect=(201, 412))
    for s in range(start, start + n, 500):
        docs = []
        for i in range(s, min(start + n, s + 500)):
            d = {"_id": f"{prefix}-{i:05d}", **dataset.body(rng, i, prefix, size)}
            if extra:
                d.update(extra(i))
            docs.append(d)
        dataset.bulk(server, db, docs)

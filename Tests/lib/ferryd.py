"""The one `ferry serve` driver of the Python checks (Tests/REST, Tests/CouchDB, Tests/Discovery,
Tests/Replications, Tests/Hostile, Docker/test, and Tests/Cluster's SetupError and in_ns).

- ``Daemon``: ``ferry serve --data DIR`` started on loopback or inside a network namespace
  (``ip netns exec``, optionally in a UTS namespace of its own with a host name), on a given
  port or a free one (``port=0``, read back from its first line), with users and databases made
  first; ready when it prints where it serves (read as it is written, with a deadline: no fixed
  sleep); its REST API with its admin bearer token (``request``, ``ok``, ``json``), its CLI
  (``cli``), and ``stop``: SIGTERM, then SIGKILL after a deadline; optionally a death signal
  (it dies with the script, even a SIGKILLed one) and a lower open-files limit. Logs: ``LOG_DIR/NAME.err``
  (stderr), ``.out`` (stdout), ``.argv`` (each command line), appended across restarts.
- ``http_request``: one JSON request on a new connection (bearer or Basic credentials, TLS
  without verification, or a socket made elsewhere, e.g. by ``ns_connect``).
- ``die_with_parent`` (a preexec_fn: the child gets a signal when the script dies) and
  ``stop_process`` (any child: a signal, then SIGKILL after a deadline).
- ``poll_until`` (a step polled until it holds, with a deadline), ``free_port``, ``log``,
  ``short``, ``insecure_context``, ``ns_socket``/``ns_connect``/``in_ns``, and the exceptions
  ``SetupError`` (exit 2) and ``CheckFailed``.
- For the REST checks: ``Tally``, ``ok`` (a `requests`/`httpx` answer's status) and ``serve``.

Scripts import it with ``sys.path.insert(0, <their own folder>/../lib)`` (or the repository's
Tests/lib), so it works from the repository root, from CI and from anywhere else.
"""
from __future__ import annotations

import atexit
import base64
import ctypes
import http.client
import json
import os
import re
import resource
import select
import signal
import socket
import ssl
import subprocess
import threading
import time
import weakref
from typing import Callable, Iterable, Optional, Sequence

POLL = 0.1               # seconds between polls (poll_until's default)
READY_TIMEOUT = 60       # seconds for `ferry serve` to say where it serves
STOP_TIMEOUT = 10        # seconds from SIGTERM to SIGKILL
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """The check could not be set up (exit status 2)."""


class CheckFailed(Exception):
    """A check failed."""


# -- small helpers -------------------------------------------------------------------------------

def log(msg: str, since: Optional[float] = None) -> None:
    """``[HH:MM:SS] msg``, or ``[  12.3s] msg`` counted from the monotonic time ``since``."""
    stamp = time.strftime("%H:%M:%S") if since is None else f"{time.monotonic() - since:6.1f}s"
    print(f"[{stamp}] {msg}", flush=True)


def short(obj, limit: int = 400) -> str:
    """``obj`` as JSON (a string as it is), cut to ``limit`` characters."""
    s = json.dumps(obj, sort_keys=True) if not isinstance(obj, str) else obj
    return s if len(s) <= limit else s[:limit] + "…"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for servers that take a number, not 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll_until(what: str, deadline_s: float, step: Callable[[], object], every: float = POLL,
               retry: tuple[type[BaseException], ...] = ()) -> float:
    """Calls ``step`` every ``every`` seconds until it returns something truthy; returns the
    seconds taken, or raises CheckFailed after ``deadline_s``. Exceptions of the types in
    ``retry`` count as "not yet" (the last one is named if time runs out)."""
    t0 = time.monotonic()
    last_error: Optional[BaseException] = None
    while True:
        try:
            if step():
                return time.monotonic() - t0
        except retry as e:
            last_error = e
        if time.monotonic() - t0 > deadline_s:
            raise CheckFailed(f"{what}: not within {deadline_s:g} s"
                              + (f" (last error: {last_error})" if last_error else ""))
        time.sleep(every)


_insecure: Optional[ssl.SSLContext] = None


def insecure_context() -> ssl.SSLContext:
    """TLS without verification: the test's admin channel (pins are checked apart, by Ferry or
    by the check itself)."""
    global _insecure
    if _insecure is None:
        _insecure = ssl.create_default_context()
        _insecure.check_hostname = False
        _insecure.verify_mode = ssl.CERT_NONE
    return _insecure


# -- child processes ----------------------------------------------------------------------------

def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn: the child gets ``sig`` when the script dies (even by SIGKILL), so it does not
    outlive it. Start such children from the main thread only (the death signal follows the
    thread that forked)."""
    def fn() -> None:
        _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    return fn


def stop_process(proc: Optional[subprocess.Popen], signum: int = signal.SIGTERM,
                 timeout: float = STOP_TIMEOUT) -> Optional[int]:
    """Sends ``signum`` to ``proc`` if it still runs, SIGKILL after ``timeout`` seconds; its exit
    status (None if it was never started)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signum)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


# -- network namespaces --------------------------------------------------------------------------

def in_ns(ns: str, *args: str) -> list[str]:
    """The argv that runs ``args`` inside network namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *args]


def ns_socket(ns: str, family=socket.AF_INET, kind=socket.SOCK_STREAM) -> socket.socket:
    """A socket made inside network namespace ``ns`` (this thread enters it for the socket's
    creation only; a socket stays in the namespace it was made in)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        try:
            return socket.socket(family, kind)
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:     # cannot go on in the wrong namespace
                os._exit(3)
    finally:
        os.close(own)
        os.close(target)


def ns_connect(ns: str, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection made inside network namespace ``ns``."""
    s = ns_socket(ns)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
    except BaseException:
        s.close()
        raise
    return s


# -- HTTP ------------------------------------------------------------------------------------------

def http_request(host: str, port: int, method: str, path: str, body=None, *, tls: bool = False,
                 bearer: Optional[str] = None, basic: Optional[tuple[str, str]] = None, timeout: float = 60,
                 sock: Optional[socket.socket] = None) -> tuple[int, object]:
    """One request on a new connection (to ``host:port``, or over ``sock``, connected already);
    ``body`` is sent as JSON. Returns (status, the answer decoded as JSON, else as text; None if
    empty)."""
    if tls:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout,
                                                                         context=insecure_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    if sock is not None:
        conn.sock = insecure_context().wrap_socket(sock) if tls else sock
    headers = {"Accept": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    elif basic:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
    finally:
        conn.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw.decode(errors="replace")


# -- the daemon -----------------------------------------------------------------------------------

_READY = re.compile(r" at ((https?|wss?)://(\[[^\]]+\]|[^/\s:]+):(\d+))/")


def _run(argv: Sequence[str], what: str, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{what}: no answer in {timeout:g} s ({' '.join(argv)})")
    if p.returncode != 0:
        raise SetupError(f"{what}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-800:]} ({' '.join(argv)})")
    return p


def _drain(src, dst) -> None:
    try:
        for line in src:
            dst.write(line)
            dst.flush()
    except (OSError, ValueError):
        pass
    finally:
        dst.close()


_running: "weakref.WeakSet[Daemon]" = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:
    """A daemon still running when the script exits (an exception nobody caught) is stopped."""
    for d in list(_running):
        d.stop()


class Daemon:
    """``ferry serve --data DATA`` and its REST API.

    ``ns``: the network namespace to run in (None: this one). ``address``/``port``: ``--host``
    and ``--port`` (None leaves the flag out: ferry's default, 127.0.0.1:4984; port 0 picks a
    free one). ``flags``: more arguments of ``serve``. ``users``: argument lists of ``ferry
    user add`` run first; ``dbs``: databases created first if missing. ``hostname``: run in a
    UTS namespace of its own with this host name (the default advertise name). ``new_session``:
    in a session of its own, so a Ctrl-C on the terminal reaches only the script, which stops
    it. ``log_dir`` and ``log_name``: where stderr, stdout and the command lines go (default:
    beside DATA, named ``name``). ``failure``: what ``ok`` raises when a request fails
    (CheckFailed by default). ``death_signal``: the signal the daemon gets when the script dies
    (``die_with_parent``; None: none). ``nofile``: its soft open-files limit (at most the hard
    one; None: inherited). A daemon still running when the script exits is stopped (atexit).

    After ``start``: ``url`` (``http[s]://HOST:PORT``), ``address``, ``port`` (the real one),
    ``tls``, ``token`` (the admin bearer token of ``DATA/_daemon.json``), ``proc``. ``start``
    again after a stop restarts it with the same data."""

    def __init__(self, ferry: str, data: str, *, name: str = "ferry", ns: Optional[str] = None,
                 address: Optional[str] = None, port: Optional[int] = None, flags: Iterable[str] = (),
                 users: Iterable[Sequence[str]] = (), dbs: Iterable[str] = (), hostname: Optional[str] = None,
                 new_session: bool = False, log_dir: Optional[str] = None, log_name: Optional[str] = None,
                 failure: type[Exception] = CheckFailed, ready_timeout: float = READY_TIMEOUT,
                 stop_timeout: float = STOP_TIMEOUT, death_signal: Optional[int] = None,
                 nofile: Optional[int] = None) -> None:
        self.ferry, self.data, self.name, self.ns = ferry, data, name, ns
        self.address, self.port = address, port
        self.flags, self.users, self.dbs = list(flags), [list(u) for u in users], list(dbs)
        self.hostname, self.new_session, self.failure = hostname, new_session, failure
        self.ready_timeout, self.stop_timeout = ready_timeout, stop_timeout
        self.death_signal, self.nofile = death_signal, nofile
        self.log_dir = log_dir or os.path.dirname(os.path.abspath(data))
        stem = os.path.join(self.log_dir, log_name or name)
        self.err_path, self.out_path, self.argv_path = stem + ".err", stem + ".out", stem + ".argv"
        self._listen = (address, port)
        self.proc: Optional[subprocess.Popen] = None
        self.url: Optional[str] = None
        self.token: Optional[str] = None
        self.tls = False
        self.expect_exit = False
        self._users_added = False

    def __repr__(self) -> str:
        return f"<Daemon {self.name} {self.url or 'not started'}>"

    # the process

    def argv(self) -> list[str]:
        address, port = self._listen
        argv = [self.ferry, "serve", "--data", self.data]
        if address is not None:
            argv += ["--host", address]
        if port is not None:
            argv += ["--port", str(port)]
        argv += self.flags
        if self.hostname:
            argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname, *argv]
        return in_ns(self.ns, *argv) if self.ns else argv

    def _preexec(self) -> Optional[Callable[[], None]]:
        """The child's preexec_fn for ``death_signal`` and ``nofile`` (None without them)."""
        if self.death_signal is None and not self.nofile:
            return None
        dies = die_with_parent(self.death_signal) if self.death_signal is not None else None
        nofile = self.nofile

        def fn() -> None:
            if dies:
                dies()
            if nofile:
                _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))
        return fn

    def start(self) -> "Daemon":
        """Starts the daemon and returns once it says where it serves (SetupError if it exits
        first or says nothing within ``ready_timeout``)."""
        os.makedirs(self.data, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        if not self._users_added:
            for user in self.users:
                _run([self.ferry, "user", "add", "--data", self.data, *user], f"ferry user add {user[0]}")
            self._users_added = True
        for db in self.dbs:
            if not os.path.exists(os.path.join(self.data, f"{db}.ferry")):
                _run([self.ferry, "db", "create", "--data", self.data, db], f"ferry db create {db}")
        argv = self.argv()
        with open(self.argv_path, "a") as f:
            f.write(" ".join(argv) + "\n")
        with open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                         start_new_session=self.new_session, preexec_fn=self._preexec())
        _running.add(self)
        self.expect_exit = False
        out = open(self.out_path, "ab")
        try:
            m = self._wait_ready(out)
        except BaseException:
            out.close()
            self.kill()
            raise
        assert self.proc.stdout
        threading.Thread(target=_drain, args=(self.proc.stdout, out), daemon=True).start()
        self.address, self.port = m.group(3).strip("[]"), int(m.group(4))
        self.tls = m.group(2) in ("https", "wss")
        self.token = None
        info_path = os.path.join(self.data, "_daemon.json")
        if os.path.exists(info_path):
            with open(info_path) as f:
                info = json.load(f)
            self.token = info.get("token")
            if info.get("url"):
                self.tls = str(info["url"]).startswith("https")
        self.url = f"{'https' if self.tls else 'http'}://{m.group(3)}:{self.port}"
        return self

    def _wait_ready(self, out) -> re.Match:
        """Reads stdout as it is written (copying it to ``out``) until the line that says where
        the daemon serves."""
        assert self.proc and self.proc.stdout
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + self.ready_timeout
        buf = b""
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                out.write(line + b"\n")
                m = _READY.search(line.decode(errors="replace"))
                if m:
                    out.write(buf)
                    out.flush()
                    return m
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                out.write(buf)
                out.flush()
                why = "exited" if ready else f"did not say where it serves within {self.ready_timeout:g} s"
                raise SetupError(f"ferry serve {self.name} {why} (see {self.err_path}): {buf.decode(errors='replace')!r}; "
                                 f"stderr: {self._err_tail()!r}")
            buf += chunk

    def _err_tail(self, n: int = 600) -> str:
        try:
            with open(self.err_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, signum: int) -> None:
        """Sends ``signum`` (an exit that follows is expected)."""
        if self.alive():
            assert self.proc
            self.expect_exit = True
            self.proc.send_signal(signum)

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Waits for the exit (SIGKILL after ``timeout``, default ``stop_timeout``); its status."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(self.stop_timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def stop(self, timeout: Optional[float] = None) -> Optional[int]:
        """SIGTERM, then SIGKILL after ``timeout`` (default ``stop_timeout``); the exit status."""
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.alive():
            assert self.proc
            self.expect_exit = True
            self.proc.kill()
            self.proc.wait()

    def exited_unbidden(self) -> Optional[int]:
        """The exit status if the daemon exited without being told to, else None."""
        rc = self.proc.poll() if self.proc else None
        return None if rc is None or self.expect_exit else rc

    def crashed(self) -> Optional[str]:
        """The tail of stderr if the daemon exited unbidden or printed a Swift crash, else None."""
        text = self._err_tail(100_000)
        rc = self.exited_unbidden()
        if rc is not None or "Fatal error" in text or "Backtrace" in text:
            return text[-600:] or f"exit status {rc}"
        return None

    def cli(self, *args: str, timeout: float = 60) -> str:
        """``ferry ARGS --data DATA`` (in the daemon's namespace); its stdout, stripped. A
        non-zero exit raises SetupError."""
        argv = [self.ferry, *args, "--data", self.data]
        return _run(in_ns(self.ns, *argv) if self.ns else argv, f"{self.name}: ferry {' '.join(args[:2])}",
                    timeout).stdout.strip()

    # the REST API

    def request(self, method: str, path: str, body=None, *, admin: bool = True, timeout: float = 60,
                basic: Optional[tuple[str, str]] = None) -> tuple[int, object]:
        """(status, decoded body), with the admin token unless ``admin`` is False (or ``basic``
        credentials are given); over a socket made in the daemon's namespace."""
        assert self.address is not None and self.port is not None, f"{self.name} was not started"
        sock = ns_connect(self.ns, self.address, self.port, timeout) if self.ns else None
        return http_request(self.address, self.port, method, path, body, tls=self.tls, timeout=timeout, sock=sock,
                            bearer=self.token if admin and basic is None else None, basic=basic)

    def ok(self, method: str, path: str, body=None, **kw):
        """The decoded body of a 2xx answer; anything else (or no answer) raises ``failure``."""
        try:
            status, obj = self.request(method, path, body, **kw)
        except (OSError, http.client.HTTPException) as e:
            raise self.failure(f"{self.name}: {method} {path}: {type(e).__name__}: {e}") from e
        if status // 100 != 2:
            raise self.failure(f"{self.name}: {method} {path}: {status} {short(obj, 200)}")
        return obj

    def json(self, path: str, **kw):
        """``GET path``'s decoded body (``ok``)."""
        return self.ok("GET", path, **kw)

    def doc_count(self, db: str) -> int:
        return int(self.json(f"/{db}")["doc_count"])

    def has(self, db: str, doc: str) -> bool:
        return self.request("GET", f"/{db}/{doc}")[0] == 200

    def revisions(self, db: str) -> dict[str, str]:
        """{document ID: current revision} of ``db``."""
        return {r["id"]: r["value"]["rev"] for r in self.json(f"/{db}/_all_docs")["rows"]}

    def job(self, jid: str) -> dict:
        return self.json(f"/_scheduler/jobs/{jid}")


# -- for the REST checks (Tests/REST) -------------------------------------------------------------

class Tally:
    """Counts the checks of one script; a failed one is printed as it happens."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed.append(what)
            print(f"FAIL: {what}", flush=True)
        return cond

    def summary(self):
        """The script's last line: `N passed, N failed`."""
        return f"{self.passed} passed, {len(self.failed)} failed"

    def status(self):
        return 1 if self.failed else 0


def ok(r, *codes):
    """`r` (a `requests` or `httpx` answer) when its status is one of `codes` (any 2xx without
    them); else the script stops."""
    if (r.status_code not in codes) if codes else not (200 <= r.status_code < 300):
        raise SystemExit(f"{r.request.method} {r.request.url} -> {r.status_code} {r.text[:500]}")
    return r


def serve(ferry, data, tmp, label, users=(), args=()) -> Daemon:
    """A started `ferry serve --data DATA --port 0` (and `args`) on loopback, with `users`
    (argument lists for `ferry user add`) added first, logging to TMP/LABEL.err; the script
    stops if it does not start."""
    d = Daemon(ferry, data, name=label, port=0, flags=args, users=users, log_dir=tmp)
    try:
        return d.start()
    except SetupError as e:
        raise SystemExit(str(e))

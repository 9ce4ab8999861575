#!/usr/bin/env python3
"""Python `websockets` as the client against a Ferry server (the interop test's server, which
echoes, and on the text `close-me` closes with 4000 "asked"). Runs every scenario, prints one
line per failure and `N passed, M failed`; exits 1 on any failure.

`--deflate MODE` offers permessage-deflate: `takeover` (websockets' default offer), `no-takeover`
(asks for server and client no_context_takeover and server_max_window_bits=9); every
connection must then negotiate it. Messages stop at 1 MiB with deflate.

Usage: ws_client.py ws://127.0.0.1:PORT/path [--deflate takeover|no-takeover]"""
import asyncio
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

URL = sys.argv[1]
DEFLATE = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--deflate" else None
passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name} {detail}", flush=True)


def pattern(n, seed=0):
    return bytes((i * 7 + seed) % 256 for i in range(n))


def opts(**kw):
    """connect() arguments: no compression, or the permessage-deflate offer of the mode."""
    if DEFLATE == "takeover":
        kw["extensions"] = [ClientPerMessageDeflateFactory()]
    elif DEFLATE == "no-takeover":
        kw["extensions"] = [ClientPerMessageDeflateFactory(server_no_context_takeover=True,
                                                           client_no_context_takeover=True,
                                                           server_max_window_bits=9)]
    return dict(compression=None, ping_interval=None, **kw)


def check_negotiated(ws):
    if DEFLATE:
        check("permessage-deflate negotiated", len(ws.protocol.extensions) == 1, repr(ws.protocol.extensions))


async def echo_sizes():
    async with connect(URL, **opts(max_size=None)) as ws:
        check_negotiated(ws)
        sizes = [0, 1, 125, 126, 127, 65535, 65536, 65537, 1 << 20]
        for size in sizes if DEFLATE else sizes + [16 << 20]:
            data = pattern(size, size)
            await ws.send(data)
            back = await ws.recv()
            check(f"binary {size}", back == data, f"got {len(back)} bytes")
            text = ("aé€😀" * (size // 10 + 1))[: max(size // 4, 0)]
            await ws.send(text)
            back = await ws.recv()
            check(f"text {len(text)} chars", back == text)


async def fragmented():
    async with connect(URL, **opts(max_size=None)) as ws:
        check_negotiated(ws)
        parts = [pattern(1000, i) for i in range(10)]
        await ws.send(parts)
        back = await ws.recv()
        check("fragmented binary", back == b"".join(parts))
        tparts = ["héllo ", "wörld ", "😀" * 100]
        await ws.send(tparts)
        back = await ws.recv()
        check("fragmented text", back == "".join(tparts))


async def repeated():
    """The same compressible message many times: with context takeover each refers to the last."""
    async with connect(URL, **opts(max_size=None)) as ws:
        check_negotiated(ws)
        doc = '{"_id": "doc-%d", "type": "invoice", "lines": [' + ", ".join(['{"sku": "A-1", "qty": 2}'] * 20) + "]}"
        for i in range(50):
            await ws.send(doc % i)
            back = await ws.recv()
            check(f"repeated {i}", back == doc % i)


async def ping_pong():
    async with connect(URL, **opts()) as ws:
        waiter = await ws.ping(b"ferry?")
        latency = await asyncio.wait_for(waiter, 5)
        check("ping answered", latency >= 0)


async def client_close():
    ws = await connect(URL, **opts())
    await ws.close(4001, "client done")
    check("client close code echoed", ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 4001,
          f"rcvd={ws.protocol.close_rcvd}")


async def server_close():
    ws = await connect(URL, **opts())
    await ws.send("close-me")
    try:
        await ws.recv()
        check("server close", False, "got a message instead of a close")
    except ConnectionClosed as e:
        check("server close code", e.rcvd is not None and e.rcvd.code == 4000 and e.rcvd.reason == "asked",
              f"rcvd={e.rcvd}")


async def main():
    for scenario in (echo_sizes, fragmented, repeated, ping_pong, client_close, server_close):
        try:
            await asyncio.wait_for(scenario(), 60)
        except Exception as e:  # a scenario that blows up is a failure, not a crash
            check(scenario.__name__, False, repr(e))
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


asyncio.run(main())

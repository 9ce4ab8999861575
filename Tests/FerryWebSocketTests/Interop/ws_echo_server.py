#!/usr/bin/env python3
"""An echo server on Python's `websockets` (an independent RFC 6455 implementation), for
Ferry's client interop tests. Prints `PORT <n>` once listening on 127.0.0.1 (port 0 = free).

Text commands change its behaviour: `close <code> <reason>` closes with that code and reason;
`drop` aborts the TCP connection without a close frame; `ping` sends a ping and then the text
`pong received` once the pong arrives; `fragments <n> <size>` sends a binary message of n
fragments of size bytes (byte i = i % 251); `extensions` answers with the negotiated
extensions (`none`, or `permessage-deflate local_nct=.. remote_nct=.. local_bits=.. remote_bits=..`).
Everything else is echoed unchanged.

`--deflate MODE` enables permessage-deflate: `takeover` (websockets' defaults, context takeover
both ways) or `no-takeover` (server and client no_context_takeover, server window 10, client 11).

Usage: ws_echo_server.py [--deflate takeover|no-takeover]"""
import asyncio
import signal
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory

DEFLATE = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--deflate" else None


def extensions():
    if DEFLATE == "takeover":
        return [ServerPerMessageDeflateFactory()]
    if DEFLATE == "no-takeover":
        return [ServerPerMessageDeflateFactory(server_no_context_takeover=True, client_no_context_takeover=True,
                                               server_max_window_bits=10, client_max_window_bits=11)]
    return None


def describe(ws):
    if not ws.protocol.extensions:
        return "none"
    return " ".join(f"{e.name} local_nct={e.local_no_context_takeover} remote_nct={e.remote_no_context_takeover} "
                    f"local_bits={e.local_max_window_bits} remote_bits={e.remote_max_window_bits}"
                    for e in ws.protocol.extensions)


async def handler(ws):
    try:
        await echo(ws)
    except ConnectionClosed:
        pass  # closes with application codes (4xxx) end iteration with an exception


async def echo(ws):
    async for message in ws:
        if isinstance(message, str) and message.startswith("close "):
            _, code, reason = message.split(" ", 2)
            await ws.close(int(code), reason)
            return
        if message == "drop":
            ws.transport.abort()
            return
        if message == "extensions":
            await ws.send(describe(ws))
            continue
        if message == "ping":
            waiter = await ws.ping(b"from-python")
            await waiter
            await ws.send("pong received")
            continue
        if isinstance(message, str) and message.startswith("fragments "):
            _, n, size = message.split(" ")
            n, size = int(n), int(size)
            data = bytes(i % 251 for i in range(n * size))
            await ws.send([data[i * size:(i + 1) * size] for i in range(n)])
            continue
        await ws.send(message)


async def main():
    async with serve(handler, "127.0.0.1", 0, max_size=None, compression=None, extensions=extensions(),
                     ping_interval=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"PORT {port}", flush=True)
        stop = asyncio.get_running_loop().create_future()
        # websockets' serve() treats SIGTERM as "shut down gracefully"; a test peer just exits.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
        await stop


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)

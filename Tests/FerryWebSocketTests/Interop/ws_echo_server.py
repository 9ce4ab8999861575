#!/usr/bin/env python3
"""An echo server on Python's `websockets` (an independent RFC 6455 implementation), for
Ferry's client interop tests. Prints `PORT <n>` once listening on 127.0.0.1 (port 0 = free).

Text commands change its behaviour: `close <code> <reason>` closes with that code and reason;
`drop` aborts the TCP connection without a close frame; `ping` sends a ping and then the text
`pong received` once the pong arrives; `fragments <n> <size>` sends a binary message of n
fragments of size bytes (byte i = i % 251). Everything else is echoed unchanged."""
import asyncio
import signal
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


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
    async with serve(handler, "127.0.0.1", 0, max_size=None, compression=None, ping_interval=None) as server:
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

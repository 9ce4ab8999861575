#!/usr/bin/env python3
"""Python's `websockets` with the `ssl` module (an independent TLS + WebSocket stack), for
Ferry's TLS interop tests.

  wss_peer.py server --cert PEM --key PEM [--client-ca PEM]
      Echo server on 127.0.0.1 (free port); prints `PORT <n>`. With --client-ca a client
      certificate from that authority is required. The text `whoami` is answered with the
      client certificate's common name (or `anonymous`).
  wss_peer.py client --url wss://HOST:PORT/ --ca PEM [--cert PEM --key PEM] [--server-name NAME]
      Verifies the server (chain and host name), sends `hello` and `whoami`, prints the two
      replies (`OK <reply>`), or `ERROR <type>: <message>` and exits 1."""
import argparse
import asyncio
import signal
import ssl
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


def common_name(cert):
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return "anonymous"


async def handler(ws):
    try:
        async for message in ws:
            if message == "whoami":
                await ws.send(common_name(ws.transport.get_extra_info("peercert")))
            else:
                await ws.send(message)
    except ConnectionClosed:
        pass


async def run_server(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    if args.client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(args.client_ca)
    async with serve(handler, "127.0.0.1", 0, ssl=ctx, compression=None, ping_interval=None) as server:
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        stop = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
        await stop


async def run_client(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the host name
    ctx.load_verify_locations(args.ca)
    if args.cert:
        ctx.load_cert_chain(args.cert, args.key)
    try:
        async with connect(args.url, ssl=ctx, server_hostname=args.server_name, compression=None,
                           open_timeout=5) as ws:
            for text in ("hello", "whoami"):
                await ws.send(text)
                print("OK", await ws.recv(), flush=True)
    except Exception as e:  # the test reads the failure from stdout
        print(f"ERROR {type(e).__name__}: {e}", flush=True)
        sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["server", "client"])
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--client-ca")
    p.add_argument("--ca")
    p.add_argument("--url")
    p.add_argument("--server-name")
    args = p.parse_args()
    asyncio.run(run_server(args) if args.role == "server" else run_client(args))


if __name__ == "__main__":
    main()

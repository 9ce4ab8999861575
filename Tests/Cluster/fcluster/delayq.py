#!/usr/bin/env python3
"""NFQUEUE consumer that delays every packet of one queue by a fixed time (a separate process).

Started inside a host's namespace by the nemesis (``ip netns exec NS python delayq.py
--queue Q --delay-ms D``) with the Python of the repository's venv (NetfilterQueue).
Packets are kept pending in the kernel (no verdict in the callback) and accepted when due,
from a heap driven by ``select`` timeouts, so delays overlap instead of adding up.

It can never black-hole traffic for good: the rules that feed it use ``bypass`` (packets
pass while nobody listens), the nemesis deletes the rule before stopping it, and on
SIGTERM/SIGINT, on any error, or when its parent (the harness) goes away it accepts every
packet it still holds before exiting. Prints ``ready`` once bound.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import select
import signal
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queue", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--max-len", type=int, default=8192)
    args = ap.parse_args()

    from netfilterqueue import COPY_META, NetfilterQueue

    delay = args.delay_ms / 1000.0
    held: list = []
    seq = itertools.count()
    parent = os.getppid()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True
        try:
            os.write(wake_w, b"x")
        except OSError:
            pass

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def on_packet(pkt):
        heapq.heappush(held, (time.monotonic() + delay, next(seq), pkt))

    nfq = NetfilterQueue()
    nfq.bind(args.queue, on_packet, max_len=args.max_len, mode=COPY_META)
    fd = nfq.get_fd()
    os.set_blocking(fd, False)
    print("ready", flush=True)
    released = 0
    try:
        while not stopping:
            if os.getppid() != parent:      # the harness died: let everything go
                break
            timeout = 0.5
            if held:
                timeout = min(timeout, max(0.0, held[0][0] - time.monotonic()))
            try:
                readable, _, _ = select.select([fd, wake_r], [], [], timeout)
            except InterruptedError:
                continue
            if fd in readable:
                nfq.run(block=False)
            now = time.monotonic()
            while held and held[0][0] <= now:
                heapq.heappop(held)[2].accept()
                released += 1
    finally:
        while held:
            try:
                heapq.heappop(held)[2].accept()
            except Exception:
                pass
        nfq.unbind()
    print(f"released {released}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

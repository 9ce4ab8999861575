"""What the REST checks share (interop.py, couch_*.py): starting a `ferry serve --data`
daemon, a tally of checks, and small request helpers."""
import os
import re
import socket
import subprocess


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
    """`r` when its status is one of `codes` (any 2xx without them); else the script stops."""
    if (r.status_code not in codes) if codes else not (200 <= r.status_code < 300):
        raise SystemExit(f"{r.request.method} {r.request.url} -> {r.status_code} {r.text[:500]}")
    return r


def free_port():
    """A port free now (CouchDB takes a port number, not 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(ferry, data, tmp, label, users=(), args=()):
    """Adds `users` (argument lists for `ferry user add`), starts `ferry serve --data DATA
    --port 0` (and `args`), and returns (process, base URL) once its first stdout line says where it
    listens: the line is read as it is written, no polling."""
    os.makedirs(data, exist_ok=True)
    for user_args in users:
        subprocess.run([ferry, "user", "add", "--data", data, *user_args], check=True, stdout=subprocess.DEVNULL)
    err = open(os.path.join(tmp, f"{label}.err"), "w+")
    proc = subprocess.Popen([ferry, "serve", "--data", data, "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=err, text=True)
    m = re.search(r" at (http://127\.0\.0\.1:\d+)/", proc.stdout.readline())
    if m:
        return proc, m.group(1)
    proc.wait()
    err.seek(0)
    raise SystemExit(f"ferry serve ({label}) did not start: {err.read()}")

"""The `ferry serve --data DIR` under test, its resident memory, and the process plumbing the
harness shares (children that die with it, a small REST helper)."""
from __future__ import annotations

import base64
import ctypes
import http.client
import json
import os
import re
import resource
import select
import signal
import subprocess
import threading
import time
from typing import Optional

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


class SetupError(Exception):
    """Something the harness needs could not be made (exit 2)."""


def die_with_parent(sig: int = signal.SIGKILL):
    """A preexec_fn: the child gets `sig` when the harness dies (even by SIGKILL), so no attacker
    or daemon outlives it. Children are started from the main thread only (the death signal
    follows the thread that forked)."""
    def fn():
        _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    return fn


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (KiB), Threads from /proc/PID/status; {} when the process is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "Threads"):
                    out[key] = int(value.split()[0])
    except OSError:
        return {}
    return out


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def nofile_limit(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    soft, hard = line.split()[3:5]
                    return f"{soft}/{hard}"
    except OSError:
        pass
    return "?"


class Daemon:
    """One `ferry serve --data DIR --port 0` on 127.0.0.1 with one server admin."""

    def __init__(self, bin_path: str, run_dir: str, user: str, password: str, extra: list[str],
                 nofile: Optional[int] = None):
        self.bin, self.run_dir, self.user, self.password = bin_path, run_dir, user, password
        self.data = os.path.join(run_dir, "data")
        self.extra = extra
        self.nofile = nofile
        self.proc: Optional[subprocess.Popen] = None
        self.host = "127.0.0.1"
        self.port = 0
        self.auth = basic(user, password)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30) -> None:
        os.makedirs(self.data, exist_ok=True)
        p = subprocess.run([self.bin, "user", "add", "--data", self.data, self.user, "--password-stdin",
                            "--role", "*=admin"], input=self.password + "\n", text=True,
                           capture_output=True, timeout=60)
        if p.returncode != 0:
            raise SetupError(f"ferry user add failed: {p.stderr.strip()}")
        err = open(os.path.join(self.run_dir, "ferry-serve.err"), "ab")     # a restart appends
        argv = [self.bin, "serve", "--data", self.data, "--port", "0", *self.extra]
        with open(os.path.join(self.run_dir, "ferry-serve.argv"), "w") as f:
            f.write(" ".join(argv) + "\n")
        dies = die_with_parent(signal.SIGTERM)
        nofile = self.nofile

        def preexec():
            dies()
            if nofile:
                _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                     preexec_fn=preexec)
        err.close()
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().decode(errors="replace") if ready else ""
        m = re.search(r" at http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            self.stop()
            raise SetupError(f"ferry serve did not start (see {self.run_dir}/ferry-serve.err): {line!r}")
        self.port = int(m.group(1))
        out = open(os.path.join(self.run_dir, "ferry-serve.out"), "wb")
        out.write(line.encode())
        threading.Thread(target=_drain, args=(self.proc.stdout, out), daemon=True).start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_status(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> Optional[int]:
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def reset_peak(self) -> bool:
        """Resets VmHWM to the current RSS (/proc/PID/clear_refs, value 5), so each phase has
        its own peak."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def request(self, method: str, path: str, body=None, timeout: float = 30, headers=None):
        """(status, decoded body) on a connection of its own, as the admin."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Authorization": self.auth, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            raw = r.read()
        finally:
            conn.close()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body=None, **kw):
        status, obj = self.request(method, path, body, **kw)
        if status // 100 != 2:
            raise SetupError(f"{method} {path}: {status} {str(obj)[:300]}")
        return obj


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) the process has used; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class Sampler(threading.Thread):
    """Samples the daemon's VmRSS, open descriptors and threads every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True, name="rss-sampler")
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int, int, int]] = []   # (t, rss KiB, fds, threads)
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            st = proc_status(self.pid)
            if not st:
                return
            self.samples.append((time.monotonic(), st.get("VmRSS", 0), fd_count(self.pid), st.get("Threads", 0)))
            self.stop_event.wait(self.interval)

    def window(self, t0: float, t1: float) -> list[tuple[float, int, int, int]]:
        return [s for s in list(self.samples) if t0 <= s[0] <= t1]


def _drain(src, dst) -> None:
    try:
        for line in src:
            dst.write(line)
            dst.flush()
    except (OSError, ValueError):
        pass
    finally:
        dst.close()

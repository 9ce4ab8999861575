"""The `ferry serve --data DIR` under test (a `Tests/lib/ferryd.Daemon`), its resident memory,
and the process plumbing the harness shares (children that die with it, a stop with a deadline,
Basic credentials)."""
from __future__ import annotations

import base64
import os
import signal
import sys
import threading
import time
from typing import Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "lib"))
import ferryd  # noqa: E402
from ferryd import SetupError, die_with_parent, stop_process  # noqa: E402,F401  (the harness's, too)


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


class Daemon(ferryd.Daemon):
    """One `ferry serve --data RUN_DIR/data --port 0` on 127.0.0.1 with one server admin, whose
    Basic credentials its requests carry; it gets SIGTERM when the harness dies. Logs:
    RUN_DIR/ferry-serve.err, .out, .argv (a restart appends)."""

    def __init__(self, bin_path: str, run_dir: str, user: str, password: str, extra: list[str],
                 nofile: Optional[int] = None):
        super().__init__(bin_path, os.path.join(run_dir, "data"), name="ferry serve", port=0, flags=extra,
                         users=[[user, "--password", password, "--role", "*=admin"]], log_dir=run_dir,
                         log_name="ferry-serve", failure=SetupError, ready_timeout=30,
                         death_signal=signal.SIGTERM, nofile=nofile)
        self.user, self.password = user, password
        self.auth = basic(user, password)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def exit_status(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    def reset_peak(self) -> bool:
        """Resets VmHWM to the current RSS (/proc/PID/clear_refs, value 5), so each phase has
        its own peak."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def request(self, method: str, path: str, body=None, *, timeout: float = 30, **kw):
        """(status, decoded body) on a connection of its own, as the admin (Basic)."""
        kw.setdefault("basic", (self.user, self.password))
        return super().request(method, path, body, timeout=timeout, **kw)


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


"""The Ferry processes of a run: one ``ferry serve`` per host and the optional library client.

Each process runs inside its host's namespace (``ip netns exec`` execs it, so the PID we
hold is Ferry's own) in a session of its own, so a Ctrl-C on the terminal reaches only the
harness, which then stops them in order. Server output is appended to
``RUN/hosts/hK/server.out`` and ``server.err`` across restarts, with a marker line per start.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from typing import Callable, Optional

from .ferrycli import _help
from .history import History
from .netns import DB_NAME, PORT, Host, in_ns

READY_LINE = "ferry: serving"


def rss_kb(pid: int) -> Optional[int]:
    """The VmRSS of a process in KiB, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Server:
    """``ferry serve`` for one host; start/kill/pause/resume/stop record themselves in the
    history. ``expected_down`` distinguishes a nemesis kill from a crash."""

    def __init__(self, ferry_path: str, host: Host, peers: list[Host], history: History,
                 heartbeat: Optional[float], env_extra: Optional[dict] = None) -> None:
        self.host = host
        self.history = history
        self.argv = in_ns(host.ns, ferry_path, "serve", "--db", host.db, "--host", host.ip,
                          "--port", str(PORT), "--name", DB_NAME)
        # Since issue 19 a server refuses requests without credentials unless told otherwise;
        # the harness's hosts are its own, in namespaces it made.
        if "--allow-anonymous" in _help([ferry_path, "serve", "--help"]):
            self.argv += ["--allow-anonymous"]
        for p in peers:
            self.argv += ["--replicate", p.url]
        if heartbeat is not None:
            self.argv += ["--heartbeat", f"{heartbeat:g}"]
        self.env = dict(os.environ, **(env_extra or {}))
        self.env_extra = env_extra or {}
        self.out_path = os.path.join(host.dir, "server.out")
        self.err_path = os.path.join(host.dir, "server.err")
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self.paused = False
        self.expected_down = False
        self.exit_reported = False
        self.lock = threading.RLock()

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _ready_count(self) -> int:
        try:
            with open(self.out_path, encoding="utf-8", errors="replace") as f:
                return f.read().count(READY_LINE)
        except FileNotFoundError:
            return 0

    def start(self, reason: str = "start", ready_timeout: float = 20) -> bool:
        """Starts the server and waits until it prints that it is serving (polling its
        output with a deadline). Returns False if it exited or did not get ready in time."""
        with self.lock:
            self.starts += 1
            before = self._ready_count()
            marker = f"=== harness: start #{self.starts} ({reason}) at t={self.history.now():.3f}\n"
            for path in (self.out_path, self.err_path):
                with open(path, "a") as f:
                    f.write(marker)
            out = open(self.out_path, "ab")
            err = open(self.err_path, "ab")
            try:
                self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                             env=self.env, start_new_session=True)
            finally:
                out.close()
                err.close()
            self.paused = False
            self.expected_down = False
            self.exit_reported = False
            self.history.record("server", host=self.name, event="start", reason=reason, pid=self.proc.pid,
                                argv=self.argv, env=self.env_extra)
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self._ready_count() > before:
                self.history.record("server", host=self.name, event="ready", pid=self.proc.pid)
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.history.record("server", host=self.name, event="not-ready", pid=self.proc.pid,
                            rc=self.proc.poll())
        return False

    def kill(self, reason: str) -> None:
        """SIGKILL (nemesis ``kill``); the server stays down until restarted."""
        with self.lock:
            if not self.alive():
                return
            self.expected_down = True
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.paused = False
            self.history.record("server", host=self.name, event="killed", reason=reason,
                                pid=self.proc.pid, rc=self.proc.returncode)

    def pause(self, reason: str) -> None:
        with self.lock:
            if self.alive():
                self.proc.send_signal(signal.SIGSTOP)
                self.paused = True
                self.history.record("server", host=self.name, event="paused", reason=reason, pid=self.proc.pid)

    def resume(self, reason: str) -> None:
        with self.lock:
            if self.alive() and self.paused:
                self.proc.send_signal(signal.SIGCONT)
                self.history.record("server", host=self.name, event="resumed", reason=reason, pid=self.proc.pid)
            self.paused = False

    def check_exit(self) -> Optional[int]:
        """Records an exit nobody asked for (a crash) once; returns its status."""
        with self.lock:
            if self.proc is None or self.expected_down or self.exit_reported:
                return None
            rc = self.proc.poll()
            if rc is None:
                return None
            self.exit_reported = True
            self.history.record("server", host=self.name, event="exited", unexpected=True,
                                pid=self.proc.pid, rc=rc)
            return rc

    def stop(self, timeout: float = 10) -> Optional[int]:
        """SIGCONT + SIGTERM, then SIGKILL after ``timeout``; returns the exit status."""
        with self.lock:
            if self.proc is None:
                return None
            if self.alive():
                self.expected_down = True
                self.proc.send_signal(signal.SIGCONT)
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                self.history.record("server", host=self.name, event="stopped", pid=self.proc.pid,
                                    rc=self.proc.returncode)
            return self.proc.returncode


class LibClient:
    """``ferry-cluster-client`` in a host's namespace, driven by JSON lines on stdin.

    Answers come one per command, in order; a reader thread matches them to the pending
    commands. A command unanswered in time is reported ambiguous; its answer, if it comes
    later, is passed to ``on_late``. While a command is unanswered no new one is sent."""

    def __init__(self, path: str, host: Host, target: Host, db: str, log_dir: str,
                 heartbeat: Optional[float], history: History) -> None:
        self.host, self.target, self.db, self.history = host, target, db, history
        self.argv = in_ns(host.ns, path, "--db", db, "--target", target.url)
        if heartbeat is not None:
            self.argv += ["--heartbeat", f"{heartbeat:g}"]
        self.err_path = os.path.join(log_dir, "client.err")
        self.proc: Optional[subprocess.Popen] = None
        self._pending: "queue.Queue[tuple[int, dict]]" = queue.Queue()
        self._answers: dict[int, "queue.Queue[dict]"] = {}
        self._unanswered = 0
        self._lock = threading.Lock()
        self._seq = 0
        self.on_late: Optional[Callable[[int, dict], None]] = None
        self._timed_out: set[int] = set()

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        err = open(self.err_path, "ab")
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, text=True, bufsize=1, start_new_session=True)
        finally:
            err.close()
        self.history.record("server", host="lib", event="start", pid=self.proc.pid, argv=self.argv)
        threading.Thread(target=self._read, name="libclient-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc and self.proc.stdout
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                answer = {"ok": False, "error": f"unparsable answer: {line[:200]}"}
            try:
                seq, _ = self._pending.get_nowait()
            except queue.Empty:
                continue
            with self._lock:
                self._unanswered -= 1
                late = seq in self._timed_out
                box = self._answers.pop(seq, None)
            if late:
                if self.on_late:
                    self.on_late(seq, answer)
            elif box is not None:
                box.put(answer)

    def busy(self) -> bool:
        """True while an earlier command is still unanswered."""
        with self._lock:
            return self._unanswered > 0

    def request(self, command: dict, timeout: float) -> tuple[int, Optional[dict]]:
        """Sends one command; returns (sequence number, answer or None if none in time)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
            box: "queue.Queue[dict]" = queue.Queue()
            self._answers[seq] = box
            self._unanswered += 1
        self._pending.put((seq, command))
        try:
            assert self.proc and self.proc.stdin
            self.proc.stdin.write(json.dumps(command, separators=(",", ":")) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            return seq, {"ok": False, "error": f"client stdin closed: {e}", "_broken": True}
        try:
            return seq, box.get(timeout=timeout)
        except queue.Empty:
            with self._lock:
                self._timed_out.add(seq)
            return seq, None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15) -> Optional[int]:
        """Closes stdin (the client stops and exits 0); SIGKILL if it does not in time."""
        if self.proc is None:
            return None
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.history.record("server", host="lib", event="stopped", pid=self.proc.pid, rc=self.proc.returncode)
        return self.proc.returncode

"""The nemesis: a seeded schedule of faults, and how each is applied, undone and healed.

Fault kinds (each with a start and an end time inside the fault window; they may overlap,
except that a host never has two faults of the same group at once: ``kill``/``pause``
share a group, ``link-down``, ``disk-full`` and ``delay`` have one each):

- ``partition``: the hosts split in two groups; nftables rules in the switch namespace's
  ``bridge`` table drop IP traffic between them, both ways;
- ``partition-oneway``: the same, one way only (A→B dropped, B→A passes);
- ``loss``: ``numgen random mod 100 < P`` drops P % (10–40) of one host's packets, both ways;
- ``delay``: one host's packets held D ms (50–300) by an NFQUEUE consumer (``delayq``) in
  the host's namespace, fed by an ``inet`` nft rule with ``queue … bypass`` or, where the
  kernel lacks nft's queue expression, by iptables-legacy's ``NFQUEUE --queue-bypass``;
- ``link-down``: the host's switch port set down, then up;
- ``kill``: SIGKILL of the host's server, restarted (same arguments and database) at the end;
- ``disk-full``: a filler file fills the host's tmpfs until ENOSPC; removed at the end;
- ``pause``: SIGSTOP of the server (5–15 s, longer than the heartbeat), then SIGCONT.

``heal`` ends every active fault, then sweeps: no rules, all ports up, no filler, nobody
stopped, and every server that is not running (killed or crashed) restarted.
"""

from __future__ import annotations

import errno
import os
import random
import select
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Optional

from .history import History
from .netns import Host, SetupError, Topology, in_ns, sh
from .servers import Server

KINDS = ("partition", "partition-oneway", "loss", "delay", "link-down", "kill", "disk-full", "pause")

# (shortest, longest) duration in seconds per kind.
LENGTHS = {"partition": (4, 15), "partition-oneway": (4, 12), "loss": (5, 15), "delay": (5, 15),
           "link-down": (3, 10), "kill": (3, 12), "disk-full": (4, 12), "pause": (5, 15)}

# Faults of one group never overlap on the same host.
GROUPS = {"kill": "process", "pause": "process", "link-down": "link", "disk-full": "disk",
          "delay": "delay"}

DELAYQ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delayq.py")


@dataclass
class Fault:
    """One scheduled fault; ``state`` holds what is needed to undo it once applied."""
    id: int
    kind: str
    start: float
    end: float
    params: dict
    until_heal: bool = False     # lasts until the heal instead of ending on its own
    state: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return {"id": self.id, "kind": self.kind, "start": round(self.start, 3),
                "end": "heal" if self.until_heal else round(self.end, 3), "params": self.params}


def parse_kinds(spec: str) -> list[str]:
    """``all`` | ``none`` | comma-separated kinds."""
    if spec == "all":
        return list(KINDS)
    if spec in ("none", ""):
        return []
    kinds = [k.strip() for k in spec.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown fault kind(s) {', '.join(bad)}; known: {', '.join(KINDS)}")
    return kinds


def plan(rng: random.Random, kinds: list[str], hosts: list[str], duration: float) -> list[Fault]:
    """The fault schedule: every enabled kind at least once (in random order), then random
    kinds, about one fault per 6 s of window, at random times (overlaps allowed). A fault
    that would outlast the window lasts until the heal, which undoes it."""
    if not kinds or duration < 8:
        return []
    count = max(len(kinds), round(duration / 6))
    sequence = rng.sample(kinds, len(kinds)) + [rng.choice(kinds) for _ in range(count - len(kinds))]
    busy: dict[tuple[str, str], list[tuple[float, float]]] = {}
    faults: list[Fault] = []
    for kind in sequence:
        lo, hi = LENGTHS[kind]
        for _attempt in range(6):
            length = rng.uniform(lo, hi)
            start = rng.uniform(1.0, max(1.5, duration - lo))
            end = min(start + length, duration)
            params = _params(rng, kind, hosts)
            group = GROUPS.get(kind)
            if group:
                slot = busy.setdefault((group, params["host"]), [])
                if any(s < end + 1 and start < e + 1 for s, e in slot):
                    continue
                slot.append((start, end))
            faults.append(Fault(id=0, kind=kind, start=start, end=end, params=params,
                                until_heal=start + length >= duration))
            break
    faults.sort(key=lambda f: f.start)
    for i, f in enumerate(faults, 1):
        f.id = i
    return faults


def _params(rng: random.Random, kind: str, hosts: list[str]) -> dict:
    if kind in ("partition", "partition-oneway"):
        shuffled = rng.sample(hosts, len(hosts))
        cut = rng.randint(1, len(hosts) - 1)
        return {"a": sorted(shuffled[:cut]), "b": sorted(shuffled[cut:])}
    host = rng.choice(hosts)
    if kind == "loss":
        return {"host": host, "percent": rng.randint(10, 40)}
    if kind == "delay":
        return {"host": host, "ms": rng.randint(50, 300), "directions": rng.choice([["out"], ["out", "in"]])}
    return {"host": host}


# -- delay backends -------------------------------------------------------------------------

class DelayBackend:
    """Sends a host's packets to an NFQUEUE: ``nft`` (inet table ``fcdelay`` in the host's
    namespace) or ``iptables-legacy`` (NFQUEUE target), whichever the kernel supports."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def detect(host: Host) -> tuple[Optional["DelayBackend"], str]:
        """Tries nft's queue expression, then iptables-legacy, in ``host``'s namespace."""
        probe = ("add table inet fcprobe\n"
                 "add chain inet fcprobe output { type filter hook output priority 0; policy accept; }\n"
                 "add rule inet fcprobe output oifname \"eth0\" queue num 65000 bypass\n")
        p = sh(in_ns(host.ns, "nft", "-f", "-"), input=probe, check=False)
        sh(in_ns(host.ns, "nft", "delete", "table", "inet", "fcprobe"), check=False)
        if p.returncode == 0:
            return DelayBackend("nft"), "nft queue"
        nft_error = p.stderr.strip().splitlines()[0] if p.stderr.strip() else "failed"
        if shutil.which("iptables-legacy"):
            spec = ["OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", "65000", "--queue-bypass"]
            q = sh(in_ns(host.ns, "iptables-legacy", "-w", "-A", *spec), check=False)
            if q.returncode == 0:
                sh(in_ns(host.ns, "iptables-legacy", "-w", "-D", *spec), check=False)
                return DelayBackend("iptables-legacy"), f"iptables-legacy NFQUEUE (nft queue: {nft_error})"
            return None, f"nft queue: {nft_error}; iptables-legacy NFQUEUE: {q.stderr.strip()}"
        return None, f"nft queue: {nft_error}; no iptables-legacy"

    def _legacy_specs(self, queue: int, directions: list[str]) -> list[list[str]]:
        specs = []
        if "out" in directions:
            specs.append(["OUTPUT", "-o", "eth0"])
        if "in" in directions:
            specs.append(["INPUT", "-i", "eth0"])
        return [s + ["-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"] for s in specs]

    def add(self, host: Host, queue: int, directions: list[str]) -> None:
        if self.kind == "nft":
            script = "add table inet fcdelay\n"
            for d, hook, iface in (("out", "output", "oifname"), ("in", "input", "iifname")):
                if d in directions:
                    script += (f"add chain inet fcdelay {hook} {{ type filter hook {hook} priority 0; policy accept; }}\n"
                               f"add rule inet fcdelay {hook} {iface} \"eth0\" queue num {queue} bypass\n")
            sh(in_ns(host.ns, "nft", "-f", "-"), input=script)
        else:
            for spec in self._legacy_specs(queue, directions):
                sh(in_ns(host.ns, "iptables-legacy", "-w", "-I", *spec))

    def remove(self, host: Host, queue: int, directions: list[str]) -> None:
        if self.kind == "nft":
            sh(in_ns(host.ns, "nft", "delete", "table", "inet", "fcdelay"), check=False)
        else:
            for spec in self._legacy_specs(queue, directions):
                sh(in_ns(host.ns, "iptables-legacy", "-w", "-D", *spec), check=False)

    def flush(self, host: Host) -> None:
        """Removes every delay rule of ``host`` (heal)."""
        if self.kind == "nft":
            sh(in_ns(host.ns, "nft", "delete", "table", "inet", "fcdelay"), check=False)
        else:
            for chain in ("OUTPUT", "INPUT"):
                sh(in_ns(host.ns, "iptables-legacy", "-w", "-F", chain), check=False)


# -- the nemesis ------------------------------------------------------------------------------

class Nemesis:
    """Applies a schedule (``run`` in a thread) and heals everything (``heal``)."""

    def __init__(self, topo: Topology, servers: dict[str, Server], history: History,
                 delay_backend: Optional[DelayBackend], venv_python: Optional[str], log_dir: str) -> None:
        self.topo, self.servers, self.history = topo, servers, history
        self.delay_backend, self.venv_python, self.log_dir = delay_backend, venv_python, log_dir
        self.active: dict[int, Fault] = {}
        self.lock = threading.Lock()
        self.errors: list[str] = []

    # scheduling

    def run(self, faults: list[Fault], stop: threading.Event, origin: float) -> None:
        """Applies each fault's start and end at its time (seconds after ``origin``, the
        history time the window began), until ``stop`` is set."""
        events = sorted([(f.start, 0, f) for f in faults]
                        + [(f.end, 1, f) for f in faults if not f.until_heal],
                        key=lambda e: (e[0], e[1], e[2].id))
        for at, is_end, fault in events:
            if stop.wait(timeout=max(0.0, origin + at - self.history.now())):
                return
            with self.lock:
                if is_end:
                    if fault.id in self.active:
                        self._end(fault, "scheduled")
                else:
                    self._start(fault)

    def _start(self, f: Fault) -> None:
        try:
            getattr(self, "_start_" + f.kind.replace("-", "_"))(f)
        except Exception as e:   # a harness/environment problem, not Ferry's
            self.errors.append(f"fault {f.id} {f.kind} start: {e}")
            self.history.record("fault", phase="error", id=f.id, kind=f.kind, params=f.params,
                                error=str(e), at="start")
            return
        self.active[f.id] = f
        self.history.record("fault", phase="start", id=f.id, kind=f.kind, params=f.params,
                            planned_end="heal" if f.until_heal else round(f.end, 3), state=_public(f.state))

    def _end(self, f: Fault, why: str) -> None:
        self.active.pop(f.id, None)
        try:
            getattr(self, "_end_" + f.kind.replace("-", "_"))(f)
        except Exception as e:
            self.errors.append(f"fault {f.id} {f.kind} end: {e}")
            self.history.record("fault", phase="error", id=f.id, kind=f.kind, error=str(e), at="end")
            return
        self.history.record("fault", phase="end", id=f.id, kind=f.kind, why=why, state=_public(f.state))

    def heal(self) -> tuple[list[int], list[str]]:
        """Ends every active fault, then makes sure nothing is left; returns the faults it
        ended and the servers found not running (killed or crashed) and restarted."""
        with self.lock:
            ended = [f.id for f in sorted(self.active.values(), key=lambda f: -f.start)]
            for f in sorted(self.active.values(), key=lambda f: -f.start):
                self._end(f, "heal")
            self.topo.flush_bridge_rules()
            for h in self.topo.hosts:
                if self.delay_backend:
                    self.delay_backend.flush(h)
                try:
                    self.topo.set_port(h, True)
                except SetupError as e:
                    self.errors.append(f"heal: port {h.name} up: {e}")
                filler = os.path.join(h.disk, "filler")
                if os.path.exists(filler):
                    os.remove(filler)
            restarted = []
            for s in self.servers.values():
                s.resume("heal")
            for s in self.servers.values():
                if not s.alive():
                    s.check_exit()
                    restarted.append(s.name)
                    if not s.start("restart at heal"):
                        self.errors.append(f"heal: server {s.name} did not get ready")
            return ended, restarted

    # network faults

    @staticmethod
    def _set(ips: list[str]) -> str:
        return "{ " + ", ".join(ips) + " }"

    def _ips(self, names: list[str]) -> list[str]:
        return [self.topo.host(n).ip for n in names]

    def _start_partition(self, f: Fault) -> None:
        a, b = self._set(self._ips(f.params["a"])), self._set(self._ips(f.params["b"]))
        f.state["handles"] = [self.topo.add_bridge_rule(f"ip saddr {a} ip daddr {b} drop"),
                              self.topo.add_bridge_rule(f"ip saddr {b} ip daddr {a} drop")]

    def _start_partition_oneway(self, f: Fault) -> None:
        a, b = self._set(self._ips(f.params["a"])), self._set(self._ips(f.params["b"]))
        f.state["handles"] = [self.topo.add_bridge_rule(f"ip saddr {a} ip daddr {b} drop")]

    def _start_loss(self, f: Fault) -> None:
        ip, p = self.topo.host(f.params["host"]).ip, f.params["percent"]
        f.state["handles"] = [
            self.topo.add_bridge_rule(f"ip saddr {ip} numgen random mod 100 < {p} drop"),
            self.topo.add_bridge_rule(f"ip daddr {ip} numgen random mod 100 < {p} drop")]

    def _end_rules(self, f: Fault) -> None:
        for h in f.state.get("handles", []):
            self.topo.delete_bridge_rule(h)

    _end_partition = _end_partition_oneway = _end_loss = _end_rules

    def _start_delay(self, f: Fault) -> None:
        if not self.delay_backend or not self.venv_python:
            raise SetupError("delay unavailable")
        host = self.topo.host(f.params["host"])
        queue = 100 + f.id
        err = open(os.path.join(self.log_dir, f"delayq-{f.id}-{host.name}.err"), "ab")
        try:
            proc = subprocess.Popen(in_ns(host.ns, self.venv_python, DELAYQ, "--queue", str(queue),
                                          "--delay-ms", str(f.params["ms"])),
                                    stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            err.close()
        f.state.update(queue=queue, proc=proc, pid=proc.pid)
        assert proc.stdout
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        line = proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            _stop_process(proc)
            raise SetupError(f"delay consumer did not start (see delayq-{f.id}-{host.name}.err)")
        self.delay_backend.add(host, queue, f.params["directions"])

    def _end_delay(self, f: Fault) -> None:
        host = self.topo.host(f.params["host"])
        assert self.delay_backend
        self.delay_backend.remove(host, f.state["queue"], f.params["directions"])
        proc = f.state["proc"]
        _stop_process(proc)
        out = proc.stdout.read().decode(errors="replace").strip() if proc.stdout else ""
        f.state["consumer"] = out

    def _start_link_down(self, f: Fault) -> None:
        self.topo.set_port(self.topo.host(f.params["host"]), False)

    def _end_link_down(self, f: Fault) -> None:
        self.topo.set_port(self.topo.host(f.params["host"]), True)

    # host faults

    def _start_kill(self, f: Fault) -> None:
        self.servers[f.params["host"]].kill(f"fault {f.id}")

    def _end_kill(self, f: Fault) -> None:
        s = self.servers[f.params["host"]]
        if not s.alive():
            f.state["ready"] = s.start(f"restart after fault {f.id}")

    def _start_pause(self, f: Fault) -> None:
        self.servers[f.params["host"]].pause(f"fault {f.id}")

    def _end_pause(self, f: Fault) -> None:
        self.servers[f.params["host"]].resume(f"fault {f.id}")

    def _start_disk_full(self, f: Fault) -> None:
        path = os.path.join(self.topo.host(f.params["host"]).disk, "filler")
        f.state["bytes"] = fill_until_enospc(path)

    def _end_disk_full(self, f: Fault) -> None:
        path = os.path.join(self.topo.host(f.params["host"]).disk, "filler")
        if os.path.exists(path):
            os.remove(path)


def fill_until_enospc(path: str) -> int:
    """Writes ``path`` until the filesystem is full (ENOSPC); returns the bytes written."""
    written = 0
    chunk = 1 << 20
    with open(path, "wb", buffering=0) as f:
        while chunk >= 512:
            try:
                written += f.write(b"\0" * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                chunk //= 8
    return written


def _stop_process(proc: subprocess.Popen, timeout: float = 5) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _public(state: dict) -> dict:
    """The JSON-able part of a fault's state (for the history)."""
    return {k: v for k, v in state.items() if isinstance(v, (int, float, str, list, bool, type(None)))}


def stop_delay_consumers(faults: list[Fault]) -> None:
    """Teardown safety: stops any consumer still running (normally none after heal)."""
    for f in faults:
        proc = f.state.get("proc")
        if proc is not None:
            _stop_process(proc)

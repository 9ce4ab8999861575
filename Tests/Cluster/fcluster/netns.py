"""Network namespaces: the private switch, the hosts, their tmpfs disks, and cleanup.

Layout of run slot ``S`` (prefix ``fcS``), which never touches the root namespace's
networking:

- ``fcS-sw``: a namespace holding bridge ``br0`` (the switch) and one port ``hK`` per host;
  the nemesis's nftables table ``bridge fcnemesis`` (chain ``forward``) lives here;
- ``fcS-hK``: host K's namespace, ``lo`` up and ``eth0`` (the other end of port ``hK``)
  with address ``10.201.S.K/24``;
- host K's disk: a tmpfs (source name ``fcS-hK-disk``, ``--disk-mib`` in size) mounted at
  ``RUN/hosts/hK/disk``.

The veth pairs are created inside the switch namespace with their peer placed directly
in the host's namespace, so no interface ever appears in the root namespace.

A slot is held with an ``flock`` on ``/run/ferry-cluster/slot-S.lock`` for the whole run,
so parallel runs never share a prefix, a subnet or a bridge; leftovers of a crashed run
in the same slot are removed before setup (processes in its namespaces, the namespaces,
its tmpfs mounts).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from typing import Optional, Sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))), "lib"))
from ferryd import SetupError, in_ns  # noqa: E402,F401  (Tests/lib, shared with the other Python checks)

LOCK_DIR = "/run/ferry-cluster"
MAX_SLOT = 250
NEMESIS_TABLE = "fcnemesis"
PORT = 4984
DB_NAME = "db"


class Unsupported(Exception):
    """This machine cannot run the harness at all (exit status 77, SKIPPED)."""


def sh(args: Sequence[str], *, check: bool = True, input: Optional[str] = None,
       timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs a command, capturing output; raises SetupError with its stderr if it fails."""
    p = subprocess.run(list(args), input=input, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise SetupError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def check_prerequisites() -> None:
    """Raises Unsupported unless we are root and ``ip netns`` and ``nft`` work."""
    if os.geteuid() != 0:
        raise Unsupported("cluster harness needs root, ip netns and nft (not root)")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            raise Unsupported(f"cluster harness needs root, ip netns and nft ({tool} not found)")
    probe = f"fcprobe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        if sh(["ip", "netns", "add", probe], check=False).returncode != 0:
            raise Unsupported("cluster harness needs root, ip netns and nft (ip netns add failed)")
        p = sh(in_ns(probe, "nft", "add", "table", "bridge", "probe"), check=False)
        if p.returncode != 0:
            raise Unsupported(f"cluster harness needs root, ip netns and nft (nft: {p.stderr.strip()})")
    finally:
        sh(["ip", "netns", "del", probe], check=False)


class SlotLock:
    """An exclusive run slot (1…250): the prefix ``fcS`` and subnet ``10.201.S.0/24``."""

    def __init__(self, slot: Optional[int] = None) -> None:
        os.makedirs(LOCK_DIR, exist_ok=True)
        candidates = [slot] if slot else range(1, MAX_SLOT + 1)
        for s in candidates:
            if not 1 <= s <= MAX_SLOT:
                raise SetupError(f"slot {s} out of range 1…{MAX_SLOT}")
            fd = os.open(os.path.join(LOCK_DIR, f"slot-{s}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.slot, self._fd = s, fd
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return
        raise SetupError(f"slot {slot} is in use" if slot else "no free run slot")

    @property
    def prefix(self) -> str:
        return f"fc{self.slot}"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class Host:
    """One simulated machine."""
    k: int
    name: str          # h1, h2, …
    ns: str            # fcS-hK
    ip: str            # 10.201.S.K
    port_name: str     # the switch port (veth end in the switch namespace)
    dir: str           # RUN/hosts/hK
    disk: str          # RUN/hosts/hK/disk (tmpfs)
    db: str            # RUN/hosts/hK/disk/ferry.db

    @property
    def url(self) -> str:
        return f"ws://{self.ip}:{PORT}/{DB_NAME}"

    @property
    def disk_source(self) -> str:
        return f"{self.ns}-disk"


def leftover_namespaces(prefix: str) -> list[str]:
    out = sh(["ip", "netns", "list"], check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(prefix + "-")]


def kill_namespace_processes(ns: str) -> None:
    """SIGKILLs every process inside ``ns`` (only the harness starts processes there)."""
    pids = sh(["ip", "netns", "pids", ns], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGCONT)
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def mounts_with_source_prefix(prefix: str) -> list[str]:
    """Mount points of the tmpfs disks of slot ``prefix`` (found by their source name)."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            src, mnt = line.split()[:2]
            if re.fullmatch(re.escape(prefix) + r"-h\d+-disk", src):
                out.append(mnt.replace("\\040", " "))
    return out


def cleanup_prefix(prefix: str) -> list[str]:
    """Removes every trace of a run with this prefix; returns what was removed."""
    removed = []
    for ns in leftover_namespaces(prefix):
        kill_namespace_processes(ns)
    for ns in leftover_namespaces(prefix):
        sh(["ip", "netns", "del", ns], check=False)
        removed.append(f"netns {ns}")
    for mnt in mounts_with_source_prefix(prefix):
        sh(["umount", "-l", mnt], check=False)
        removed.append(f"mount {mnt}")
    return removed


def cleanup_stale_slots() -> list[str]:
    """Removes the leftovers of every slot whose run is gone (its lock is free)."""
    slots = set()
    for line in sh(["ip", "netns", "list"], check=False).stdout.splitlines():
        m = re.match(r"fc(\d+)-", line)
        if m:
            slots.add(int(m.group(1)))
    with open("/proc/self/mounts") as f:
        for line in f:
            m = re.fullmatch(r"fc(\d+)-h\d+-disk", line.split()[0])
            if m:
                slots.add(int(m.group(1)))
    removed = []
    for s in sorted(slots):
        if not 1 <= s <= MAX_SLOT:
            continue
        try:
            lock = SlotLock(s)
        except SetupError:
            removed.append(f"slot {s} in use: left alone")
            continue
        try:
            removed += cleanup_prefix(lock.prefix)
        finally:
            lock.release()
    return removed


class Topology:
    """The switch and the hosts of one run; ``create`` builds them, ``destroy`` removes them."""

    def __init__(self, slot: int, n_hosts: int, run_dir: str, disk_mib: int) -> None:
        if not 2 <= n_hosts <= 100:
            raise SetupError("--hosts must be between 2 and 100")
        self.slot = slot
        self.prefix = f"fc{slot}"
        self.switch_ns = f"{self.prefix}-sw"
        self.disk_mib = disk_mib
        self.hosts = []
        for k in range(1, n_hosts + 1):
            d = os.path.join(run_dir, "hosts", f"h{k}")
            self.hosts.append(Host(k=k, name=f"h{k}", ns=f"{self.prefix}-h{k}",
                                   ip=f"10.201.{slot}.{k}", port_name=f"h{k}", dir=d,
                                   disk=os.path.join(d, "disk"),
                                   db=os.path.join(d, "disk", "ferry.db")))

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def create(self) -> list[str]:
        """Builds everything (after removing leftovers of this slot); returns the leftovers."""
        leftovers = cleanup_prefix(self.prefix)
        sw = self.switch_ns
        sh(["ip", "netns", "add", sw])
        sh(["ip", "-n", sw, "link", "set", "lo", "up"])
        sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        for h in self.hosts:
            sh(["ip", "netns", "add", h.ns])
            sh(["ip", "-n", sw, "link", "add", h.port_name, "type", "veth",
                "peer", "name", "eth0", "netns", h.ns])
            sh(["ip", "-n", sw, "link", "set", h.port_name, "master", "br0"])
            sh(["ip", "-n", sw, "link", "set", h.port_name, "up"])
            sh(in_ns(h.ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"), check=False)
            sh(["ip", "-n", h.ns, "addr", "add", f"{h.ip}/24", "dev", "eth0"])
            sh(["ip", "-n", h.ns, "link", "set", "eth0", "up"])
            sh(["ip", "-n", h.ns, "link", "set", "lo", "up"])
            os.makedirs(h.disk, exist_ok=True)
            sh(["mount", "-t", "tmpfs", "-o", f"size={self.disk_mib}m,mode=0755",
                h.disk_source, h.disk])
        sh(["ip", "-n", sw, "link", "set", "br0", "up"])
        self.nft(f"add table bridge {NEMESIS_TABLE}\n"
                 f"add chain bridge {NEMESIS_TABLE} forward "
                 "{ type filter hook forward priority 0; policy accept; }\n")
        return leftovers

    def nft(self, script: str, ns: Optional[str] = None) -> str:
        """Runs an nft script in the switch namespace (or ``ns``); returns its output."""
        return sh(in_ns(ns or self.switch_ns, "nft", "--echo", "--handle", "-f", "-"),
                  input=script).stdout

    def add_bridge_rule(self, rule: str) -> int:
        """Adds a rule to the switch's forward chain; returns its handle."""
        out = self.nft(f"add rule bridge {NEMESIS_TABLE} forward {rule}\n")
        m = re.search(r"# handle (\d+)", out)
        if not m:
            raise SetupError(f"nft did not echo a handle for rule {rule!r}: {out!r}")
        return int(m.group(1))

    def delete_bridge_rule(self, handle: int) -> None:
        sh(in_ns(self.switch_ns, "nft", "delete", "rule", "bridge", NEMESIS_TABLE, "forward",
                 "handle", str(handle)), check=False)

    def flush_bridge_rules(self) -> None:
        sh(in_ns(self.switch_ns, "nft", "flush", "chain", "bridge", NEMESIS_TABLE, "forward"),
           check=False)

    def set_port(self, host: Host, up: bool) -> None:
        """Plugs (up) or unplugs (down) a host's switch port."""
        sh(["ip", "-n", self.switch_ns, "link", "set", host.port_name, "up" if up else "down"])

    def destroy(self) -> None:
        """Kills what still runs in the namespaces, deletes them, unmounts the disks."""
        cleanup_prefix(self.prefix)

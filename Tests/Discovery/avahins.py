"""Avahi inside one network namespace, with a private D-Bus system bus (for Tests/Discovery/check).

avahi-daemon talks to its clients (avahi-browse, avahi-publish) only over the D-Bus *system* bus,
and keeps its pid file and socket in the compiled-in ``/run/avahi-daemon``. To run one per test
namespace without touching the machine's own dbus or avahi (running or not):

- a ``dbus-daemon`` is started with a config of our own (``WORK/dbus.conf``): a system-type bus
  listening only on ``unix:path=WORK/bus.sock``, no activation, no syslog, and a policy that lets
  root (everything here runs as root) own and call anything. Unix path sockets are not
  namespaced by network namespaces, so the path is all a client needs; the daemon still runs
  inside the namespace, so the harness's namespace cleanup kills it after a crash;
- ``avahi-daemon --no-drop-root --no-chroot --no-rlimits -f WORK/avahi-daemon.conf`` runs in
  the namespace under ``unshare -m --propagation private``, with a private tmpfs on ``/run``
  (so its pid file and socket are its own and nothing is created in the root namespace's
  ``/run``), and ``DBUS_SYSTEM_BUS_ADDRESS`` pointing at the private bus; its config: IPv4
  only, ``allow-interfaces=eth0``, no wide-area, no reflector, its own host name, logging to
  standard error (``WORK/avahi.err``);
- clients (``avahi-browse``) run in the namespace with the same ``DBUS_SYSTEM_BUS_ADDRESS``.

Needs ``dbus-daemon`` (package dbus), ``avahi-daemon`` and ``avahi-browse`` (avahi-daemon,
avahi-utils) and ``unshare`` (util-linux). Install with a ``policy-rc.d`` that forbids starting
services (Docker images have one) so the package does not start a system avahi on the real
interfaces; this module never starts anything outside the namespace it is given.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import time
from typing import Optional

DBUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={sock}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="false"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""

AVAHI_CONF = """[server]
host-name={hostname}
use-ipv4=yes
use-ipv6=no
allow-interfaces={interface}
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000

[wide-area]
enable-wide-area=no

[publish]
publish-hinfo=no
publish-workstation=no
publish-addresses=yes

[reflector]
enable-reflector=no
"""


def unavailable() -> Optional[str]:
    """None if avahi can be run here, else why not."""
    missing = [t for t in ("dbus-daemon", "avahi-daemon", "avahi-browse", "unshare") if shutil.which(t) is None]
    if missing:
        return (f"{', '.join(missing)} not found (apt-get install avahi-daemon avahi-utils dbus, "
                "with a policy-rc.d that keeps the system avahi from starting)")
    return None


def unescape(label: str) -> str:
    """avahi-browse -p escapes characters of names as \\DDD (decimal) and \\C."""
    return re.sub(r"\\(\d{3}|.)", lambda m: chr(int(m.group(1))) if m.group(1).isdigit() else m.group(1), label)


def parse_browse(out: str) -> list[dict]:
    """The resolved (``=``) lines of ``avahi-browse -p -r``: one dict per instance and interface
    with name, type, domain, host, address, port and txt ({key: value})."""
    entries = []
    for line in out.splitlines():
        if not line.startswith("="):
            continue
        parts = line.split(";", 9)
        if len(parts) < 10:
            continue
        _, iface, proto, name, stype, domain, host, address, port, txt = parts
        pairs = {}
        for raw in re.findall(r'"((?:[^"\\]|\\.)*)"', txt):
            item = re.sub(r"\\(.)", r"\1", raw)
            key, eq, value = item.partition("=")
            pairs[key] = value if eq else None
        entries.append({"interface": iface, "protocol": proto, "name": unescape(name), "type": stype,
                        "domain": domain, "host": host, "address": address, "port": int(port), "txt": pairs})
    return entries


class AvahiInNamespace:
    """A private dbus-daemon plus avahi-daemon in namespace ``ns``; files under ``work``."""

    def __init__(self, ns: str, work: str, hostname: str, interface: str = "eth0") -> None:
        self.ns, self.work, self.hostname, self.interface = ns, work, hostname, interface
        self.sock = os.path.join(work, "bus.sock")
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={self.sock}")
        self.dbus: Optional[subprocess.Popen] = None
        self.avahi: Optional[subprocess.Popen] = None

    def _ns(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *args]

    def start(self, timeout: float = 15) -> None:
        """Starts both daemons; raises RuntimeError (with the logs' tails) if either does not come up."""
        os.makedirs(self.work, exist_ok=True)
        dbus_conf = os.path.join(self.work, "dbus.conf")
        avahi_conf = os.path.join(self.work, "avahi-daemon.conf")
        with open(dbus_conf, "w") as f:
            f.write(DBUS_CONF.format(sock=self.sock))
        with open(avahi_conf, "w") as f:
            f.write(AVAHI_CONF.format(hostname=self.hostname, interface=self.interface))
        if os.path.exists(self.sock):
            os.unlink(self.sock)

        with open(os.path.join(self.work, "dbus.err"), "ab") as err:
            self.dbus = subprocess.Popen(
                self._ns("dbus-daemon", f"--config-file={dbus_conf}", "--nofork", "--nopidfile", "--nosyslog",
                         "--print-address=1"),
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        assert self.dbus.stdout
        ready, _, _ = select.select([self.dbus.stdout], [], [], timeout)
        address = self.dbus.stdout.readline().decode(errors="replace").strip() if ready else ""
        if not address.startswith("unix:"):
            raise RuntimeError(f"dbus-daemon did not start: {address!r} {self._tail('dbus.err')}")

        script = ("mount -t tmpfs -o size=1m,mode=0755 avahi-run /run && mkdir -p /run/avahi-daemon && "
                  f"exec avahi-daemon --no-drop-root --no-chroot --no-rlimits --no-proc-title -f '{avahi_conf}'")
        err_path = os.path.join(self.work, "avahi.err")
        with open(err_path, "ab") as err:
            self.avahi = subprocess.Popen(self._ns("unshare", "-m", "--propagation", "private", "sh", "-c", script),
                                          stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.env, start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with open(err_path, errors="replace") as f:
                if "Server startup complete" in f.read():
                    return
            if self.avahi.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"avahi-daemon did not start (exit {self.avahi.poll()}): {self._tail('avahi.err')}")

    def _tail(self, name: str, lines: int = 8) -> str:
        try:
            with open(os.path.join(self.work, name), errors="replace") as f:
                return " | ".join(f.read().splitlines()[-lines:])
        except OSError:
            return ""

    def browse(self, service_type: str, timeout: float = 10) -> tuple[list[dict], str]:
        """``avahi-browse -r -t -p -k SERVICE_TYPE`` in the namespace: (resolved entries, raw output)."""
        p = subprocess.run(self._ns("avahi-browse", "-r", "-t", "-p", "-k", service_type),
                           capture_output=True, text=True, timeout=timeout, env=self.env)
        if p.returncode != 0:
            raise RuntimeError(f"avahi-browse: exit {p.returncode}: {p.stderr.strip()}")
        return parse_browse(p.stdout), p.stdout

    def browse_until(self, service_type: str, want, deadline_s: float) -> tuple[list[dict], str, float]:
        """Repeats browse until ``want(entries)`` is true or ``deadline_s`` passes; returns the last
        (entries, raw output) and the seconds taken."""
        t0 = time.monotonic()
        while True:
            entries, raw = self.browse(service_type)
            if want(entries) or time.monotonic() - t0 > deadline_s:
                return entries, raw, time.monotonic() - t0
            time.sleep(0.5)

    def stop(self) -> None:
        for p in (self.avahi, self.dbus):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.avahi = self.dbus = None

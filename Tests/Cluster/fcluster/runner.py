"""One seeded run: set up, write under faults, heal, wait for convergence, check, tear down.

Exit statuses: 0 pass, 1 divergence or loss (or any other checker finding), 2 setup error
(or a harness error during a run that otherwise passed), 77 skipped (not root / no
``ip netns`` / no ``nft``).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import re
import shlex
import shutil
import signal
import sys
import threading
import traceback
from dataclasses import asdict, dataclass, field
from typing import Optional

from . import checker
from .ferrycli import DROP_DELETIONS_ENV, Ferry
from .history import History, load as load_history, of_type
from .nemesis import DelayBackend, Fault, Nemesis, parse_kinds, plan, stop_delay_consumers
from .netns import SetupError, SlotLock, Topology, Unsupported, check_prerequisites, sh
from .servers import LibClient, Server, rss_kb
from .workload import Workload

EXIT_PASS, EXIT_FAIL, EXIT_SETUP, EXIT_SKIP = 0, 1, 2, 77
DEFAULT_OUT_BASE = "/tmp/ferry-cluster"
POLL_INTERVAL = 0.25
# Ferry checkpoints its WAL only from 64 MiB on (8192 pages of 8 KiB) and forces it at four
# times that: a smaller disk fills up with WAL without any fault.
DEFAULT_DISK_MIB = 320


@dataclass
class RunOptions:
    hosts: int = 3
    topology: str = "mesh"
    seed: int = 1
    duration: float = 60
    docs: int = 200
    faults: str = "all"
    plant: Optional[str] = None
    out: Optional[str] = None
    bin: str = "/work/main/.build/release"
    converge_timeout: float = 60
    settle: float = 3.0
    slot: Optional[int] = None
    heartbeat: float = 2.0
    disk_mib: int = DEFAULT_DISK_MIB
    keep_dbs: bool = False
    venv_python: Optional[str] = None
    script: str = "Tests/Cluster/cluster"
    quiet: bool = False
    skip_prereq_check: bool = field(default=False, repr=False)

    def rerun_command(self) -> str:
        argv = [self.script, "run", "--hosts", str(self.hosts), "--topology", self.topology,
                "--seed", str(self.seed), "--duration", f"{self.duration:g}", "--docs", str(self.docs),
                "--faults", self.faults]
        if self.plant:
            argv += ["--plant", self.plant]
        argv += ["--bin", self.bin, "--converge-timeout", f"{self.converge_timeout:g}"]
        if self.disk_mib != DEFAULT_DISK_MIB:
            argv += ["--disk-mib", str(self.disk_mib)]
        return shlex.join(argv)


def parse_plant(spec: Optional[str], hosts: int) -> dict[str, dict]:
    """``drop-deletions:hK`` → {"hK": {FERRY_TEST_DROP_INCOMING_DELETIONS: "1"}}."""
    if not spec:
        return {}
    m = re.fullmatch(r"drop-deletions:h(\d+)", spec)
    if not m or not 1 <= int(m.group(1)) <= hosts:
        raise SetupError(f"--plant {spec!r}: expected drop-deletions:hK with 1 ≤ K ≤ {hosts}")
    return {f"h{m.group(1)}": {DROP_DELETIONS_ENV: "1"}}


def peers_of(topo: Topology, kind: str):
    """Who each host replicates with: everyone else (mesh) or its successor (ring; the
    successor's listener serves the other direction on the same connection)."""
    hs = topo.hosts
    if kind == "mesh":
        return {h.name: [p for p in hs if p is not h] for h in hs}
    if kind == "ring":
        return {h.name: [hs[(i + 1) % len(hs)]] for i, h in enumerate(hs)}
    raise SetupError(f"unknown topology {kind!r} (mesh or ring)")


def _prepare_run_dir(path: str) -> None:
    """Creates an empty run directory; an old one is removed only if it is a run's."""
    path = os.path.abspath(path)
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    if path == repo or path.startswith(repo + os.sep):
        raise SetupError(f"--out {path} is inside the repository; use a directory outside it")
    if os.path.exists(path):
        entries = os.listdir(path)
        if entries and not ({"history.jsonl", "hosts"} & set(entries)):
            raise SetupError(f"--out {path} exists and does not look like a run directory")
        with open("/proc/self/mounts") as f:
            for line in f:
                src, mnt = line.split()[:2]
                if mnt.startswith(path + os.sep) and re.fullmatch(r"fc\d+-h\d+-disk", src):
                    sh(["umount", "-l", mnt], check=False)
        shutil.rmtree(path)
    os.makedirs(path)


class Run:
    """The state of one run; ``execute`` returns the exit status."""

    def __init__(self, opts: RunOptions) -> None:
        self.opts = opts
        self.log_prefix = f"[seed {opts.seed} {opts.hosts}:{opts.topology}]"
        self.slot: Optional[SlotLock] = None
        self.topo: Optional[Topology] = None
        self.history: Optional[History] = None
        self.servers: dict[str, Server] = {}
        self.lib: Optional[LibClient] = None
        self.schedule: list[Fault] = []
        self.nemesis: Optional[Nemesis] = None
        self.stop_window = threading.Event()
        self.stop_sampler = threading.Event()
        self.torn_down = False
        self.harness_errors: list[str] = []
        self.run_dir = ""
        self.notes: list[str] = []
        self.plants: dict[str, dict] = {}
        self.restarted: list[str] = []
        self._keep_dbs = False

    def log(self, msg: str) -> None:
        if not self.opts.quiet:
            print(f"{self.log_prefix} {msg}", file=sys.stderr, flush=True)

    # -- main -----------------------------------------------------------------------------

    def execute(self) -> int:
        opts = self.opts
        if not opts.skip_prereq_check:
            try:
                check_prerequisites()
            except Unsupported as e:
                print(f"SKIPPED: {e}", flush=True)
                return EXIT_SKIP
        atexit.register(self.teardown)
        previous = {s: signal.signal(s, _raise_exit) for s in (signal.SIGTERM, signal.SIGHUP)}
        try:
            return self._execute()
        except SetupError as e:
            print(f"SETUP ERROR: {e}", file=sys.stderr, flush=True)
            if self.history:
                self.history.record("setup-error", error=str(e))
            self._write_result({"status": "error", "exit_code": EXIT_SETUP, "error": str(e)})
            return EXIT_SETUP
        except Exception as e:     # a harness bug must never look like a Ferry failure (exit 1)
            traceback.print_exc()
            print(f"HARNESS ERROR: {e!r}", file=sys.stderr, flush=True)
            if self.history:
                self.history.record("harness-error", error=repr(e))
            self._write_result({"status": "error", "exit_code": EXIT_SETUP, "error": f"harness error: {e!r}"})
            return EXIT_SETUP
        finally:
            self.teardown()
            for s, h in previous.items():
                signal.signal(s, h)

    def _execute(self) -> int:
        ferry = Ferry(self.opts.bin)
        self._setup(ferry)
        self._start_processes(ferry)
        workload = self._fault_window(ferry)
        heal_t = self._heal(workload)
        states, synced = self._await_convergence(ferry, heal_t)
        return self._verdict(ferry, states, synced, workload)

    def _setup(self, ferry: Ferry) -> None:
        """Slot, run directory, history, namespaces, fault schedule, meta record."""
        opts, caps = self.opts, ferry.caps
        self.plants = parse_plant(opts.plant, opts.hosts)
        kinds = parse_kinds(opts.faults)
        self.slot = SlotLock(opts.slot)
        self.run_dir = os.path.abspath(opts.out or os.path.join(DEFAULT_OUT_BASE, f"{self.slot.prefix}-seed{opts.seed}"))
        _prepare_run_dir(self.run_dir)
        self.log_prefix = f"[{self.slot.prefix} seed {opts.seed} {opts.hosts}:{opts.topology}]"
        self.history = h = History(os.path.join(self.run_dir, "history.jsonl"))
        self.topo = topo = Topology(self.slot.slot, opts.hosts, self.run_dir, opts.disk_mib)
        leftovers = topo.create()
        if leftovers:
            self.log(f"removed leftovers of a previous run: {', '.join(leftovers)}")
        self.notes = list(caps.notes)
        if self.plants and not caps.drop_deletions_env:
            self.notes.append(f"{DROP_DELETIONS_ENV} not found in the ferry binary: the planted bug may be inert")
        self.delay_backend, self.delay_how = None, "not requested"
        if "delay" in kinds:
            if not opts.venv_python:
                self.delay_how = "NetfilterQueue unavailable (no venv python)"
            else:
                self.delay_backend, self.delay_how = DelayBackend.detect(topo.hosts[0])
            if self.delay_backend is None:
                kinds.remove("delay")
                self.notes.append(f"delay faults skipped: {self.delay_how}")
        self.schedule = plan(random.Random(f"{opts.seed}:nemesis"), kinds, [x.name for x in topo.hosts],
                             opts.duration)
        self.heartbeat = opts.heartbeat if caps.heartbeat else None
        h.record("meta", config={"seed": opts.seed, "hosts": opts.hosts, "topology": opts.topology,
                                 "duration": opts.duration, "docs": opts.docs, "faults": opts.faults,
                                 "plant": opts.plant, "converge_timeout": opts.converge_timeout,
                                 "settle": opts.settle, "heartbeat": self.heartbeat, "bin": ferry.bin_dir,
                                 "disk_mib": opts.disk_mib},
                 rerun=opts.rerun_command(), slot=self.slot.slot, prefix=self.slot.prefix,
                 run_dir=self.run_dir, wall_start=h.wall0, capabilities=caps.as_dict(),
                 delay_backend=self.delay_how, notes=self.notes,
                 hosts={x.name: {"ns": x.ns, "ip": x.ip, "db": x.db} for x in topo.hosts},
                 schedule=[f.describe() for f in self.schedule])
        self.log(f"run dir {self.run_dir}; {len(self.schedule)} faults planned; delay: {self.delay_how}")

    def _start_processes(self, ferry: Ferry) -> None:
        """The servers (each waited for), the library client, the RSS sampler."""
        opts, topo, h = self.opts, self.topo, self.history
        assert topo and h
        peers = peers_of(topo, opts.topology)
        for host in topo.hosts:
            self.servers[host.name] = Server(ferry.path, host, peers[host.name], h, self.heartbeat,
                                             env_extra=self.plants.get(host.name))
        for s in self.servers.values():
            if not s.start("initial"):
                raise SetupError(f"server {s.name} did not start; see {s.err_path}")
        if ferry.caps.client:
            place = random.Random(f"{opts.seed}:lib-place")
            home, target = place.choice(topo.hosts), place.choice(topo.hosts)
            lib_dir = os.path.join(self.run_dir, "libclient")
            os.makedirs(lib_dir)
            self.lib = LibClient(ferry.caps.client, home, target, os.path.join(lib_dir, "client.db"), lib_dir,
                                 opts.heartbeat if ferry.caps.client_heartbeat else None, h)
            self.lib.start()
            h.record("lib-placement", home=home.name, target=target.name)
            self.log(f"library client in {home.name} replicating with {target.name}")
        self.sampler = threading.Thread(target=self._sample, name="sampler", daemon=True)
        self.sampler.start()

    def _fault_window(self, ferry: Ferry) -> Workload:
        """Workload and nemesis for --duration seconds; returns once both have stopped."""
        opts, topo, h = self.opts, self.topo, self.history
        assert topo and h
        self.nemesis = Nemesis(topo, self.servers, h, self.delay_backend, opts.venv_python, self.run_dir)
        workload = Workload(opts.seed, ferry, topo, self.lib, h, opts.docs, os.path.join(self.run_dir, "attachments"))
        origin = h.record("window-start", duration=opts.duration)["t"]
        workload.start(self.stop_window)
        nem_thread = threading.Thread(target=self.nemesis.run, args=(self.schedule, self.stop_window, origin),
                                      name="nemesis", daemon=True)
        nem_thread.start()
        self.log(f"servers up; workload and nemesis running for {opts.duration:g}s")
        self.stop_window.wait(opts.duration)
        self.stop_window.set()
        h.record("window-end")
        nem_thread.join()
        workload.join()
        return workload

    def _heal(self, workload: Workload) -> float:
        """Undoes every fault; returns the heal time (the start of time-to-converge)."""
        assert self.history and self.nemesis
        self.history.record("heal-start")
        ended, self.restarted = self.nemesis.heal()
        heal_t = self.history.record("heal", ended_faults=ended, restarted=self.restarted)["t"]
        self.harness_errors += self.nemesis.errors
        self.log(f"healed (ended faults {ended or 'none'}, restarted crashed servers {self.restarted or 'none'}); "
                 f"{workload.counts} ops; polling for convergence")
        return heal_t

    def _await_convergence(self, ferry: Ferry, heal_t: float) -> tuple[dict, dict]:
        """Polls the states (and asks the library client to wait until synced); saves the
        final states. Returns them and the library client's wait-synced answer."""
        assert self.history
        synced: dict = {"done": threading.Event()}
        if self.lib is not None:
            threading.Thread(target=self._lib_wait_synced, args=(synced,), daemon=True).start()
        states, conv = self._converge(ferry, heal_t)
        self.history.record("converge", **conv)
        if self.lib is not None:     # give its wait-synced a last chance to answer
            synced["done"].wait(max(0.0, min(10.0, heal_t + self.opts.converge_timeout - self.history.now())))
        checker.save_states(states, os.path.join(self.run_dir, "states"))
        return states, synced

    def _verdict(self, ferry: Ferry, states: dict, synced: dict, workload: Workload) -> int:
        """Runs the checker, prints and saves the report and result.json; the exit status."""
        assert self.history
        self.stop_sampler.set()
        self.sampler.join()
        history = load_history(self.history.path)
        verdict = checker.check(history, states)
        rss = rss_summary(history)
        unexpected = [r for r in of_type(history, "server") if r.get("unexpected")]
        fault_errors = [r for r in of_type(history, "fault") if r.get("phase") == "error"]
        passed = verdict.passed
        code = EXIT_PASS if passed else EXIT_FAIL
        if passed and self.harness_errors:
            code = EXIT_SETUP
        lines = [checker.report(verdict, history, states).rstrip("\n")]
        if unexpected:
            lines.append("servers that exited unasked: " + ", ".join(
                f"{r['host']} rc={r.get('rc')} at {r['t']:.1f}s" for r in unexpected))
        if self.harness_errors:
            lines.append("HARNESS ERRORS (a failure may be the harness's): " + "; ".join(self.harness_errors))
        if self.lib is not None:
            lines.append(f"library client wait-synced: {synced.get('answer', 'no answer yet')}")
        lines.append("rss (MiB, start/max/end) " + " ".join(
            f"{k}={v['start_kb'] / 1024:.0f}/{v['max_kb'] / 1024:.0f}/{v['end_kb'] / 1024:.0f}"
            for k, v in sorted(rss.items())))
        lines.append("largest WAL (MiB) " + " ".join(f"{k}={v['max_wal_kb'] / 1024:.1f}" for k, v in sorted(rss.items())))
        lines.append(f"ops: {workload.counts}; faults: {len(self.schedule)} planned, {len(fault_errors)} errors")
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.run_dir, "report.txt"), "w") as f:
            f.write(text)
        print(text, end="", flush=True)
        self._write_result({
            "status": "pass" if passed else "fail", "exit_code": code,
            "converged": verdict.converged, "time_to_converge": verdict.time_to_converge,
            "classes": checker.classes(verdict), "findings": verdict.counts(),
            "bad_docs": verdict.bad_docs(),
            "finding_details": [asdict(f) for f in verdict.findings[:500]],
            "rss": rss, "ops": workload.counts, "faults": [f.describe() for f in self.schedule],
            "fault_errors": fault_errors, "harness_errors": self.harness_errors,
            "unexpected_exits": unexpected, "capabilities": ferry.caps.as_dict(), "delay_backend": self.delay_how,
            "notes": self.notes + verdict.notes, "lib_wait_synced": synced.get("answer"),
            "restarted_at_heal": self.restarted})
        self._keep_dbs = not passed or self.opts.keep_dbs
        return code

    # -- helpers ------------------------------------------------------------------------------

    def _sample(self) -> None:
        """Every second: each server's RSS and its disk's use (WAL size, tmpfs used), and
        whether a server exited unasked."""
        assert self.history
        while not self.stop_sampler.is_set():
            for s in list(self.servers.values()):
                if s.check_exit() is not None:
                    self.log(f"server {s.name} exited unasked (rc {s.proc.returncode if s.proc else '?'})")
                pid = s.pid
                if pid and s.alive():
                    kb = rss_kb(pid)
                    if kb is not None:
                        self.history.record("rss", host=s.name, pid=pid, kb=kb, **disk_usage(s.host))
            self.stop_sampler.wait(1.0)

    def _lib_wait_synced(self, out: dict) -> None:
        assert self.lib and self.history
        _, answer = self.lib.request({"op": "wait-synced", "timeout": self.opts.converge_timeout},
                                     timeout=self.opts.converge_timeout + 15)
        out["answer"] = answer
        self.history.record("lib-synced", answer=answer)
        out["done"].set()

    def _participants(self) -> dict[str, str]:
        assert self.topo
        dbs = {h.name: h.db for h in self.topo.hosts}
        if self.lib is not None:
            dbs["lib"] = self.lib.db
        return dbs

    def _converge(self, ferry: Ferry, heal_t: float) -> tuple[dict, dict]:
        """Polls every participant's state until all agree and stay unchanged for
        ``settle`` seconds, or the timeout passes. Time to converge = from heal to the
        first poll of the final agreeing streak."""
        assert self.history
        h, opts = self.history, self.opts
        deadline = heal_t + opts.converge_timeout
        agreed_at: Optional[float] = None
        agreed_fp: Optional[str] = None
        polls, errors, last_divergent = 0, 0, None
        states: dict = {}
        while True:
            t = h.now()
            polls += 1
            states, failed = {}, []
            for name, db in self._participants().items():
                try:
                    states[name] = ferry.state(db)
                except Exception as e:
                    failed.append(f"{name}: {e}")
            divergent = checker.divergent_docs(states) if not failed else None
            if failed:
                errors += 1
                agreed_fp = None
            elif not divergent:
                fp = checker.fingerprint(states)
                if fp != agreed_fp:
                    agreed_fp, agreed_at = fp, t
                elif t - agreed_at >= opts.settle:
                    break
            else:
                agreed_fp = None
                last_divergent = len(divergent)
            if t >= deadline:
                break
            wait = POLL_INTERVAL - (h.now() - t)
            if wait > 0:
                self.stop_sampler.wait(wait)
        converged = agreed_fp is not None
        ttc = round(agreed_at - heal_t, 3) if converged and agreed_at is not None else None
        self.log(f"converged in {ttc:.2f}s" if converged else
                 f"NOT converged after {opts.converge_timeout:g}s ({last_divergent} documents differ)")
        return states, {"converged": converged, "time_to_converge": ttc, "polls": polls,
                        "poll_errors": errors, "divergent_at_end": None if converged else last_divergent,
                        "heal_t": heal_t}

    def _write_result(self, fields: dict) -> None:
        if not self.run_dir or not os.path.isdir(self.run_dir):
            return
        o = self.opts
        result = {"seed": o.seed, "hosts": o.hosts, "topology": o.topology, "duration": o.duration,
                  "docs": o.docs, "faults_spec": o.faults, "plant": o.plant, "run_dir": self.run_dir,
                  "slot": self.slot.slot if self.slot else None, "rerun": o.rerun_command()}
        result.update(fields)
        with open(os.path.join(self.run_dir, "result.json"), "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)

    def teardown(self) -> None:
        """Stops everything this run started and removes its namespaces and disks
        (idempotent; also runs from atexit)."""
        if self.torn_down:
            return
        self.torn_down = True
        self.stop_window.set()
        self.stop_sampler.set()
        try:
            if self.lib is not None:
                self.lib.stop()
            stop_delay_consumers(self.schedule)
            threads = [threading.Thread(target=s.stop) for s in self.servers.values()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if self._keep_dbs and self.topo:
                for host in self.topo.hosts:
                    _copy_db(host.disk, os.path.join(host.dir, "final-db"))
        except Exception as e:   # teardown must go on
            print(f"teardown: {e}", file=sys.stderr)
        finally:
            if self.topo:
                self.topo.destroy()
            if self.history:
                self.history.close()
            if self.slot:
                self.slot.release()


def _copy_db(src_dir: str, dest: str) -> None:
    """Copies a host's database files (and attachment directory) off its tmpfs."""
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(src_dir):
        if not name.startswith("ferry.db"):
            continue
        src = os.path.join(src_dir, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, name), dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest)


def disk_usage(host) -> dict:
    """The size of a host's WAL and how much of its tmpfs is used (KiB)."""
    out = {}
    try:
        out["wal_kb"] = os.path.getsize(host.db + "-wal") // 1024
    except OSError:
        out["wal_kb"] = 0
    try:
        st = os.statvfs(host.disk)
        out["disk_used_kb"] = (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    except OSError:
        pass
    return out


def rss_summary(history: list[dict]) -> dict[str, dict]:
    """Per server: first, largest and last RSS sample, largest WAL and disk use (KiB)."""
    out: dict[str, dict] = {}
    for r in of_type(history, "rss"):
        s = out.setdefault(r["host"], {"start_kb": r["kb"], "max_kb": r["kb"], "end_kb": r["kb"], "samples": 0,
                                       "max_wal_kb": 0, "max_disk_used_kb": 0})
        s["max_kb"] = max(s["max_kb"], r["kb"])
        s["end_kb"] = r["kb"]
        s["samples"] += 1
        s["max_wal_kb"] = max(s["max_wal_kb"], r.get("wal_kb", 0))
        s["max_disk_used_kb"] = max(s["max_disk_used_kb"], r.get("disk_used_kb", 0))
    return out


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def run(opts: RunOptions) -> int:
    return Run(opts).execute()

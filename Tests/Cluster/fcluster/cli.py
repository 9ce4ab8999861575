"""Command line: ``cluster run``, ``cluster sweep``, ``cluster check`` (see README.md)."""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
from typing import Optional

from . import checker
from .nemesis import parse_kinds
from .netns import LOCK_DIR, Unsupported, check_prerequisites, cleanup_stale_slots
from .runner import DEFAULT_DISK_MIB, EXIT_SETUP, EXIT_SKIP, RunOptions, run
from .sweep import SweepOptions, default_out, parse_matrix, parse_seeds, sweep

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(CLUSTER_DIR))
SCRIPT = os.path.join(CLUSTER_DIR, "cluster")


def _has_netfilterqueue(python: str) -> bool:
    if not os.access(python, os.X_OK):
        return False
    return subprocess.run([python, "-c", "import netfilterqueue"], capture_output=True).returncode == 0


def ensure_venv(venv: str) -> tuple[Optional[str], str]:
    """The venv's python with NetfilterQueue, creating the venv and installing it if
    missing (needs libnetfilter-queue-dev); (None, why) if that is not possible."""
    python = os.path.join(venv, "bin", "python")
    if _has_netfilterqueue(python):
        return python, "ok"
    if os.geteuid() != 0:
        return None, "not root"
    os.makedirs(LOCK_DIR, exist_ok=True)
    with open(os.path.join(LOCK_DIR, "venv.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # parallel runs install once
        if _has_netfilterqueue(python):
            return python, "ok"
        print(f"cluster: installing NetfilterQueue into {venv}", file=sys.stderr, flush=True)
        if not os.access(python, os.X_OK):
            p = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
            if p.returncode != 0:
                return None, f"python -m venv failed: {p.stderr.strip()[-300:]}"
        p = subprocess.run([python, "-m", "pip", "install", "-q", "NetfilterQueue"], capture_output=True, text=True)
        if p.returncode != 0 or not _has_netfilterqueue(python):
            return None, f"pip install NetfilterQueue failed: {p.stderr.strip()[-300:]}"
    return python, "ok"


def _add_run_options(p: argparse.ArgumentParser, sweep_mode: bool = False) -> None:
    if not sweep_mode:
        p.add_argument("--hosts", type=int, default=3)
        p.add_argument("--topology", choices=("mesh", "ring"), default="mesh")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--slot", type=int, default=None,
                       help="run slot 1–250 (prefix fcS, subnet 10.201.S.0/24); default: the first free one")
        p.add_argument("--keep-dbs", action="store_true", help="keep the final databases even if the run passes")
        p.add_argument("--quiet", action="store_true")
    p.add_argument("--duration", type=float, default=60, help="fault window in seconds")
    p.add_argument("--docs", type=int, default=200, help="keyspace size")
    p.add_argument("--faults", default="all", help="all | none | comma-separated kinds")
    p.add_argument("--plant", default=None, help="drop-deletions:hK — host K's server drops incoming deletions")
    p.add_argument("--out", default=None, help="output directory (never inside the repository)")
    p.add_argument("--bin", default=os.path.join(REPO, ".build", "release"), help="directory of the ferry binaries")
    p.add_argument("--converge-timeout", type=float, default=60)
    p.add_argument("--settle", type=float, default=3.0,
                   help="seconds the agreed state must stay unchanged to count as converged")
    p.add_argument("--heartbeat", type=float, default=2.0)
    p.add_argument("--disk-mib", type=int, default=DEFAULT_DISK_MIB,
                   help="size of each host's tmpfs (default %(default)s: above Ferry's WAL checkpoint bound)")
    p.add_argument("--venv", default=os.path.join(REPO, ".venv"), help="venv with NetfilterQueue (delay faults)")
    p.add_argument("--venv-python", default=None, help=argparse.SUPPRESS)


def _venv_python(args) -> Optional[str]:
    if args.venv_python:
        return args.venv_python
    if os.geteuid() != 0:      # the run will be skipped anyway
        return None
    try:
        if "delay" not in parse_kinds(args.faults):
            return None
    except ValueError:
        return None
    python, why = ensure_venv(args.venv)
    if python is None:
        print(f"cluster: delay faults unavailable: {why}", file=sys.stderr, flush=True)
    return python


def _run_options(args, **over) -> RunOptions:
    return RunOptions(
        hosts=getattr(args, "hosts", 3), topology=getattr(args, "topology", "mesh"), seed=getattr(args, "seed", 1),
        duration=args.duration, docs=args.docs, faults=args.faults, plant=args.plant, out=args.out,
        bin=os.path.abspath(args.bin), converge_timeout=args.converge_timeout, settle=args.settle,
        slot=getattr(args, "slot", None), heartbeat=args.heartbeat, disk_mib=args.disk_mib,
        keep_dbs=getattr(args, "keep_dbs", False),
        quiet=getattr(args, "quiet", False), script=SCRIPT, **over)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cluster", description="Ferry multi-host fault-injection harness")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_run = sub.add_parser("run", help="one seeded run (exit 0 pass, 1 divergence/loss, 2 setup error, 77 skipped)")
    _add_run_options(p_run)
    p_sweep = sub.add_parser("sweep", help="many runs over a configuration matrix")
    _add_run_options(p_sweep, sweep_mode=True)
    p_sweep.add_argument("--runs", type=int, default=None, help="runs per configuration (the first N seeds)")
    p_sweep.add_argument("--seeds", default=None, help="e.g. 1..100 or 1,5,9 (default: 1..RUNS)")
    p_sweep.add_argument("--matrix", default="3:mesh,3:ring,5:mesh,5:ring")
    p_sweep.add_argument("--parallel", type=int, default=1)
    p_check = sub.add_parser("check", help="re-run the checker on a saved history.jsonl (+ states/ beside it)")
    p_check.add_argument("history")
    sub.add_parser("cleanup", help="remove namespaces, mounts and processes left by crashed runs")
    args = ap.parse_args(argv)

    if args.cmd == "check":
        if not os.path.exists(args.history):
            print(f"cluster check: no such file {args.history}", file=sys.stderr)
            return EXIT_SETUP
        verdict, text = checker.check_saved(args.history)
        print(text, end="")
        return 0 if verdict.passed else 1

    if args.cmd == "cleanup":
        if os.geteuid() != 0:
            print("SKIPPED: cluster harness needs root, ip netns and nft (not root)")
            return EXIT_SKIP
        for line in cleanup_stale_slots() or ["nothing to clean"]:
            print(line)
        return 0

    try:
        parse_kinds(args.faults)
    except ValueError as e:
        ap.error(str(e))

    if args.cmd == "run":
        return run(_run_options(args, venv_python=_venv_python(args)))

    seeds = parse_seeds(args.seeds) if args.seeds else list(range(1, (args.runs or 10) + 1))
    if args.runs is not None:
        seeds = seeds[:args.runs]
    try:
        matrix = parse_matrix(args.matrix)
    except ValueError as e:
        ap.error(str(e))
    try:
        check_prerequisites()
    except Unsupported as e:
        print(f"SKIPPED: {e}")
        return EXIT_SKIP
    base = _run_options(args, venv_python=_venv_python(args))
    out = os.path.abspath(args.out or default_out())
    return sweep(SweepOptions(seeds=seeds, matrix=matrix, parallel=args.parallel, out=out, base=base,
                              python=sys.executable, script=SCRIPT))

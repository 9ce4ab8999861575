"""Many seeded runs over a matrix of configurations, and their summary.

Each run is a separate ``cluster run`` process with its own output directory; runs pick
distinct slots by themselves (see ``netns.SlotLock``), so ``--parallel`` runs never share
namespaces, bridges or subnets. ``summary.json`` and ``summary.md`` are rewritten after
every finished run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

from .runner import RunOptions


def parse_seeds(spec: str) -> list[int]:
    """``1..100``, ``1,5,9`` or a mix (``1..3,10``)."""
    seeds: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if ".." in part:
            a, b = part.split("..", 1)
            seeds += list(range(int(a), int(b) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def parse_matrix(spec: str) -> list[tuple[int, str]]:
    """``3:mesh,5:ring`` → [(3, "mesh"), (5, "ring")]."""
    out = []
    for part in spec.split(","):
        n, _, topo = part.strip().partition(":")
        if topo not in ("mesh", "ring"):
            raise ValueError(f"matrix entry {part!r}: expected HOSTS:mesh or HOSTS:ring")
        out.append((int(n), topo))
    return out


def percentile(values: list[float], p: float) -> Optional[float]:
    """Nearest-rank percentile."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


@dataclass
class SweepOptions:
    seeds: list[int]
    matrix: list[tuple[int, str]]
    parallel: int
    out: str
    base: RunOptions
    python: str
    script: str


def sweep(o: SweepOptions) -> int:
    os.makedirs(o.out, exist_ok=True)
    jobs = [(n, topo, seed) for (n, topo) in o.matrix for seed in o.seeds]
    results: list[dict] = []
    lock = threading.Lock()
    print(f"sweep: {len(jobs)} runs, {o.parallel} at a time, into {o.out}", flush=True)

    def one(job: tuple[int, str, int]) -> None:
        n, topo, seed = job
        name = f"{n}-{topo}-seed{seed}"
        run_dir = os.path.join(o.out, name)
        b = o.base
        argv = [o.python, o.script, "run", "--hosts", str(n), "--topology", topo, "--seed", str(seed),
                "--duration", f"{b.duration:g}", "--docs", str(b.docs), "--faults", b.faults,
                "--bin", b.bin, "--converge-timeout", f"{b.converge_timeout:g}", "--out", run_dir]
        if b.plant:
            argv += ["--plant", b.plant]
        argv += ["--disk-mib", str(b.disk_mib)]
        if b.venv_python:
            argv += ["--venv-python", b.venv_python]
        started = time.monotonic()
        with open(os.path.join(o.out, name + ".log"), "w") as log:
            rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT).returncode
        res: dict = {}
        try:
            with open(os.path.join(run_dir, "result.json")) as f:
                res = json.load(f)
        except (OSError, json.JSONDecodeError):
            pass
        opts = RunOptions(hosts=n, topology=topo, seed=seed, duration=b.duration, docs=b.docs, faults=b.faults,
                          plant=b.plant, bin=b.bin, converge_timeout=b.converge_timeout, disk_mib=b.disk_mib,
                          script=o.script)
        entry = {"config": f"{n}:{topo}", "hosts": n, "topology": topo, "seed": seed, "exit_code": rc,
                 "status": {0: "pass", 1: "fail", 77: "skipped"}.get(rc, "error"),
                 "time_to_converge": res.get("time_to_converge"), "converged": res.get("converged"),
                 "classes": res.get("classes", {}), "findings": res.get("findings", {}),
                 "rss": res.get("rss", {}), "run_dir": run_dir, "wall_seconds": round(time.monotonic() - started, 1),
                 "rerun": opts.rerun_command(), "harness_errors": res.get("harness_errors", []),
                 "unexpected_exits": len(res.get("unexpected_exits", []))}
        with lock:
            results.append(entry)
            write_summary(o.out, results)
            ttc = entry["time_to_converge"]
            print(f"  {name}: {entry['status']}"
                  + (f" ttc {ttc:.2f}s" if ttc is not None else "")
                  + (f" {entry['findings']}" if entry["findings"] else "")
                  + f" ({len(results)}/{len(jobs)})", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, o.parallel)) as pool:
        list(pool.map(one, jobs))
    write_summary(o.out, results)
    print(f"summary: {os.path.join(o.out, 'summary.md')}", flush=True)
    statuses = {r["status"] for r in results}
    if "fail" in statuses:
        return 1
    if "error" in statuses:
        return 2
    return 0


def _mib(kb: Optional[float]) -> str:
    return "–" if kb is None else f"{kb / 1024:.0f}"


def _secs(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:.2f}"


def aggregate(results: list[dict]) -> dict[str, dict]:
    """Per configuration: counts, time-to-converge percentiles, RSS (median start, largest
    max, median end over runs and servers)."""
    out: dict[str, dict] = {}
    for cfg in sorted({r["config"] for r in results}, key=lambda c: (int(c.split(":")[0]), c)):
        rs = [r for r in results if r["config"] == cfg]
        ttcs = [r["time_to_converge"] for r in rs if r.get("converged") and r["time_to_converge"] is not None]
        starts = [v["start_kb"] for r in rs for v in r["rss"].values()]
        maxes = [v["max_kb"] for r in rs for v in r["rss"].values()]
        ends = [v["end_kb"] for r in rs for v in r["rss"].values()]
        out[cfg] = {
            "runs": len(rs), "pass": sum(r["status"] == "pass" for r in rs),
            "fail": sum(r["status"] == "fail" for r in rs),
            "error": sum(r["status"] == "error" for r in rs),
            "skipped": sum(r["status"] == "skipped" for r in rs),
            "divergent": sum(1 for r in rs if r["classes"].get("divergent")),
            "lost": sum(1 for r in rs if r["classes"].get("lost")),
            "conflict": sum(1 for r in rs if r["classes"].get("conflict")),
            "invalid": sum(1 for r in rs if r["classes"].get("invalid")),
            "ttc_p50": percentile(ttcs, 50), "ttc_p99": percentile(ttcs, 99),
            "rss_start_kb": percentile(starts, 50), "rss_max_kb": max(maxes) if maxes else None,
            "rss_end_kb": percentile(ends, 50),
            "unexpected_exits": sum(r["unexpected_exits"] for r in rs),
        }
    return out


def write_summary(out_dir: str, results: list[dict]) -> None:
    results = sorted(results, key=lambda r: (r["hosts"], r["topology"], r["seed"]))
    agg = aggregate(results)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump({"configurations": agg, "runs": results}, f, indent=1, sort_keys=True)
    lines = ["# Ferry cluster sweep", "",
             "| config | runs | pass | fail | error | divergent | lost | conflict | invalid | crashes | ttc p50 (s) "
             "| ttc p99 (s) | RSS start (MiB) | RSS max (MiB) | RSS end (MiB) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cfg, a in agg.items():
        lines.append(f"| {cfg} | {a['runs']} | {a['pass']} | {a['fail']} | {a['error']} | {a['divergent']} | "
                     f"{a['lost']} | {a['conflict']} | {a['invalid']} | {a['unexpected_exits']} | {_secs(a['ttc_p50'])} | "
                     f"{_secs(a['ttc_p99'])} | {_mib(a['rss_start_kb'])} | {_mib(a['rss_max_kb'])} | "
                     f"{_mib(a['rss_end_kb'])} |")
    lines += ["", "divergent/lost/conflict/invalid: runs with findings of that class. "
              "RSS: median of the servers' first and last samples, largest sample overall. "
              "crashes: servers that exited unasked. ttc: time to converge after heal (converged runs).", "",
              "| config | seed | result | ttc (s) | findings | rerun |", "|---|---|---|---|---|---|"]
    for r in results:
        findings = ", ".join(f"{k}={v}" for k, v in sorted(r["findings"].items())) or "–"
        lines.append(f"| {r['config']} | {r['seed']} | {r['status']} | {_secs(r['time_to_converge'])} | "
                     f"{findings} | `{r['rerun']}` |")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def default_out() -> str:
    return os.path.join("/tmp/ferry-cluster", time.strftime("sweep-%Y%m%d-%H%M%S"))


def main_python() -> str:
    return sys.executable

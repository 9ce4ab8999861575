"""Ferry's multi-host fault-injection harness (see Tests/Cluster/README.md).

Modules, one purpose each:

- ``cli``: argument parsing and the ``run``/``sweep``/``check`` subcommands;
- ``runner``: one seeded run, from setup to verdict and teardown;
- ``sweep``: many runs and their summary;
- ``netns``: network namespaces, the private switch, tmpfs disks, leftovers, slots;
- ``ferrycli``: the Ferry binaries, their options, and the CLI commands the harness runs;
- ``servers``: ``ferry serve`` and ``ferry-cluster-client`` processes;
- ``nemesis``: the seeded fault schedule and how each fault is applied and undone;
- ``delayq``: the NFQUEUE consumer that delays packets (a separate process);
- ``workload``: the seeded clients writing to the cluster;
- ``history``: the JSON-lines log of a run;
- ``checker``: convergence, lost writes, conflict rules; the failure report.
"""

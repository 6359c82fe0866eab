"""What each role costs at start: ``python -m rocketbox.perf.start_roles [--runs 5] [--idle-s 3]``.

Starts a ``LocalCluster`` (test store sizes, its default roles) and a ``cluster up --detach``
(the CLI, default sizes, its default roles), each ``--runs`` times, and prints per role the medians of: when
the supervisor started it (ms after the supervisor's own start), fork to ready (its ``started_at`` and
``ready_at`` in cluster.json), the CPU it spent until the cluster was ready, and its memory after
``--idle-s`` idle (psutil ``memory_full_info``: RSS, PSS, USS); then the totals and the wall time
(perf/RESULTS.md "Start and footprint"). ``--first-use``: the memory is read after one scrape of the
metrics endpoint and one console page (what those doors load at their first request, not at start). RSS counts in each forked child every page it shares with
the supervisor; PSS divides shared pages among their sharers (what the machine pays).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
import urllib.request

import psutil

from rocketbox.cluster.supervision.lifecycle import python_module_command
from rocketbox.cluster.supervision.run_state import read_state_file
from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.topology import free_ports

CLI_TIMEOUT_S = 120
PORT_FLAGS = ("--namesrv-port", "--broker-port", "--namesrv-remoting-port", "--broker-remoting-port", "--proxy-port",
              "--console-port", "--metrics-port")
# What a role imports after its fork: its entry point and, for the doors, the server its build() imports.
ROLE_MODULES = {
    "namesrv": ("rocketbox.cluster.procs.namesrv",), "broker": ("rocketbox.cluster.procs.broker",),
    "flush": ("rocketbox.cluster.procs.flush",), "reput": ("rocketbox.cluster.procs.reput",),   # with allocate
    "proxy": ("rocketbox.cluster.procs.proxy", "rocketbox.cluster.proxy.server", "rocketbox.cluster.proxy.settings"),
    # The console and the metrics endpoint: one process (procs/web.py), each door's modules after the fork.
    "web": ("rocketbox.cluster.procs.web", "rocketbox.cluster.console.server", "rocketbox.cluster.console.settings",
            "rocketbox.cluster.metrics.exporter", "rocketbox.cluster.metrics.settings"),
}
_IMPORT_COST = """
import importlib, resource, sys
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
def cpu(): r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
r0, c0 = rss(), cpu()
for m in sys.argv[1].split(","): importlib.import_module(m)
r1, c1 = rss(), cpu()
for m in sys.argv[2:]: importlib.import_module(m)
print((c1 - c0) * 1000, r1 - r0, (cpu() - c1) * 1000, rss() - r1)
"""


def _role(process: psutil.Process) -> str:
    """The child's name in cluster.json, from its title ("rocketbox: broker-a flush", titles.py)."""
    title = " ".join(process.cmdline())
    return title.removeprefix("rocketbox: ").split(" /")[0].strip().replace(" ", "-") or process.name()


def _processes(supervisor_pid: int) -> list[psutil.Process]:
    root = psutil.Process(supervisor_pid)
    return [root] + root.children(recursive=True)


def cpu_ms(supervisor_pid: int) -> dict[str, float]:
    out = {}
    for process in _processes(supervisor_pid):
        try:
            times = process.cpu_times()
            out[_role(process)] = (times.user + times.system) * 1000
        except psutil.Error:
            pass
    return out


def memory_mb(supervisor_pid: int) -> dict[str, tuple[float, float, float]]:
    out = {}
    for process in _processes(supervisor_pid):
        try:
            info = process.memory_full_info()
            out[_role(process)] = (info.rss / 2**20, info.pss / 2**20, info.uss / 2**20)
        except psutil.Error:
            pass
    return out


def timeline_ms(state: dict) -> dict[str, tuple[float, float]]:
    """child -> (started after the supervisor's start, fork to ready), from cluster.json."""
    t0 = state["started_at"]
    return {c["name"]: ((c["started_at"] - t0) * 1000, (c["ready_at"] - c["started_at"]) * 1000)
            for c in state["children"] if c.get("ready_at")}


def phases_ms(state: dict, launched: float, wall_s: float) -> dict[str, float]:
    """The command's critical path, ms after it was launched (time.time() on both sides): the
    supervisor's start(), its first role started, its last role ready, the command returned."""
    children = state["children"]
    return {"supervisor start()": (state["started_at"] - launched) * 1000,
            "first role started": (min(c["started_at"] for c in children) - launched) * 1000,
            "last role ready": (max(c["ready_at"] for c in children) - launched) * 1000,
            "command returned": wall_s * 1000}


def use_the_web_doors(state: dict) -> None:
    """One scrape and one console page: what the web process loads at its first request counts."""
    for child in state["children"]:
        info = child.get("ready_info") or {}
        for url in (info.get("metrics"), info.get("console")):
            if url:
                with urllib.request.urlopen(url, timeout=CLI_TIMEOUT_S) as answer:
                    answer.read()


def one_local(tmp: str, idle_s: float, first_use: bool = False) -> dict:
    cluster = LocalCluster(os.path.join(tmp, "local"))
    t0 = time.perf_counter()
    cluster.start()
    try:
        wall = time.perf_counter() - t0
        state = read_state_file(cluster.data_dir)
        cpu = cpu_ms(cluster.process.pid)
        if first_use:
            use_the_web_doors(state)
        time.sleep(idle_s)
        return {"wall_s": wall, "timeline": timeline_ms(state), "cpu": cpu, "memory": memory_mb(cluster.process.pid)}
    finally:
        cluster.stop()


def one_cli(tmp: str, idle_s: float, first_use: bool = False) -> dict:
    data_dir = os.path.join(tmp, "cli")
    # Every door on a free port: RocketMQ's defaults (9876, 10911, 8081, ...) may be another cluster's.
    flags = [arg for flag, port in zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))) for arg in (flag, str(port))]
    base = python_module_command("rocketbox.cluster.cli", "--data-dir", data_dir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.time()
    t0 = time.perf_counter()
    up = subprocess.run(base + ["up", "--detach", *flags, "--ready-timeout-s", "60"],
                        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        if up.returncode != 0:
            raise RuntimeError(f"cluster up failed ({up.returncode}): {up.stderr[-2000:]}")
        state = read_state_file(data_dir)
        cpu = cpu_ms(state["supervisor_pid"])
        cpu["cli"] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
        if first_use:
            use_the_web_doors(state)
        time.sleep(idle_s)
        return {"wall_s": wall, "timeline": timeline_ms(state), "cpu": cpu,
                "memory": memory_mb(state["supervisor_pid"]), "phases": phases_ms(state, launched, wall)}
    finally:
        subprocess.run(base + ["down"], capture_output=True, timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL)


def table(runs: list[dict]) -> list[str]:
    """Per role, medians over the runs; then the totals."""
    med = statistics.median
    roles = list(dict.fromkeys(r for run in runs for r in [*run["cpu"], *run["timeline"]]))
    lines = [f"{'role':<20} {'start ms':>9} {'to ready ms':>12} {'CPU ms':>7} {'RSS MB':>7} {'PSS MB':>7} {'USS MB':>7}"]
    for role in roles:
        starts = [run["timeline"][role] for run in runs if role in run["timeline"]]
        cpu = [run["cpu"][role] for run in runs if role in run["cpu"]]
        memory = [run["memory"][role] for run in runs if role in run["memory"]]
        cell = lambda values, fmt: fmt.format(med(values)) if values else "-"   # noqa: E731
        lines.append(f"{role:<20} {cell([s[0] for s in starts], '{:9.0f}'):>9} "
                     f"{cell([s[1] for s in starts], '{:12.0f}'):>12} {cell(cpu, '{:7.0f}'):>7} "
                     f"{cell([m[0] for m in memory], '{:7.1f}'):>7} {cell([m[1] for m in memory], '{:7.1f}'):>7} "
                     f"{cell([m[2] for m in memory], '{:7.1f}'):>7}")
    totals = [(sum(run["cpu"].values()), *[sum(m[i] for m in run["memory"].values()) for i in range(3)])
              for run in runs]
    walls = [run["wall_s"] for run in runs]
    for phase in runs[0].get("phases", {}):
        lines.append(f"{phase + ' (ms after launch)':<36} median {med(run['phases'][phase] for run in runs):7.0f}")
    lines.append(f"{'total':<20} {'':>9} {'':>12} {med([t[0] for t in totals]):7.0f} "
                 f"{med([t[1] for t in totals]):7.1f} {med([t[2] for t in totals]):7.1f} {med([t[3] for t in totals]):7.1f}")
    lines.append(f"wall until ready: median {med(walls):.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s "
                 f"({len(runs)} runs)")
    return lines


def import_costs(repeats: int = 3) -> list[str]:
    """CPU ms and resident MB of each role's own imports in a fresh interpreter, after the base the
    supervisor forks server roles with (topology.SERVER_PRELOAD); medians of ``repeats``."""
    import sys
    from rocketbox.cluster.topology import SERVER_PRELOAD
    base = ",".join(SERVER_PRELOAD)
    lines = [f"{'role':<10} {'own CPU ms':>10} {'own MB':>7}   (the base: {base})"]
    base_costs = []
    for role, modules in ROLE_MODULES.items():
        runs = [[float(x) for x in subprocess.run([sys.executable, "-c", _IMPORT_COST, base, *modules],
                                                  capture_output=True, text=True, check=True,
                                                  timeout=CLI_TIMEOUT_S).stdout.split()]
                for _ in range(repeats)]
        base_costs += runs
        lines.append(f"{role:<10} {statistics.median(r[2] for r in runs):10.0f} {statistics.median(r[3] for r in runs):7.1f}")
    lines.append(f"{'base':<10} {statistics.median(r[0] for r in base_costs):10.0f} "
                 f"{statistics.median(r[1] for r in base_costs):7.1f}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketbox.perf.start_roles", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=3.0)
    parser.add_argument("--only", choices=("local", "cli"), help="one of the two kinds (default both)")
    parser.add_argument("--imports", action="store_true", help="only each role's own imports: CPU and memory")
    parser.add_argument("--first-use", action="store_true",
                        help="read the memory after one metrics scrape and one console page")
    options = parser.parse_args(argv)
    if options.imports:
        print("\n".join(import_costs()))
        return 0
    kinds = [options.only] if options.only else ["local", "cli"]
    results = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="start-roles-") as tmp:
        for run in range(options.runs):
            for kind in kinds:   # interleaved: a busy moment of the machine hits both alike
                results[kind].append((one_local if kind == "local" else one_cli)(os.path.join(tmp, f"{kind}-{run}"),
                                                                                   options.idle_s, options.first_use))
    for kind in kinds:
        print(f"\n{'LocalCluster.start' if kind == 'local' else 'cluster up --detach'}:")
        print("\n".join(table(results[kind])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

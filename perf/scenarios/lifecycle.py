"""Lifecycle scenarios: time until a cluster is ready (LocalCluster and the CLI), and the memory
an idle cluster holds."""

from __future__ import annotations

import os
import subprocess
import time

from rocketbox.cluster.supervision.lifecycle import python_module_command
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import Settings
from rocketbox.perf.report import Report, Row, TARGETS


def scenario_ready(s: Settings, report: Report, tmp: str) -> None:
    """``LocalCluster.start`` until ready; ``cluster up --detach`` (CLI, production store sizes); ``down``."""
    local, cli_up, cli_down = [], [], []
    for run in range(s.runs):
        cluster = LocalCluster(os.path.join(tmp, f"ready-{run}"))
        t0 = time.perf_counter()
        try:
            cluster.start()
            local.append(time.perf_counter() - t0)
        finally:
            cluster.stop()
        up_s, down_s, _ = cli_cluster(os.path.join(tmp, f"ready-cli-{run}"), idle_s=0)
        cli_up.append(up_s)
        cli_down.append(down_s)
    report.add(Row("ready", "LocalCluster.start until ready", "s", local, TARGETS["ready"],
                   note="test store sizes (16 MiB CommitLog segments)"))
    report.add(Row("ready", "cluster up --detach (CLI) until it returns", "s", cli_up, TARGETS["ready"],
                   note="wall time of the command, interpreter start included; default store sizes"))
    report.add(Row("ready", "cluster down (CLI)", "s", cli_down))


def cli_cluster(data_dir: str, idle_s: float) -> tuple[float, float, dict | None]:
    """``cluster up --detach``, optionally measure idle memory after ``idle_s``, then ``down``."""
    from rocketbox.cluster.topology import free_ports
    namesrv_port, broker_port = free_ports(2)
    base = python_module_command("rocketbox.cluster.cli", "--data-dir", data_dir)
    t0 = time.perf_counter()
    up = subprocess.run(base + ["up", "--detach", "--namesrv-port", str(namesrv_port), "--broker-port",
                                str(broker_port), "--ready-timeout-s", "60"],
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    up_s = time.perf_counter() - t0
    memory = None
    try:
        if up.returncode != 0:
            raise RuntimeError(f"cluster up failed ({up.returncode}): {up.stdout[-2000:]} {up.stderr[-2000:]}")
        if idle_s:
            time.sleep(idle_s)
            from rocketbox.cluster.supervision.run_state import read_state_file
            memory = cluster_memory((read_state_file(data_dir) or {}).get("supervisor_pid"))
    finally:
        t1 = time.perf_counter()
        down = subprocess.run(base + ["down"], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        down_s = time.perf_counter() - t1
        if down.returncode != 0:
            _terminate_detached(data_dir)
    return up_s, down_s, memory


def _terminate_detached(data_dir: str) -> None:
    import signal
    from rocketbox.cluster.supervision.run_state import read_state_file
    pid = (read_state_file(data_dir) or {}).get("supervisor_pid")
    if pid:
        try:
            os.kill(int(pid), signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def cluster_memory(supervisor_pid: int | None) -> dict:
    """RSS and PSS (MB) of the supervisor and all its descendants, and per process."""
    import psutil
    if not supervisor_pid:
        raise RuntimeError("no supervisor pid")
    root = psutil.Process(int(supervisor_pid))
    procs = [root] + root.children(recursive=True)
    per = {}
    rss = pss = 0
    for p in procs:
        try:
            info = p.memory_full_info()
            cmd = " ".join(p.cmdline()[1:4])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += info.rss
        pss += getattr(info, "pss", 0)
        per[f"{p.pid} {cmd}"] = round(info.rss / 2**20, 1)
    return {"rss_mb": rss / 2**20, "pss_mb": pss / 2**20, "processes": len(per), "per_process_rss_mb": per}


def scenario_rss(s: Settings, report: Report, tmp: str) -> None:
    """Idle memory: a LocalCluster (test store sizes), and a CLI cluster (default sizes), after a few idle seconds."""
    idle_s = 2.0 if s.quick else 5.0
    local_rss, local_pss, cli_rss, cli_pss = [], [], [], []
    extra = {}
    for run in range(s.runs):
        with LocalCluster(os.path.join(tmp, f"rss-{run}")) as cluster:
            time.sleep(idle_s)
            mem = cluster_memory(cluster.process.pid)
        local_rss.append(mem["rss_mb"])
        local_pss.append(mem["pss_mb"])
        extra["local_last"] = mem
        _, _, mem = cli_cluster(os.path.join(tmp, f"rss-cli-{run}"), idle_s=idle_s)
        cli_rss.append(mem["rss_mb"])
        cli_pss.append(mem["pss_mb"])
        extra["cli_last"] = mem
    note = f"{idle_s:.0f} s idle; RSS counts shared mapped store pages once per process"
    report.add(Row("rss", "idle RSS, LocalCluster (16 MiB segments)", "MB", local_rss, TARGETS["rss"], note=note,
                   extra=extra.get("local_last", {})))
    report.add(Row("rss", "idle PSS, LocalCluster", "MB", local_pss, note="proportional: shared pages split"))
    report.add(Row("rss", "idle RSS, cluster up (default sizes)", "MB", cli_rss, TARGETS["rss"], note=note,
                   extra=extra.get("cli_last", {})))
    report.add(Row("rss", "idle PSS, cluster up (default sizes)", "MB", cli_pss))

"""RocketMQ's own clients against RocketBox's remoting door (issue 33 item 1): a ``LocalCluster``
with its defaults, a topic of 4 queues, then per round and mode one client process:
``sync`` (one thread of sync sends, 100 B), ``async`` (64 in flight), ``push`` (a topic filled with
async sends, then drained by a push consumer), ``e2e`` (Java: a steady ``--rate`` of sync sends, send to
consume p50/p99 and failed sends). ``--namesrv`` points it at another broker (Apache RocketMQ's) instead.
One JSON line a run, with the broker's CPU a message (it busy-polls: an upper bound); ``--threads``
adds, for a ``LocalCluster``, each busy thread of the broker and its workers: CPU, voluntary and
involuntary context switches a message. The Java client is ``tests/java/programs/RemotingBench.java``
against Apache's client jars (``/work/apache/client.classpath``, see tests/java/apache.py); the C++
client is ``remoting_cpp_bench.py`` in ``.venv-rocketmq4``.

    python -m rocketbox.perf.remoting_clients --client java --modes sync,async --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from rocketbox.cluster import Admin
from rocketbox.cluster.testing import LocalCluster

REPO = pathlib.Path(__file__).resolve().parents[1]
CPP_PYTHON = REPO / ".venv-rocketmq4" / "bin" / "python"
CPP_BENCH = pathlib.Path(__file__).with_name("remoting_cpp_bench.py")
JAVA_SOURCE = REPO / "tests" / "java" / "programs" / "RemotingBench.java"
APACHE_CLIENT_CLASSPATH = pathlib.Path("/work/apache/client.classpath")
MESSAGES = {"sync": 2000, "async": 20000, "push": 30000, "e2e": 30000}
RUN_TIMEOUT_S = 300


def _cpu_s(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _thread_stats(pids: list[int]) -> dict:
    """(CPU s, voluntary, involuntary context switches) of every thread of ``pids``, by (title, thread id)."""
    stats = {}
    for pid in pids:
        try:
            title = pathlib.Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
            for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
                fields = (task / "stat").read_text().rpartition(")")[2].split()
                switches = dict(line.split(":") for line in (task / "status").read_text().splitlines()
                                if "ctxt_switches" in line)
                stats[(title, int(task.name))] = ((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"),
                                                  int(switches["voluntary_ctxt_switches"]),
                                                  int(switches["nonvoluntary_ctxt_switches"]))
        except (OSError, ValueError, KeyError):
            continue   # a thread or process that ended meanwhile
    return stats


def _per_message(before: dict, after: dict, count: int) -> list[dict]:
    rows = []
    for key, (cpu_s, voluntary, involuntary) in after.items():
        was = before.get(key, (0.0, 0, 0))
        if cpu_s - was[0] > 0:
            rows.append({"thread": f"{key[0][:40]} ({key[1]})", "cpu_us": round((cpu_s - was[0]) / count * 1e6, 1),
                         "voluntary": round((voluntary - was[1]) / count, 2),
                         "involuntary": round((involuntary - was[2]) / count, 2)})
    return sorted(rows, key=lambda row: -row["cpu_us"])


def _client_command(client: str, classes: str, *args: str) -> list[str]:
    if client == "java":
        classpath = classes + ":" + APACHE_CLIENT_CLASSPATH.read_text().strip()
        return ["java", "-Xms64m", "-Xmx256m", f"-Drocketmq.client.logRoot={classes}/logs",
                f"-Duser.home={classes}", "-cp", classpath, "RemotingBench", *args]
    return [str(CPP_PYTHON), str(CPP_BENCH), *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=("java", "cpp"), default="java")
    parser.add_argument("--modes", default="sync,async,push")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--messages", type=json.loads, default={}, help='e.g. {"sync": 1000}')
    parser.add_argument("--rate", type=int, default=2000, help="the e2e mode's steady sends a second (Java)")
    parser.add_argument("--namesrv", help="another broker's NameServer (e.g. Apache RocketMQ's), its topics "
                                          "auto-created; without it a LocalCluster is started")
    parser.add_argument("--broker-pid", type=int, help="with --namesrv: the broker process whose CPU to count")
    parser.add_argument("--threads", action="store_true", help="each busy thread of the LocalCluster's broker and "
                                                               "its workers: CPU and context switches a message")
    parser.add_argument("--broker-overrides", type=json.loads, default={},
                        help='the LocalCluster broker\'s settings, e.g. {"busy_poll_us": 0}')
    args = parser.parse_args()
    counts = {**MESSAGES, **args.messages}
    with tempfile.TemporaryDirectory(prefix="remoting-clients-") as tmp:
        classes = os.path.join(tmp, "classes")
        if args.client == "java":
            subprocess.run(["javac", "-nowarn", "-d", classes, "-cp", APACHE_CLIENT_CLASSPATH.read_text().strip(),
                            str(JAVA_SOURCE)], check=True)
        env = {**os.environ, "HOME": tmp}   # the C++ client writes its logs under $HOME
        if args.namesrv:
            _rounds(args, counts, classes, env, args.namesrv, args.broker_pid)
            return
        with LocalCluster(os.path.join(tmp, "cluster"), broker_overrides=args.broker_overrides) as cluster:
            with Admin(config=cluster.client_config()) as admin:
                admin.create_topic("Bench", 4)
            workers = [child["pid"] for child in cluster.state().get("children", [])
                       if child["name"].startswith("broker-a") and child.get("pid")] if args.threads else []
            _rounds(args, counts, classes, env, cluster.remoting_namesrv, cluster.pid("broker-a"), workers)


def _rounds(args, counts: dict, classes: str, env: dict, namesrv: str, broker: int | None,
            threads_of: list[int] = ()) -> None:
    tag = os.getpid()   # fresh topics a run: an external broker keeps its store
    for run in range(args.rounds):
        for mode in args.modes.split(","):
            count, topic, extra = counts[mode], "Bench", ()
            if mode == "push":
                topic = f"Drain{tag}x{run}"
                filled = subprocess.run(_client_command(args.client, classes, "async", namesrv, topic, str(count)),
                                        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
                print(json.dumps({"mode": "push-fill", "out": filled.stdout.strip()[-300:]}), flush=True)
            elif mode == "e2e":
                topic, extra = f"E2e{tag}x{run}", (str(args.rate),)
            cpu_before = _cpu_s(broker) if broker else 0.0
            threads_before = _thread_stats(threads_of)
            try:
                out = subprocess.run(_client_command(args.client, classes, mode, namesrv, topic, str(count), *extra),
                                     capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
            except subprocess.TimeoutExpired as exc:
                print(json.dumps({"mode": mode, "round": run, "error": f"no result in {RUN_TIMEOUT_S} s",
                                  "stdout": str(exc.stdout)[-300:], "stderr": str(exc.stderr)[-1500:]}), flush=True)
                continue
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(json.dumps({"mode": mode, "error": out.stderr[-500:]}), flush=True)
                continue
            result = json.loads(lines[-1])
            result.update(client=args.client, round=run)
            if broker:
                result["broker_cpu_us_per_msg"] = round((_cpu_s(broker) - cpu_before) / count * 1e6, 1)
            if threads_of:
                result["threads"] = _per_message(threads_before, _thread_stats(threads_of), count)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())

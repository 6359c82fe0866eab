"""RocketMQ's own clients against RocketBox's remoting door (issue 33 item 1): a ``LocalCluster``
with its defaults, a topic of 4 queues, then per round and mode one client process:
``sync`` (one thread of sync sends, 100 B), ``async`` (64 in flight), ``push`` (a topic filled with
async sends, then drained by a push consumer). One JSON line a run, with the broker's CPU a message
(it busy-polls: an upper bound). The Java client is ``tests/java/programs/RemotingBench.java``
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
MESSAGES = {"sync": 2000, "async": 20000, "push": 30000}
RUN_TIMEOUT_S = 300


def _cpu_s(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    args = parser.parse_args()
    counts = {**MESSAGES, **args.messages}
    with tempfile.TemporaryDirectory(prefix="remoting-clients-") as tmp:
        classes = os.path.join(tmp, "classes")
        if args.client == "java":
            subprocess.run(["javac", "-nowarn", "-d", classes, "-cp", APACHE_CLIENT_CLASSPATH.read_text().strip(),
                            str(JAVA_SOURCE)], check=True)
        env = {**os.environ, "HOME": tmp}   # the C++ client writes its logs under $HOME
        with LocalCluster(os.path.join(tmp, "cluster")) as cluster:
            with Admin(config=cluster.client_config()) as admin:
                admin.create_topic("Bench", 4)
            namesrv, broker = cluster.remoting_namesrv, cluster.pid("broker-a")
            for run in range(args.rounds):
                for mode in args.modes.split(","):
                    count, topic = counts[mode], "Bench"
                    if mode == "push":
                        topic = f"Drain{run}"
                        subprocess.run(_client_command(args.client, classes, "async", namesrv, topic, str(count)),
                                       capture_output=True, timeout=RUN_TIMEOUT_S, env=env)
                    cpu_before = _cpu_s(broker)
                    out = subprocess.run(_client_command(args.client, classes, mode, namesrv, topic, str(count)),
                                         capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
                    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
                    if not lines:
                        print(json.dumps({"mode": mode, "error": out.stderr[-500:]}), flush=True)
                        continue
                    result = json.loads(lines[-1])
                    result.update(client=args.client, round=run,
                                  broker_cpu_us_per_msg=round((_cpu_s(broker) - cpu_before) / count * 1e6, 1))
                    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())

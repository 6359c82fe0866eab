"""``python -m rocketbox.perf.profile``: where the time goes under batched produce, by process.

Brings up a LocalCluster, starts a producer process sending batches of 256 x 100 B
(the ``produce`` scenario's load), lets it warm up, then samples the broker, the
reput worker, the flush worker and the producer process at once with
``py-spy record --nonblocking --format raw`` (collapsed stacks; load them into
speedscope.app or flamegraph.pl for a picture). Each profile is summarised as
the top functions by self share (the leaf frame: where the interpreter actually
was) and by inclusive share (on the stack at all), over the samples in which a
thread was active (py-spy drops idle threads unless ``--idle``).

Needs py-spy (``pip install py-spy`` into the venv) and permission to ptrace the
cluster's processes (they are our descendants, so the default Yama policy allows it).
Everything is bounded: the load stops after ``--duration`` + 15 s whatever happens.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

from rocketbox.perf.harness import ProducerProcess, client_config, create_topic
from rocketbox.cluster.testing import LocalCluster

ROLES_DEFAULT = ("broker", "reput", "flush", "producer")
_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME_LINE = re.compile(r":\d+\)$")


def _short(frame: str) -> str:
    """``func (path:line)`` -> ``func (short path)``: one key per function, not per line."""
    frame = _FRAME_LINE.sub(")", frame)
    for marker in ("site-packages/", "/work/main/", "/lib/python3.11/"):
        i = frame.find(marker)
        if i >= 0:
            head = frame[:frame.rfind("(", 0, i) + 1]
            frame = head + frame[i + len(marker):]
    return frame


def summarise(raw_path: str, top: int = 15) -> dict:
    """Self and inclusive shares of each function in a py-spy raw (collapsed) file."""
    total = 0
    self_counts: collections.Counter = collections.Counter()
    incl_counts: collections.Counter = collections.Counter()
    with open(raw_path) as f:
        for line in f:
            m = _LINE.match(line.rstrip("\n"))
            if not m:
                continue
            frames = [_short(x) for x in m.group(1).split(";") if x]
            count = int(m.group(2))
            total += count
            if frames:
                self_counts[frames[-1]] += count
            for fr in set(frames):
                incl_counts[fr] += count
    share = (lambda c: round(100.0 * c / total, 1)) if total else (lambda c: 0.0)
    return {"samples": total,
            "self": [(fn, share(c)) for fn, c in self_counts.most_common(top)],
            "inclusive": [(fn, share(c)) for fn, c in incl_counts.most_common(top)]}


def _markdown(role: str, summary: dict, rate: int, duration_s: float) -> str:
    busy = summary["samples"] / (rate * duration_s) if rate and duration_s else 0
    lines = [f"### {role}: CPU {summary.get('cpu_cores')} cores (user+sys, psutil); {summary['samples']} "
             f"samples (~{busy:.2f} threads active at {rate} Hz)", "",
             "| self % | function | | inclusive % | function |", "| ---: | --- | --- | ---: | --- |"]
    for i in range(max(len(summary["self"]), len(summary["inclusive"]))):
        s = summary["self"][i] if i < len(summary["self"]) else ("", "")
        c = summary["inclusive"][i] if i < len(summary["inclusive"]) else ("", "")
        lines.append(f"| {s[1]} | `{s[0]}` | | {c[1]} | `{c[0]}` |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketbox.perf.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds sampled (default %(default)s)")
    parser.add_argument("--rate", type=int, default=100, help="samples a second (default %(default)s)")
    parser.add_argument("--producer-threads", type=int, default=4)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--roles", default=",".join(ROLES_DEFAULT), help="default %(default)s")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "rocketbox-profile"))
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--gil", action="store_true",
                        help="only samples holding the GIL (py-spy --gil): Python work, not waits in native calls")
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(py_spy):
        print("py-spy not found: pip install py-spy into the venv", file=sys.stderr)
        return 2
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    os.makedirs(args.out, exist_ok=True)
    summaries = {}
    with tempfile.TemporaryDirectory(prefix="rocketbox-profile-") as tmp, LocalCluster(tmp) as cluster:
        cfg = client_config(cluster.namesrv)
        topic = "ProfileTopic"
        create_topic(cfg, topic)
        load_s = args.duration + 15
        producer = ProducerProcess(cluster.namesrv, topic, "batched", 100_000_000, args.body_bytes,
                                   threads=args.producer_threads, time_s_max=load_s).start()
        spies = {}
        try:
            producer.go()
            time.sleep(2.0)  # warm: segments allocated, routes cached
            pids = {"broker": cluster.pid("broker-a"), "reput": cluster.pid("broker-a-reput"),
                    "flush": cluster.pid("broker-a-flush"),   # allocate: a thread of the reput process
                    "namesrv": cluster.pid("namesrv-0"), "producer": producer.pid}
            procs = {role: psutil.Process(pids[role]) for role in roles}
            cpu_before = {role: sum(p.cpu_times()[:2]) for role, p in procs.items()}
            t_cpu = time.monotonic()
            for role in roles:
                raw = os.path.join(args.out, f"{role}.txt")
                spies[role] = (raw, subprocess.Popen(
                    [py_spy, "record", "--pid", str(pids[role]), "--duration", str(int(args.duration)),
                     "--rate", str(args.rate), "--nonblocking", "--format", "raw", "-o", raw]
                    + (["--gil"] if args.gil else []),
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            time.sleep(args.duration)
            window_s = time.monotonic() - t_cpu
            cpu = {role: round((sum(p.cpu_times()[:2]) - cpu_before[role]) / window_s, 2) for role, p in procs.items()}
            for role, (raw, proc) in spies.items():
                out, _ = proc.communicate(timeout=args.duration + 30)
                if proc.returncode != 0 or not os.path.exists(raw):
                    print(f"py-spy on {role} failed: {out[-1000:]}", file=sys.stderr)
                    continue
                summaries[role] = summarise(raw, args.top)
                summaries[role]["cpu_cores"] = cpu.get(role)
            result = producer.result()
        finally:
            for _, proc in spies.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
            producer.stop()
    rate = result["sent"] / result["elapsed_s"] if result.get("elapsed_s") else 0
    header = (f"## Profile under batched produce ({args.producer_threads} producer threads, batches of 256 x "
              f"{args.body_bytes} B): {rate:,.0f} msg/s over {result['elapsed_s']:.1f} s "
              f"(sampled {args.duration:.0f} s, some of it under py-spy's overhead)")
    text = "\n\n".join([header] + [_markdown(r, s, args.rate, args.duration) for r, s in summaries.items()])
    print(text)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"produce_msg_s": rate, "roles": summaries}, f, indent=2)
    print(f"\nraw stacks and summaries in {args.out}")
    return 0 if summaries else 1


if __name__ == "__main__":
    raise SystemExit(main())

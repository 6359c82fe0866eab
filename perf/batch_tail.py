"""``python -m rocketbox.perf.batch_tail``: batched sync sends to a master with one slave, in the shape
of the replication target (>= 100k msg/s with p99 < 2 ms under sync flush + sync replication): a few
producer threads, each ``send_batch`` waiting for its answer, a fresh cluster per run and mode,
the runs of each mode interleaved with the others'. Prints each run's rate and batch latency,
their medians, and the share of a core each process used while the batches ran (on two cores
the tail follows how many processes a batch wakes).

    python -m rocketbox.perf.batch_tail --modes sync-sync --batch 128 --threads 1 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import psutil

from rocketbox.cluster import Admin
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.perf.harness import client_config, create_topic, run_producers
from rocketbox.perf.report import percentile
from rocketbox.perf.scenarios.replication import REPLICATION_FLUSH_MODES

# "sync-sync" = sync replication + sync flush, as REPLICATION_FLUSH_MODES names them
MODES = {f"{label.split()[0]}-{label.split()[3]}": (role, flush) for role, flush, label in REPLICATION_FLUSH_MODES}
CPU_SHARE_SHOWN_MIN = 0.01


def _cpu_seconds(processes) -> dict[int, tuple[str, float]]:
    """pid -> (role, seconds of CPU so far); this process is "producer", a child its title's role."""
    seconds = {}
    for process in processes:
        try:
            times = process.cpu_times()
            role = "producer" if process.pid == os.getpid() else process.name().split(": ", 1)[-1]
            seconds[process.pid] = (role, times.user + times.system)
        except psutil.Error:
            pass   # gone (a restart): not counted
    return seconds


def one_run(tmp: str, mode: str, args, run: int) -> dict:
    role, flush = MODES[mode]
    store = {"commitlog_file_size_bytes": args.segment_mib << 20} if args.segment_mib else {}
    if args.no_preheat:
        store["preheat_enabled"] = False
    with LocalCluster(os.path.join(tmp, f"{mode}-{run}"), slaves=1, flush_mode=flush, store_overrides=store,
                      broker_overrides={"broker_role": role}) as cluster:
        admin_cfg = client_config(cluster.namesrv)
        master = f"tcp://{cluster.topology.brokers[0].address}"
        with Admin(config=admin_cfg) as admin:
            wait_until(lambda: admin.broker_runtime_info(master)["ha"]["inSync"], 30, what="slave in sync")
        create_topic(admin_cfg, "BatchTail")
        namesrv = cluster.namesrv if args.door == "native" else cluster.remoting_namesrv
        cfg = client_config(namesrv, transport=args.door)
        # Warm-up: routes, connections, the first segments' pages.
        run_producers(cfg, "BatchTail", args.batch * 200, args.body_bytes, args.batch, args.threads, 60)
        time.sleep(args.settle_s)
        here = psutil.Process()
        processes = [here, *here.children(recursive=True)]
        before = _cpu_seconds(processes)
        latencies: list = []
        statuses: dict = {}
        started = time.monotonic()
        sent, elapsed = run_producers(cfg, "BatchTail", args.batches * args.batch, args.body_bytes, args.batch,
                                      args.threads, args.seconds_max, latencies=latencies, statuses=statuses)
        wall = time.monotonic() - started
        after = _cpu_seconds(processes)
    if set(statuses) != {"SEND_OK"}:   # SLAVE_NOT_AVAILABLE is answered at once and would flatter the figures
        raise RuntimeError(f"{mode}: answers other than SEND_OK: {statuses}")
    cpu = {role: (spent - before[pid][1]) / wall for pid, (role, spent) in after.items() if pid in before}
    return {"rate": sent / elapsed, "p50": percentile(latencies, 0.5), "p90": percentile(latencies, 0.9),
            "p99": percentile(latencies, 0.99), "cpu": cpu}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="sync-sync", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--door", choices=("native", "remoting"), default="remoting")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=3000, help="per run, over all threads")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds-max", type=float, default=120)
    parser.add_argument("--settle-s", type=float, default=0.0,
                        help="idle time after the warm-up (1 GiB segments: the allocate workers' preheat)")
    parser.add_argument("--no-preheat", action="store_true", help="the allocate workers do not preheat segments")
    parser.add_argument("--segment-mib", type=int, default=0,
                        help="CommitLog segment size (default: LocalCluster's 16 MiB; cluster up's is 1024)")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}; known: {', '.join(MODES)}")
    results: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="rocketbox-batch-tail-") as tmp:
        for run in range(args.runs):
            for mode in modes:
                result = one_run(tmp, mode, args, run)
                results[mode].append(result)
                print(f"{mode} run {run + 1}: {result['rate']:,.0f} msg/s, batch p50 {result['p50']:,.0f} "
                      f"p90 {result['p90']:,.0f} p99 {result['p99']:,.0f} us", flush=True)
    print(f"\n{args.threads} thread(s) x {args.batch}, {args.body_bytes} B, {args.door} door, medians of "
          f"{args.runs}:")
    for mode, runs in results.items():
        def median(key):
            return statistics.median(r[key] for r in runs)
        print(f"  {mode}: {median('rate'):,.0f} msg/s, batch p50 {median('p50'):,.0f} us, "
              f"p90 {median('p90'):,.0f} us, p99 {median('p99'):,.0f} us (runs: "
              f"{', '.join(format(r['p99'], ',.0f') for r in runs)})")
        shares = runs[-1]["cpu"]
        busy = sorted(((share, name) for name, share in shares.items() if share >= CPU_SHARE_SHOWN_MIN),
                      reverse=True)
        print(f"    cores used in the last run: {sum(shares.values()):.2f} "
              f"({', '.join(name + format(share, ' .2f') for share, name in busy)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

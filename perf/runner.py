"""``python -m rocketbox.perf``: end-to-end benchmarks on real clusters, with the issue's targets beside them.

Every scenario brings up its own ``LocalCluster`` (a supervisor process with NameServer,
broker, flush, reput and allocate workers, all on 127.0.0.1) in a temporary directory,
measures, and stops it. Each figure is the median of ``--runs`` runs (3; 1 with
``--quick``) with min and max. Results: a rich table on stdout and ``perf/results.json``
(``--json PATH`` to write elsewhere).

Scenarios (``--only a,b``):

| name | what | target |
| --- | --- | --- |
| baseline | bare ZeroMQ PUSH/PULL over tcp 127.0.0.1, 100-byte messages joined 256 to a frame | (scale) |
| produce | one producer process (``--producer-threads`` threads): batches of 256 and single sync sends, 100 B and 1 KiB, async and sync flush | batched >= 1,000,000 msg/s |
| consume | a pre-filled topic drained by a PullConsumer, then by a PushConsumer | >= 1,500,000 msg/s |
| e2e | produce (another process) and consume at once; a message counts when consumed | >= 700,000 msg/s |
| latency | single sync sends one at a time, p50/p99 | p50 <= 80 us, p99 <= 180 us |
| e2e_latency | producer paced at 10k msg/s (``--paced-seconds``), body carries the send time, consumer measures receive - send | (reported) |
| group_commit | sync flush, batched, 1 and several producer threads | >= 200,000 msg/s |
| ready | ``LocalCluster.start`` and ``cluster up --detach`` (CLI) until ready; ``down`` | <= 2 s |
| rss | total RSS of an idle cluster (supervisor + children), LocalCluster and CLI defaults | <= 300 MB |
| replication | batched produce (256 x 100 B) to a master with one slave: ASYNC_MASTER, then SYNC_MASTER (each send answered once the slave holds it) | sync >= 50 % of async |
| replication_flush | a master with one slave, {async, sync} replication x {async, sync} flush: batched (256 x 100 B, ``--producer-threads``) throughput and publish latency of a batch p50/p99, and single sync sends p50/p99 | sync + sync: >= 100,000 msg/s batched, batch p99 <= 2 ms |
| failover | master + 1 slave, ``failover=True``, sync flush + sync replication, single sends going on: the master SIGSTOPped until a new epoch, or its broker SIGKILLed, ``--faults`` times each (perf/scenarios/failover.py); time to the first write accepted and to the first SEND_OK again; batched sync + sync with failover=False vs True | failover median <= 10 s, max <= 30 s |
| metrics | batched (256 x 100 B) and single sync sends to a cluster with Prometheus metrics on (scraped every second) and one with them off, side by side, runs alternating | (reported: on vs off) |
| grpc | RocketMQ 5's gRPC door (the proxy, driven by the official 5.x client from .venv-rocketmq5) beside the native and remoting doors: sync send p50/p99, produce, consume (SimpleConsumer receive + ack; the native pop), the proxy's CPU per message beside a bare grpc.aio servicer's | (reported) |

``--compare`` (perf/compare.py) runs the first variant of produce, consume, e2e, latency and
e2e_latency and the same measures on Redis Streams and NATS JetStream (perf/peers), then a row per door
(perf/door_rows.py): native, remoting through RocketMQ's C++ client, gRPC through its Node.js client,
and Apache RocketMQ through the same C++ client where it is built.

Back-of-envelope (2 cores, CPython): the broker is one Python thread. A batch of 256
costs it ~1 us a message of Python (batch decode, a store object, msg ids) plus a
fixed ~100-200 us a request, and the producer spends ~3-5 us a message building
Message objects, properties and unique keys: so one producer process should land
around 100-250k msg/s batched, a fifth to a tenth of the 1M target, and the bare
ZeroMQ baseline (~5-10M msg/s) shows the transport is not the limit. Unbatched sync
sends are bound by the round trip (~150-250 us through two processes' poll loops and
the store): ~4-7k msg/s per thread. Consume is bound by client-side decoding
(~3-5 us a message: ``decode_at`` + ``MessageExt``): ~200-300k msg/s. Ready time is
dominated by interpreter starts and imports of six processes (~0.2-0.3 s each, two
cores): ~1-2 s. Idle RSS: six CPython processes at ~25-40 MB each plus mapped store
pages the broker touched (preheat of the first CommitLog segment counts in every
process that maps it).

Every loop here is bounded by a count and by a deadline; clusters are stopped in
``finally`` blocks (context managers); a detached CLI cluster is brought ``down``
(and its supervisor sent SIGTERM if that fails).
"""


from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import asdict

from rocketbox.perf.harness import BATCH_SIZE, PRODUCER_THREADS_DEFAULT, QUEUE_COUNT, Settings
from rocketbox.perf.report import (RESULTS_PATH_DEFAULT, Report, command_line, git_commit, machine_info, markdown_table,
                         print_table)
from rocketbox.perf.scenarios import RUNNERS, SCENARIOS

# ---------------------------------------------------------------- main

def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rocketbox.perf", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run each, fewer messages (~2-3 minutes)")
    parser.add_argument("--only", help=f"comma-separated scenarios of: {', '.join(SCENARIOS)}")
    parser.add_argument("--json", default=None,
                        help="where to write results (default perf/results.json; with --compare perf/compare.json)")
    parser.add_argument("--messages", type=int, default=0, help="messages a batched run (200,000; quick 20,000)")
    parser.add_argument("--runs", type=int, default=0, help="runs a figure (3; quick 1)")
    parser.add_argument("--producer-threads", type=int, default=PRODUCER_THREADS_DEFAULT,
                        help="threads of the one producer process (default %(default)s)")
    parser.add_argument("--tmp-root", default=None, help="parent of the temporary cluster directories")
    parser.add_argument("--paced-seconds", type=float, default=0,
                        help="length of a run paced at 10k msg/s (10; quick 3)")
    parser.add_argument("--faults", type=int, default=0,
                        help="failover: master faults of each kind (7, back to back 15; quick 3), within ~3 minutes")
    parser.add_argument("--back-to-back", action="store_true",
                        help="failover: the next fault as soon as the group is healthy, not once every replica has "
                             "run past the supervisor's restart back-off reset (10 s)")
    parser.add_argument("--keep-logs", default=None,
                        help="failover: copy the cluster's logs/ into this directory before it is removed")
    parser.add_argument("--compare", action="store_true",
                        help="RocketBox against Redis Streams and NATS JetStream, and a row per door beside "
                             "Apache RocketMQ (perf/compare.py; `make peers`, `make real-clients node-client`)")
    parser.add_argument("--peers", default=None,
                        help="with --compare (implies it): comma-separated peers of redis_streams, nats_jetstream, apache_rocketmq, "
                             "or none (default: all)")
    parser.add_argument("--plot", default=None, help="with --compare: the plot (default perf/compare.png)")
    args = parser.parse_args(argv)
    args.compare = args.compare or args.peers is not None
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compare:
        from rocketbox.perf.compare import run_compare
        return run_compare(args, argv)
    args.json = args.json or RESULTS_PATH_DEFAULT
    names = list(SCENARIOS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in RUNNERS]
        if unknown:
            print(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
    settings = Settings(args)
    report = Report()
    started = time.time()
    info = machine_info()
    timings = {}
    with tempfile.TemporaryDirectory(prefix="rocketbox-perf-", dir=args.tmp_root) as tmp:
        if "baseline" not in names and any(n in names for n in ("produce", "consume", "e2e", "group_commit")):
            names.insert(0, "baseline")  # ratios need it; it takes a second
        for name in names:
            t0 = time.monotonic()
            print(f"[perf] {name} ...", flush=True)
            try:
                RUNNERS[name](settings, report, tmp)
            except Exception as exc:  # noqa: BLE001 - report and go on to the next scenario
                traceback.print_exc()
                report.errors.append({"scenario": name, "error": f"{type(exc).__name__}: {exc}"})
            timings[name] = round(time.monotonic() - t0, 1)
            print(f"[perf] {name} done in {timings[name]} s", flush=True)
    info["loadavg_at_end"] = os.getloadavg()
    command = command_line(argv)
    title = (f"RocketBox perf ({'quick' if settings.quick else 'full'}, {settings.runs} run(s), "
             f"{settings.messages:,} messages, {info['cpu_count']} cores)")
    print_table(report, title)
    out = {
        "command": command, "git_commit": git_commit(), "started_at": time.strftime(
            "%Y-%m-%dT%H:%M:%S%z", time.localtime(started)), "duration_s": round(time.time() - started, 1),
        "machine": info, "settings": {"quick": settings.quick, "runs": settings.runs, "messages": settings.messages,
                                      "producer_threads": settings.producer_threads, "batch": BATCH_SIZE,
                                      "queues": QUEUE_COUNT},
        "scenario_seconds": timings, "baseline_msg_s": report.baseline_msg_s,
        "rows": [{**asdict(r), "median": r.median, "met": r.met()} for r in report.rows],
        "errors": report.errors, "markdown": markdown_table(report),
    }
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2, default=str)
    print(f"[perf] wrote {args.json} ({out['duration_s']} s)")
    return 1 if report.errors else 0

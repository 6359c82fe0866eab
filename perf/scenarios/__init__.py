"""The scenario table of ``python -m rocketbox.perf``: name -> runner, in the order a full run takes them."""

from __future__ import annotations

from rocketbox.perf.scenarios.doors import scenario_doors
from rocketbox.perf.scenarios.failover import scenario_failover
from rocketbox.perf.scenarios.grpc_door import scenario_grpc
from rocketbox.perf.scenarios.latency import scenario_e2e_latency, scenario_latency
from rocketbox.perf.scenarios.lifecycle import scenario_ready, scenario_rss
from rocketbox.perf.scenarios.metrics import scenario_metrics
from rocketbox.perf.scenarios.overload import scenario_overload
from rocketbox.perf.scenarios.replication import scenario_replication, scenario_replication_flush
from rocketbox.perf.scenarios.throughput import (scenario_baseline, scenario_consume, scenario_e2e, scenario_group_commit,
                                       scenario_produce)

RUNNERS = {
    "baseline": scenario_baseline, "produce": scenario_produce, "consume": scenario_consume, "e2e": scenario_e2e,
    "latency": scenario_latency, "e2e_latency": scenario_e2e_latency, "group_commit": scenario_group_commit,
    "ready": scenario_ready, "rss": scenario_rss, "replication": scenario_replication,
    "replication_flush": scenario_replication_flush, "failover": scenario_failover, "doors": scenario_doors,
    "metrics": scenario_metrics, "grpc": scenario_grpc, "overload": scenario_overload,
}
SCENARIOS = tuple(RUNNERS)

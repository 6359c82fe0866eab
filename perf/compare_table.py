"""The comparison with the peers as a table: which of our rows each measure takes, and the ratio of
ours to the best peer. Pure rendering, shared by ``perf/compare.py`` and ``perf/results_md.py``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from rocketbox.perf.harness import PACED_RATE_MSG_S
from rocketbox.perf.report import format_value

OURS = "rocketbox"
OURS_LABEL = "RocketBox"
OURS_SCENARIOS = ("produce", "consume", "e2e", "latency", "e2e_latency")


@dataclass(frozen=True)
class Measure:
    key: str
    label: str
    unit: str
    better: str | None        # "higher", "lower", or None for a check (no ratio)
    ours_row: tuple[str, str]  # (scenario, measure) of our row in the report of perf/scenarios/
    # The peers' figure this measure sets ours against, when not their own ``key`` (one way of
    # ours beside the one way each peer has: our pull loop beside their consumers' read loops).
    peer_key: str | None = None

    def key_of(self, system: str) -> str:
        return self.key if system == OURS or self.peer_key is None else self.peer_key


MEASURES = (
    Measure("produce", "produce throughput, batched", "msg/s", "higher",
            ("produce", "batched 256, 100 B, async flush")),
    Measure("consume", "consume throughput, drain", "msg/s", "higher", ("consume", "PushConsumer drain, 100 B")),
    Measure("e2e", "end-to-end throughput", "msg/s", "higher",
            ("e2e", "produce + consume at once, 100 B, batched")),
    Measure("publish_p50", "publish latency p50", "us", "lower", ("latency", "sync send p50, async flush")),
    Measure("publish_p99", "publish latency p99", "us", "lower", ("latency", "sync send p99, async flush")),
    Measure("e2e_p50", f"end-to-end latency p50 at {PACED_RATE_MSG_S // 1000}k msg/s", "us", "lower",
            ("e2e_latency", "receive - send p50, batch per due tick")),
    Measure("e2e_p99", f"end-to-end latency p99 at {PACED_RATE_MSG_S // 1000}k msg/s", "us", "lower",
            ("e2e_latency", "receive - send p99, batch per due tick")),
    Measure("e2e_pull_p50", f"end-to-end latency p50 at {PACED_RATE_MSG_S // 1000}k msg/s, our pull loop", "us",
            "lower", ("e2e_latency", "receive - send p50, pull loop, 1 queue"), peer_key="e2e_p50"),
    Measure("e2e_pull_p99", f"end-to-end latency p99 at {PACED_RATE_MSG_S // 1000}k msg/s, our pull loop", "us",
            "lower", ("e2e_latency", "receive - send p99, pull loop, 1 queue"), peer_key="e2e_p99"),
    Measure("e2e_inline_p50", f"end-to-end latency p50 at {PACED_RATE_MSG_S // 1000}k msg/s, push, no consume pool",
            "us", "lower", ("e2e_latency", "receive - send p50, batch per due tick, no consume pool"),
            peer_key="e2e_p50"),
    Measure("e2e_inline_p99", f"end-to-end latency p99 at {PACED_RATE_MSG_S // 1000}k msg/s, push, no consume pool",
            "us", "lower", ("e2e_latency", "receive - send p99, batch per due tick, no consume pool"),
            peer_key="e2e_p99"),
    Measure("paced_rate", "paced rate achieved (check)", "msg/s", None,
            ("e2e_latency", "rate achieved, batch per due tick")),
)


def median_or_none(values) -> float | None:
    return statistics.median(values) if values else None


def ratio_to_best_peer(measure: Measure, systems: dict) -> tuple[float | None, str]:
    """(ours / best peer, that peer's label); None when ours or every peer lacks the figure."""
    ours = median_or_none(systems[OURS]["values"].get(measure.key))
    peers = [(median_or_none(s["values"].get(measure.key_of(name))), s["label"]) for name, s in systems.items()
             if name != OURS and s["values"].get(measure.key_of(name))]
    if measure.better is None or ours is None or not peers:
        return None, ""
    pick = max if measure.better == "higher" else min
    best, label = pick(peers, key=lambda p: p[0])
    return (ours / best if best else None), label


def ratio_text(measure: Measure, ratio: float | None, best_label: str) -> str:
    if ratio is None:
        return ""
    won = ratio >= 1 if measure.better == "higher" else ratio <= 1
    return f"{ratio:.2f} vs {best_label} ({measure.better} is better: {'ours' if won else 'peer'} ahead)"


def table_rows(result: dict) -> list[list[str]]:
    """measure, unit, one column a system (median, or why it is missing), ours / best peer."""
    systems = result["systems"]
    rows = []
    for measure in MEASURES:
        row = [measure.label, measure.unit]
        for name, system in systems.items():
            value = median_or_none(system["values"].get(measure.key_of(name)))
            row.append(format_value(value, measure.unit) if value is not None else
                       system["status"] if system["status"] != "measured" else "-")
        row.append(ratio_text(measure, *ratio_to_best_peer(measure, systems)))
        rows.append(row)
    return rows


def header(result: dict) -> list[str]:
    return ["measure", "unit", *[s["label"] for s in result["systems"].values()], "ours / best peer"]


def markdown(result: dict) -> str:
    lines = ["| " + " | ".join(header(result)) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in result["systems"]) + " | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(result)]
    return "\n".join(lines)

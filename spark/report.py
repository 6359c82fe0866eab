"""The load run's report: throughput, latency percentiles, the anomaly table, a JSON file
and a latency plot (PNG), Jepsen's latency-raw style with the faults shaded.

Figures are computed in Spark (aggregates only); the plot collects a bounded sample.
"""

from __future__ import annotations

import json
import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketbox.spark import checker
from rocketbox.spark.schemas import FAIL, INFO, OK, READER_PUSH

QUANTILES = (0.5, 0.95, 0.99, 0.999)
PLOT_POINTS_MAX = 20_000


def _percentiles(df: DataFrame, column: str) -> dict:
    """p50..p99.9 and max of ``column`` (ms), exact up to Spark's 1/10000 accuracy."""
    row = df.agg(F.percentile_approx(column, list(QUANTILES), 10_000).alias("q"), F.max(column).alias("max"),
                 F.count(column).alias("n")).first()
    if not row["n"]:
        return {"count": 0}
    out = {f"p{q * 100:g}": float(v) for q, v in zip(QUANTILES, row["q"])}
    out.update(max=float(row["max"]), count=int(row["n"]))
    return out


def requests(attempts: DataFrame) -> DataFrame:
    """One row per send request (a batch's messages share theirs): outcome and latency."""
    return (attempts.groupBy("process", "invoke_ns", "complete_ns", "type").agg(F.count("*").alias("messages"))
            .withColumn("latency_ms", (F.col("complete_ns") - F.col("invoke_ns")) / 1e6))


def end_to_end(history: DataFrame, reads: DataFrame) -> DataFrame:
    """First push delivery of each message against its first send attempt: latency_ms, at_ns."""
    first_invoke = checker.attempts(history).groupBy("msg_id").agg(F.min("invoke_ns").alias("invoke_ns"))
    first_delivery = (reads.filter(F.col("reader") == READER_PUSH).groupBy("msg_id")
                      .agg(F.min("delivered_ns").alias("at_ns")))
    return (first_delivery.join(first_invoke, "msg_id")
            .withColumn("latency_ms", (F.col("at_ns") - F.col("invoke_ns")) / 1e6))


def measures(history: DataFrame, reads: DataFrame, anomalies: DataFrame) -> dict:
    attempts = checker.attempts(history).cache()
    reqs = requests(attempts).cache()
    counts = {r["type"]: r["count"] for r in attempts.groupBy("type").count().collect()}
    span = attempts.agg(F.min("invoke_ns").alias("a"), F.max("complete_ns").alias("b")).first()
    duration_s = max(1e-9, ((span["b"] or 0) - (span["a"] or 0)) / 1e9)
    acknowledged = attempts.filter(F.col("type") == OK).select("msg_id").distinct().count()
    sent = attempts.select("msg_id").distinct().count()
    read_counts = {r["reader"]: r["n"] for r in
                   reads.groupBy("reader").agg(F.countDistinct("msg_id").alias("n")).collect()}
    result = {
        "messages_sent": sent,
        "acknowledged": acknowledged,
        "attempts": {t: int(counts.get(t, 0)) for t in (OK, FAIL, INFO)},
        "requests": reqs.count(),
        "load_duration_s": duration_s,
        "load_span_ns": [span["a"], span["b"]],
        "throughput_acknowledged_msg_s": acknowledged / duration_s,
        "publish_latency_ms": _percentiles(reqs.filter(F.col("type") == OK), "latency_ms"),
        "end_to_end_latency_ms": _percentiles(end_to_end(history, reads), "latency_ms"),
        "distinct_read": read_counts,
        "anomalies": [r.asDict() for r in checker.summary(anomalies).collect()],
    }
    result["lost"] = sum(a["count"] for a in result["anomalies"] if a["anomaly"] == checker.LOST)
    result["unexplained"] = sum(a["count"] for a in result["anomalies"] if a["explained"] is None)
    attempts.unpersist()
    reqs.unpersist()
    return result


def failover_summary(faults: list[dict]) -> dict:
    """Failover mode: how many faults changed the master's epoch, and how fast (from the events)."""
    times = sorted(f["to_new_master_s"] for f in faults if f.get("failover") and f.get("to_new_master_s"))
    healthy = sorted(f["to_healthy_s"] for f in faults if f.get("to_healthy_s") is not None)
    summary = {"faults": len(faults), "failovers": sum(1 for f in faults if f.get("failover")),
               "to_new_master_s": times, "to_healthy_s_max": max(healthy) if healthy else None}
    if times:
        summary.update(to_new_master_s_min=times[0], to_new_master_s_median=times[len(times) // 2],
                       to_new_master_s_max=times[-1])
    return summary


def print_report(result: dict, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    table = Table(title="RocketBox load run")
    table.add_column("measure")
    table.add_column("value", justify="right")
    target = result.get("target")
    if target:
        where = "a local cluster" if target["local_cluster"] else "the cluster at"
        table.add_row("cluster", f"{where} {target['namesrv']} ({target['transport']} protocol)")
        table.add_row("fault injection", target["faults"])
    table.add_row("messages sent / acknowledged", f"{result['messages_sent']:,} / {result['acknowledged']:,}")
    a = result["attempts"]
    table.add_row("attempts ok / fail / indeterminate", f"{a['ok']:,} / {a['fail']:,} / {a['info']:,}")
    table.add_row("send requests", f"{result['requests']:,}")
    table.add_row("load duration", f"{result['load_duration_s']:.2f} s")
    table.add_row("throughput (acknowledged)", f"{result['throughput_acknowledged_msg_s']:,.0f} msg/s")
    for title, name in (("publish latency", "publish_latency_ms"), ("end-to-end latency (push)",
                                                                     "end_to_end_latency_ms")):
        p = result[name]
        if p.get("count"):
            table.add_row(f"{title} p50 / p95 / p99 / p99.9 / max",
                          f"{p['p50']:.2f} / {p['p95']:.2f} / {p['p99']:.2f} / {p['p99.9']:.2f} / "
                          f"{p['max']:.1f} ms")
    for reader, n in sorted(result["distinct_read"].items()):
        table.add_row(f"distinct messages read ({reader})", f"{n:,}")
    faults = result.get("faults", [])
    if faults:
        kinds = {}
        for f in faults:
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        table.add_row("faults injected", ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())))
    failover = result.get("failover")
    if failover:
        table.add_row("faults / failovers (new epoch)", f"{failover['faults']} / {failover['failovers']}")
        if failover["to_new_master_s"]:
            table.add_row("fault to new master min / median / max",
                          f"{failover['to_new_master_s_min']:.2f} / {failover['to_new_master_s_median']:.2f} / "
                          f"{failover['to_new_master_s_max']:.2f} s")
        if failover["to_healthy_s_max"] is not None:
            table.add_row("fault to group healthy again (max)", f"{failover['to_healthy_s_max']:.2f} s")
    replicas = result.get("replicas")
    if replicas:
        if replicas["identical"]:
            verdict = f"identical up to {replicas['end']:,} bytes"
        elif replicas["error"]:
            verdict = f"NOT compared: {replicas['error']}"
        else:
            verdict = f"DIFFER at byte {replicas['first_difference']:,} (common end {replicas['end']:,})"
        table.add_row(f"replica CommitLogs ({', '.join(replicas['replicas'])})", verdict)
    catch_up = result.get("catch_up")
    if catch_up and not catch_up["caught_up"]:
        table.add_row("push group's committed offsets at the end",
                      f"{catch_up['behind']:,} behind the queue ends ({catch_up['stopped']})")
    if result.get("fault_error"):
        table.add_row("fault injection error", result["fault_error"])
    table.add_row("lost (acknowledged, never read)", f"{result['lost']}")
    console.print(table)
    if failover and faults:
        events = Table(title="faults (failover mode): the controller's epoch and master around each")
        for column in ("#", "kind", "target", "epoch", "master after", "to new master", "to healthy"):
            events.add_column(column)
        origin = faults[0]["start_ns"]
        for i, f in enumerate(faults, 1):
            events.add_row(f"{i} (+{(f['start_ns'] - origin) / 1e9:.1f} s)", f["kind"], f["target"],
                           f"{f['epoch_before']} -> {f['epoch_after']}", f["master_after"] or "",
                           f"{f['to_new_master_s']:.2f} s" if f.get("to_new_master_s") else "-",
                           f"{f['to_healthy_s']:.2f} s" if f.get("to_healthy_s") is not None else "-")
        console.print(events)
    cases = Table(title="anomalies (explained: why it is allowed; blank: a violation)")
    for column in ("anomaly", "reader", "explained", "cases"):
        cases.add_column(column)
    for row in result["anomalies"]:
        cases.add_row(row["anomaly"], row["reader"] or "", row["explained"] or "", f"{row['count']:,}")
    if not result["anomalies"]:
        cases.add_row("none", "", "", "0")
    console.print(cases)


def write_json(result: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True, default=str)


def plot(history: DataFrame, reads: DataFrame, faults: list[dict], path: str) -> None:
    """Publish latency of every request and end-to-end latency of a sample, over time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reqs = requests(checker.attempts(history)).filter(F.col("complete_ns").isNotNull())
    total = reqs.count()
    if total > PLOT_POINTS_MAX:
        reqs = reqs.sample(PLOT_POINTS_MAX / total, seed=1)
    req_rows = reqs.select("invoke_ns", "latency_ms", "type").collect()
    e2e = end_to_end(history, reads)
    e2e_total = e2e.count()
    if e2e_total > PLOT_POINTS_MAX:
        e2e = e2e.sample(PLOT_POINTS_MAX / e2e_total, seed=1)
    e2e_rows = e2e.select("at_ns", "latency_ms").collect()
    origin = min([r["invoke_ns"] for r in req_rows] or [0])

    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    colors = {OK: "tab:blue", INFO: "tab:orange", FAIL: "tab:red"}
    for kind, color in colors.items():
        points = [((r["invoke_ns"] - origin) / 1e9, r["latency_ms"]) for r in req_rows if r["type"] == kind]
        if points:
            xs, ys = zip(*points)
            axes[0].scatter(xs, ys, s=3, c=color, label=kind, alpha=0.6)
    axes[0].set_ylabel("publish latency (ms)")
    axes[0].set_yscale("log")
    axes[0].legend(loc="upper right", markerscale=4)
    if e2e_rows:
        axes[1].scatter([(r["at_ns"] - origin) / 1e9 for r in e2e_rows], [r["latency_ms"] for r in e2e_rows],
                        s=2, c="tab:green", alpha=0.5)
    axes[1].set_ylabel("end-to-end latency, push (ms)")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("seconds since the load began")
    for fault in faults:
        for ax in axes:
            ax.axvspan((fault["start_ns"] - origin) / 1e9, max((fault["end_ns"] - origin) / 1e9,
                                                                 (fault["start_ns"] - origin) / 1e9 + 0.05),
                       color="grey", alpha=0.25)
        axes[0].annotate(fault["kind"], ((fault["start_ns"] - origin) / 1e9, 1), xycoords=("data", "axes fraction"),
                         rotation=90, va="top", fontsize=7)
    fig.suptitle("RocketBox load: latency over time (grey: faults)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)

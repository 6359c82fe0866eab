"""``python -m rocketbox.perf --compare``: RocketBox against the systems users would pick instead, in one run.

The OpenMessaging Benchmark's measures, the same for every system, with 100-byte bodies and
the same counts (``--messages``, ``--runs``, ``--producer-threads``, ``--paced-seconds``):

| measure | ours (perf/e2e.py scenario, first variant) | peers (perf/peers/base.py ``measure``) |
| --- | --- | --- |
| produce throughput | ``produce``: batched 256, async flush, one process of N threads | batched, acks awaited, one process |
| consume throughput | ``consume``: PushConsumer (group, offsets committed) drains a pre-filled topic | consumer group drains the produced stream, acking |
| end-to-end throughput | ``e2e``: producer process + consumer here, counted when consumed | the same layout |
| publish latency p50/p99 | ``latency``: one sync send at a time, async flush | one publish at a time, waiting for its ack |
| end-to-end latency p50/p99 | ``e2e_latency``: 10k msg/s, a batch per due tick, receive - send | the same pacing (``Pacer``) and stamps |
| the same, our pull loop | ``e2e_latency``: a PullConsumer long-polling a 1-queue topic in one thread (the shape of the peers' read loops) | the peers' end-to-end latency above |
| the same, push without a consume pool | ``e2e_latency``: the PushConsumer with ``consume_threads=0`` (its listener on the I/O thread that received the pull) | the peers' end-to-end latency above |

The peers (perf/peers: Redis Streams, NATS JetStream) are started on free 127.0.0.1 ports in
the run's temporary directory and stopped after; one not installed (``make peers``) is
reported as such and ours is measured alone. A second table has a row per door, each through a
client of its own protocol, with Apache RocketMQ beside the remoting row (perf/door_table.py,
perf/door_rows.py). Output: one rich table with "ours / best peer", the door table,
``perf/compare.json``, the plot ``perf/compare.png``; a full run written to the default JSON
also rewrites the comparison table of perf/RESULTS.md (perf/results_md.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback

from rocketbox.perf.compare_table import MEASURES, OURS, OURS_LABEL, OURS_SCENARIOS, header, markdown, median_or_none, table_rows
from rocketbox.perf.door_rows import measure_doors
from rocketbox.perf.door_table import door_header, door_markdown, door_rows, remoting_vs_apache
from rocketbox.perf.harness import PACED_RATE_MSG_S, Settings
from rocketbox.perf.report import PERF_DIR, Report, command_line, format_value, git_commit, machine_info
from rocketbox.perf.scenarios import RUNNERS

COMPARE_JSON_DEFAULT = os.path.join(PERF_DIR, "compare.json")
COMPARE_PLOT_DEFAULT = os.path.join(PERF_DIR, "compare.png")
def print_table(result: dict, title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title)
    for i, name in enumerate(header(result)):
        table.add_column(name, justify="left" if i < 2 or i == len(header(result)) - 1 else "right")
    for row in table_rows(result):
        table.add_row(*row)
    console = Console(width=180)
    console.print(table)
    for system in result["systems"].values():
        if system["status"] != "measured":
            console.print(f"[yellow]{system['label']}: {system['status']}, {system['reason']}[/yellow]")
    for error in result["errors"]:
        console.print(f"[red]{error['system']} failed:[/red] {error['error']}")


def print_door_table(doors: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title="A row per door: each door through a client of its own protocol (perf/door_table.py)")
    for i, name in enumerate(door_header()):
        table.add_column(name, justify="left" if i < 2 or i == len(door_header()) - 1 else "right")
    for row in door_rows(doors):
        table.add_row(*row)
    console = Console(width=180)
    console.print(table)
    ratio = remoting_vs_apache(doors)
    if ratio:
        console.print(ratio)


def plot(result: dict, path: str) -> None:
    """Grouped bars a measure, a bar a system: throughput on the left, latency (log scale) on the right."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    systems = result["systems"]
    panels = [("msg/s", "throughput (msg/s, higher is better)", False),
              ("us", "latency (us, lower is better, log scale)", True)]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    width = 0.8 / len(systems)
    for ax, (unit, title, log) in zip(axes, panels):
        measures = [m for m in MEASURES if m.unit == unit and m.better is not None]
        for i, (name, system) in enumerate(systems.items()):
            heights = [median_or_none(system["values"].get(m.key_of(name))) or 0 for m in measures]
            label = system["label"] if system["status"] == "measured" else f"{system['label']} (not measured)"
            bars = ax.bar([j + (i - (len(systems) - 1) / 2) * width for j in range(len(measures))], heights,
                          width, label=label)
            ax.bar_label(bars, labels=[format_value(h, unit) if h else "" for h in heights], fontsize=7, rotation=90,
                         padding=2)
        ax.set_xticks(range(len(measures)), [m.label.replace(" at ", "\nat ").replace(", ", ",\n")
                                             for m in measures], fontsize=8)
        ax.set_title(title, fontsize=10)
        if log:
            ax.set_yscale("log")
        else:
            ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        ax.margins(y=0.25)
        ax.legend(fontsize=8)
    fig.suptitle(f"{result['title']}\n{result['command']} @ {result['git_commit']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def measure_ours(s: Settings, tmp: str, errors: list) -> dict[str, list[float]]:
    """Our scenarios of perf/e2e.py in compare mode (first variants), picked into the comparison's measures."""
    report = Report()
    for name in OURS_SCENARIOS:
        print(f"[perf] {OURS_LABEL} {name} ...", flush=True)
        try:
            RUNNERS[name](s, report, tmp)
        except Exception as exc:  # noqa: BLE001 - report and go on
            traceback.print_exc()
            errors.append({"system": OURS, "scenario": name, "error": f"{type(exc).__name__}: {exc}"})
    rows = {(r.scenario, r.measure): r.values for r in report.rows}
    return {m.key: rows[m.ours_row] for m in MEASURES if m.ours_row in rows}


def selected_peers(spec: str | None) -> tuple[list, object | None]:
    """(the peers of the first table, the Apache RocketMQ peer of the door table or None) that ``--peers`` names."""
    from rocketbox.perf.peers import DOOR_PEERS, PEERS
    if spec is None or spec.strip() in ("", "all"):
        names = [*PEERS, *DOOR_PEERS]
    else:
        names = [n.strip() for n in spec.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in PEERS and n not in DOOR_PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s) {unknown}; choose from {', '.join([*PEERS, *DOOR_PEERS])} or none")
    door_peers = [DOOR_PEERS[n]() for n in names if n in DOOR_PEERS]
    return [PEERS[n]() for n in names if n in PEERS], (door_peers[0] if door_peers else None)


def run_compare(args, argv=None) -> int:
    from rocketbox.perf.peers.base import measure
    try:
        peers, apache_peer = selected_peers(args.peers)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    args.compare = True
    s = Settings(args)
    json_path = args.json or COMPARE_JSON_DEFAULT
    plot_path = args.plot or COMPARE_PLOT_DEFAULT
    started = time.time()
    info = machine_info()
    errors: list[dict] = []
    # status: measured, not installed or failed; reason: why not.
    systems = {OURS: {"label": OURS_LABEL, "status": "measured", "reason": "", "about": "", "values": {}}}
    for peer in peers:
        reason = peer.missing()
        systems[peer.name] = {"label": peer.label, "values": {}, "status": "not installed" if reason else "measured",
                              "reason": f"{reason}; `make peers` installs it" if reason else "",
                              "about": "" if reason else peer.describe()}
    absent = [system["label"] for system in systems.values() if system["status"] != "measured"]
    if absent:
        print(f"[perf] not installed, so not compared: {', '.join(absent)}; `make peers` installs them. "
              f"Measuring {'ours alone' if len(absent) == len(peers) else 'the others'}.", flush=True)
    timings = {}
    with tempfile.TemporaryDirectory(prefix="rocketbox-compare-", dir=args.tmp_root) as tmp:
        t0 = time.monotonic()
        systems[OURS]["values"] = measure_ours(s, tmp, errors)
        timings[OURS] = round(time.monotonic() - t0, 1)
        for peer in peers:
            if systems[peer.name]["status"] != "measured":
                continue
            print(f"[perf] {peer.label} ...", flush=True)
            t0 = time.monotonic()
            try:
                systems[peer.name]["values"] = measure(peer, s, tmp)
            except Exception as exc:  # noqa: BLE001 - report and go on to the next peer
                traceback.print_exc()
                systems[peer.name]["status"] = "failed"
                systems[peer.name]["reason"] = f"{type(exc).__name__}: {exc}"
                errors.append({"system": peer.name, "error": f"{type(exc).__name__}: {exc}"})
            timings[peer.name] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        doors = measure_doors(s, tmp, systems[OURS]["values"], apache_peer, errors)
        timings["doors"] = round(time.monotonic() - t0, 1)
    info["loadavg_at_end"] = os.getloadavg()
    result = {
        "title": (f"RocketBox vs peers ({'quick' if s.quick else 'full'}, median of {s.runs} run(s), "
                  f"{s.messages:,} messages of 100 B, {info['cpu_count']} cores)"),
        "command": command_line(argv), "git_commit": git_commit(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": round(time.time() - started, 1), "machine": info,
        "settings": {"quick": s.quick, "runs": s.runs, "messages": s.messages, "body_bytes": 100,
                     "producer_threads": s.producer_threads, "paced_rate_msg_s": PACED_RATE_MSG_S,
                     "paced_s": s.paced_s, "latency_sends": s.latency_sends()},
        "measures": [{"key": m.key, "label": m.label, "unit": m.unit, "better": m.better} for m in MEASURES],
        "systems": systems, "doors": doors, "system_seconds": timings, "errors": errors,
    }
    result["markdown"] = markdown(result)
    result["doors_markdown"] = door_markdown(doors)
    print_table(result, result["title"])
    print_door_table(doors)
    with open(json_path, "w") as f:
        json.dump(result, f, indent=2, default=str)
    plot(result, plot_path)
    print(f"[perf] wrote {json_path} and {plot_path} ({result['duration_s']} s)")
    if not s.quick and os.path.abspath(json_path) == COMPARE_JSON_DEFAULT:
        from rocketbox.perf.results_md import update_compare
        update_compare(result)
        print("[perf] rewrote the comparison table of perf/RESULTS.md")
    return 1 if errors else 0

"""Rewrite the tables of perf/RESULTS.md from perf/results.json and perf/compare.json: ``python -m rocketbox.perf.results_md``.

Only the parts between the ``<!-- results table -->`` and ``<!-- compare table -->`` markers
change; the analysis around them is written by hand. The "first run" column keeps the figures
of the first full run of the project (commit ef82ed7), before the optimisations RESULTS.md
lists. A full ``python -m rocketbox.perf --compare`` rewrites the comparison table itself.
"""

from __future__ import annotations

import json
import os
import sys

from rocketbox.perf.compare_table import markdown

PERF_DIR = os.path.dirname(os.path.abspath(__file__))
BEGIN = "<!-- results table -->"
END = "<!-- /results table -->"
COMPARE_BEGIN = "<!-- compare table -->"
COMPARE_END = "<!-- /compare table -->"
RESULTS_MD = os.path.join(PERF_DIR, "RESULTS.md")

FIRST_RUN = {
    ("produce", "batched 256, 100 B, async flush"): 286938, ("produce", "batched 256, 1 KiB, async flush"): 141337,
    ("produce", "batched 256, 100 B, sync flush"): 161252, ("produce", "single sync, 100 B, async flush"): 5528,
    ("consume", "PullConsumer drain, 100 B"): 200174, ("consume", "PushConsumer drain, 100 B"): 200946,
    ("e2e", "produce + consume at once, 100 B, batched"): 95368, ("latency", "sync send p50, async flush"): 271,
    ("latency", "sync send p99, async flush"): 1022,
    ("group_commit", "sync flush, batched 256, 4 thread(s)"): 228691,
    ("group_commit", "sync flush, batched 256, 8 thread(s)"): 242685, ("ready", "LocalCluster.start until ready"): 0.62,
    ("ready", "cluster down (CLI)"): 3.2, ("rss", "idle RSS, cluster up (default sizes)"): 732,
    ("rss", "idle RSS, LocalCluster (16 MiB segments)"): 165,
}


def _number(value: float, unit: str) -> str:
    return f"{value:.2f}" if unit == "s" else f"{value:,.0f}"


def render(results: dict) -> str:
    machine = results["machine"]
    lines = [
        f"Produced by `{results['command']}` at commit `{results['git_commit']}`, {results['started_at']}, "
        f"in {results['duration_s']:.0f} s; raw data `perf/results.json`. Machine: {machine['cpu_model']}, "
        f"{machine['cpu_count']} cores, Python {machine['python']}, load average at start "
        f"{machine['loadavg_at_start'][0]:.1f}.",
        "",
        "| scenario | measure | median | min | max | unit | target | met | x baseline | first run |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | :---: | ---: | ---: |",
    ]
    for row in results["rows"]:
        target = row["target"]
        met = "" if row["met"] is None else ("met" if row["met"] else "NOT met")
        ratio = f"{row['median'] / results['baseline_msg_s']:.3f}" if row["unit"] == "msg/s" else ""
        first = FIRST_RUN.get((row["scenario"], row["measure"]))
        unit = row["unit"]
        lines.append(" | ".join([
            f"| {row['scenario']}", row["measure"], _number(row["median"], unit), _number(min(row["values"]), unit),
            _number(max(row["values"]), unit), unit, f"{target[0]} {target[1]:,}" if target else "", met, ratio,
            _number(first, unit) if first is not None else ""]) + " |")
    return "\n".join(lines)


def render_compare(result: dict) -> str:
    machine = result["machine"]
    about = "; ".join(f"{s['label']}: {s['about'] or s['reason']}" for s in result["systems"].values()
                      if s["about"] or s["reason"])
    return "\n".join([
        f"Produced by `{result['command']}` at commit `{result['git_commit']}`, {result['started_at']}, in "
        f"{result['duration_s']:.0f} s; raw data `perf/compare.json`, plot `perf/compare.png`. {result['title']}. "
        f"Machine: {machine['cpu_model']}, {machine['cpu_count']} cores, Python {machine['python']}, load "
        f"average at start {machine['loadavg_at_start'][0]:.1f}." + (f" {about}." if about else ""),
        "",
        markdown(result),
        *(["", "A row per door, each through a client of its own protocol (perf/door_table.py):", "",
            result["doors_markdown"]] if result.get("doors_markdown") else []),
    ])


def rewrite_section(begin: str, end: str, body: str, path: str = RESULTS_MD) -> None:
    """Replace what lies between the ``begin`` and ``end`` markers of ``path`` with ``body``."""
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(f"{head}{begin}\n{body}\n{end}{tail}")


def update_compare(result: dict) -> None:
    rewrite_section(COMPARE_BEGIN, COMPARE_END, render_compare(result))


def main(argv=None) -> int:
    try:
        with open(os.path.join(PERF_DIR, "results.json")) as f:
            rewrite_section(BEGIN, END, render(json.load(f)))
        compare_path = os.path.join(PERF_DIR, "compare.json")
        if os.path.exists(compare_path):
            with open(compare_path) as f:
                update_compare(json.load(f))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

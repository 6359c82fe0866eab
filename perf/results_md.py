"""Rewrite the table of perf/RESULTS.md from perf/results.json: ``python -m perf.results_md``.

Only the part between the ``<!-- results table -->`` markers changes; the analysis around it
is written by hand. The "first run" column keeps the figures of the first full run of the
project (commit ef82ed7), before the optimisations RESULTS.md lists.
"""

from __future__ import annotations

import json
import os
import sys

PERF_DIR = os.path.dirname(os.path.abspath(__file__))
BEGIN = "<!-- results table -->"
END = "<!-- /results table -->"

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


def main(argv=None) -> int:
    with open(os.path.join(PERF_DIR, "results.json")) as f:
        results = json.load(f)
    path = os.path.join(PERF_DIR, "RESULTS.md")
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        print(f"{path} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(f"{head}{BEGIN}\n{render(results)}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The report of ``python -m rocketbox.perf``: rows of figures with the issue's targets beside them, as a
table on the terminal and as markdown, plus where and on what machine they were measured."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass, field


PERF_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS_PATH_DEFAULT = os.path.join(PERF_DIR, "results.json")

TARGETS = {
    "produce_batched": (">=", 1_000_000),
    "consume": (">=", 1_500_000),
    "e2e": (">=", 700_000),
    "latency_p50": ("<=", 80),
    "latency_p99": ("<=", 180),
    "group_commit": (">=", 200_000),
    "ready": ("<=", 2.0),
    "rss": ("<=", 300),
    "replication_sync_share": (">=", 50),
    "replication_sync_sync": (">=", 100_000),
    "replication_sync_sync_p99": ("<=", 2000),
}


# ---------------------------------------------------------------- results

@dataclass
class Row:
    scenario: str
    measure: str
    unit: str
    values: list[float]
    target: tuple[str, float] | None = None
    vs_baseline: bool = False
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def met(self) -> bool | None:
        if self.target is None or self.median is None:
            return None
        op, value = self.target
        return self.median >= value if op == ">=" else self.median <= value


class Report:
    def __init__(self):
        self.rows: list[Row] = []
        self.errors: list[dict] = []
        self.baseline_msg_s: float | None = None

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "msg/s":
        return f"{value:,.0f}"
    if unit == "us":
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.2f}"
    if unit == "MB":
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def print_table(report: Report, title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title)
    for name, justify in (("scenario", "left"), ("measure", "left"), ("median", "right"), ("min", "right"),
                          ("max", "right"), ("unit", "left"), ("target", "right"), ("met", "center"),
                          ("x baseline", "right")):
        table.add_column(name, justify=justify)
    for row in report.rows:
        met = row.met()
        ratio = ""
        if row.vs_baseline and report.baseline_msg_s and row.median:
            ratio = f"{row.median / report.baseline_msg_s:.3f}"
        table.add_row(row.scenario, row.measure, format_value(row.median, row.unit),
                      format_value(min(row.values) if row.values else None, row.unit),
                      format_value(max(row.values) if row.values else None, row.unit), row.unit,
                      f"{row.target[0]} {format_value(row.target[1], row.unit)}" if row.target else "",
                      "" if met is None else ("[green]met[/green]" if met else "[red]not met[/red]"), ratio)
    Console(width=160).print(table)
    for error in report.errors:
        Console(width=160).print(f"[red]scenario {error['scenario']} failed:[/red] {error['error']}")


def markdown_table(report: Report) -> str:
    lines = ["| scenario | measure | median | min | max | unit | target | met | x baseline |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: | :---: | ---: |"]
    for row in report.rows:
        met = row.met()
        ratio = ""
        if row.vs_baseline and report.baseline_msg_s and row.median:
            ratio = f"{row.median / report.baseline_msg_s:.3f}"
        target = f"{row.target[0]} {format_value(row.target[1], row.unit)}" if row.target else ""
        lines.append(f"| {row.scenario} | {row.measure} | {format_value(row.median, row.unit)} | "
                     f"{format_value(min(row.values) if row.values else None, row.unit)} | "
                     f"{format_value(max(row.values) if row.values else None, row.unit)} | {row.unit} | {target} | "
                     f"{'' if met is None else ('met' if met else 'NOT met')} | {ratio} |")
    return "\n".join(lines)


def machine_info() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import psutil
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu_model": model,
            "cpu_count": os.cpu_count(), "memory_total_mb": psutil.virtual_memory().total // 2**20,
            "loadavg_at_start": os.getloadavg()}


def command_line(argv=None) -> str:
    return ("python -m rocketbox.perf " + " ".join(argv if argv is not None else sys.argv[1:])).strip()


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PERF_DIR, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

"""The ``bench`` fixture: pytest-benchmark in full, or one quick round.

Quick mode (env ``ROCKETBOX_BENCH_QUICK=1`` or ``--bench-quick``) runs each benchmark
body once, with no warm-up, so tests/test_perf_quick.py can keep the benchmarks
from rotting in a second or two. Combine with ``--benchmark-disable`` to skip
pytest-benchmark's statistics altogether.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--bench-quick", action="store_true", default=False,
                     help="run each RocketBox benchmark once (also: ROCKETBOX_BENCH_QUICK=1)")


def quick_mode(config) -> bool:
    return os.environ.get("ROCKETBOX_BENCH_QUICK") == "1" or bool(config.getoption("--bench-quick"))


@pytest.fixture
def bench(benchmark, request):
    """``bench(fn, *args)`` -> fn's result, timed by pytest-benchmark (once in quick mode)."""
    quick = quick_mode(request.config)

    def run(fn, *args):
        if quick:
            return benchmark.pedantic(fn, args=args, rounds=1, iterations=1, warmup_rounds=0)
        return benchmark(fn, *args)

    return run

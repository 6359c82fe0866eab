"""The coverage-guided targets (``atheris_targets.py``), each in a process of its own for its share
of the budget; skipped, with the reason printed, where atheris is not installed (it is in the
``test`` extra, but it is a native wheel and the fuzz tests do not depend on it). A crash fails the
test with the traceback and the path of the input that caused it."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

from tests.fuzz.budget import TALLY

REPO = pathlib.Path(__file__).resolve().parents[2]
TARGETS = ("sql92", "fastjson", "remoting_payload", "rpc_header", "batch_body", "commitlog_records",
           "white_address", "topic_attributes")
# Start-up of a target's process (imports, instrumenting the parsers) comes out of its share.
STARTUP_S = 1.5
_EXECUTED = re.compile(r"stat::number_of_executed_units:\s*(\d+)")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("atheris") is None,
                                reason="atheris is not installed (pip install atheris, or the test extra): "
                                       "the coverage-guided fuzz targets are skipped; the hypothesis ones ran")


@pytest.mark.fuzz(weight=1.0)
@pytest.mark.parametrize("target", TARGETS)
def test_coverage_guided_target_finds_no_crash(fuzz_seconds, target, tmp_path):
    seconds = max(1, int(fuzz_seconds - STARTUP_S))
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.atheris_targets", target, str(seconds), str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, errors="replace", timeout=seconds + 120)
    tally = TALLY.target(f"{target} (atheris)", "atheris")
    executed = _EXECUTED.findall(proc.stderr)
    tally.inputs += int(executed[-1]) if executed else 0
    tally.seconds += seconds
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-")))
    if proc.returncode != 0 or crashes:
        lines = [line for line in proc.stderr.splitlines() if not line.startswith(("INFO:", "#", "WARNING:"))]
        pytest.fail(f"atheris target {target} exited {proc.returncode}; inputs kept: {crashes} in {tmp_path}\n"
                    + "\n".join(lines[-60:]))
    assert executed, f"no libFuzzer stats from {target}:\n{proc.stderr[-2000:]}"

"""The fuzz tests' report: inputs tried per target, printed at the end of the run and written to
``fuzz-inputs.json`` in the run's base temporary directory (or FUZZ_REPORT). Hooks of the root
``tests/conftest.py``, since under pytest-xdist only the controller prints and only the root
conftest is loaded there: each worker hands its tally over when it finishes."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.fuzz.budget import TALLY, total_seconds

_WORKER_KEY = "fuzz_tally"


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and TALLY.targets:
        workeroutput[_WORKER_KEY] = TALLY.as_json()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    TALLY.merge(getattr(node, "workeroutput", {}).get(_WORKER_KEY) or {})


def _report_path(config) -> pathlib.Path:
    chosen = os.environ.get("FUZZ_REPORT", "").strip()
    if chosen:
        return pathlib.Path(chosen)
    return pathlib.Path(config._tmp_path_factory.getbasetemp()) / "fuzz-inputs.json"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not TALLY.targets or getattr(config, "workeroutput", None) is not None:
        return
    path = _report_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"fuzz_seconds": total_seconds(), "targets": TALLY.as_json()}, indent=2) + "\n")
    terminalreporter.section("fuzz inputs tried")
    terminalreporter.write_line(TALLY.table())
    terminalreporter.write_line(f"written to {path}")

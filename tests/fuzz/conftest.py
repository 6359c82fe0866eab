"""Fuzz tests: each ``@pytest.mark.fuzz(weight=w)`` test gets ``fuzz_seconds``, its share of
FUZZ_SECONDS among the fuzz tests selected, and a time limit of that share plus slack (the
report of inputs tried is ``report.py``, hooked in by the root conftest)."""

from __future__ import annotations

import pytest

from tests.fuzz.budget import TIMEOUT_SLACK_S, total_seconds

_SHARE = pytest.StashKey[float]()


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz(weight=1.0): a fuzz test; its share of FUZZ_SECONDS is weight / "
                                       "the selected fuzz tests' total weight")


def _weight(item) -> float:
    marker = item.get_closest_marker("fuzz")
    return float(marker.kwargs.get("weight", 1.0)) if marker is not None else 0.0


def pytest_collection_modifyitems(config, items):
    fuzz_items = [item for item in items if item.get_closest_marker("fuzz") is not None]
    total_weight = sum(_weight(item) for item in fuzz_items)
    if not fuzz_items or total_weight <= 0:
        return
    seconds = total_seconds()
    for item in fuzz_items:
        share = seconds * _weight(item) / total_weight
        item.stash[_SHARE] = share
        if item.get_closest_marker("timeout") is None:
            # The thread method: a signal's exception inside a hypothesis run would be taken for the
            # target's failure and shrunk, not end the test.
            item.add_marker(pytest.mark.timeout(int(share) + TIMEOUT_SLACK_S, method="thread"))


@pytest.fixture
def fuzz_seconds(request) -> float:
    share = request.node.stash.get(_SHARE, None)
    if share is None:
        pytest.fail("a test using fuzz_seconds needs @pytest.mark.fuzz(weight=...)")
    return share

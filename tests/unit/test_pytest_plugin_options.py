"""The pytest plugin's options (cluster/pytest_plugin/options.py): defaults, how markers and
parameters layer, and the reasons a bad option is refused."""

from __future__ import annotations

import inspect

import pytest

from rocketbox.cluster.pytest_plugin import options
from rocketbox.cluster.testing import LocalCluster

pytestmark = pytest.mark.timeout(30)


def test_every_option_but_the_ready_time_out_is_a_keyword_of_local_cluster():
    accepted = set(inspect.signature(LocalCluster.__init__).parameters)
    assert set(options.cluster_keywords(options.DEFAULTS)) <= accepted
    assert options.READY_TIMEOUT in options.DEFAULTS and options.READY_TIMEOUT not in accepted


def test_later_layers_win_and_the_rest_keeps_its_default():
    combined = options.combine({"brokers": 2, "metrics": False}, None, {"brokers": 3})
    assert combined == {**options.DEFAULTS, "brokers": 3, "metrics": False}


def test_markers_closest_first_the_test_marker_wins():
    test_marker = pytest.mark.rocketbox(brokers=2).mark
    class_marker = pytest.mark.rocketbox(brokers=5, flush_mode="SYNC_FLUSH").mark
    module_marker = pytest.mark.rocketbox(metrics=False, brokers=7).mark
    assert options.from_markers([test_marker, class_marker, module_marker]) == \
        {"brokers": 2, "flush_mode": "SYNC_FLUSH", "metrics": False}


def test_a_marker_with_positional_arguments_is_refused():
    with pytest.raises(ValueError, match="keywords only"):
        options.from_markers([pytest.mark.rocketbox(2).mark])


@pytest.mark.parametrize("bad, reason", [
    ({"borkers": 2}, "unknown option 'borkers'"),
    ({"brokers": 0}, "brokers must be a whole number of at least 1"),
    ({"namesrvs": True}, "namesrvs must be a whole number"),
    ({"slaves": -1}, "slaves must be a whole number of at least 0"),
    ({"flush_mode": "sync"}, "flush_mode must be one of ASYNC_FLUSH, SYNC_FLUSH"),
    ({"proxy": "yes"}, "proxy must be True or False"),
    ({"broker_overrides": ["x"]}, "broker_overrides must be a dict"),
    ({"ready_timeout_s": 0}, "ready_timeout_s must be a positive number"),
])
def test_a_bad_option_is_refused_with_its_reason(bad, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(")):
        options.combine(bad)


def test_every_problem_is_named_at_once():
    found = options.problems({"brokers": 0, "flush_mode": "x"})
    assert len(found) == 2 and found[0].startswith("brokers") and found[1].startswith("flush_mode")

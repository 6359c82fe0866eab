"""Overload on the remoting door with RocketMQ's own C++ client: a broker that
cannot store what it is offered answers its sends SYSTEM_BUSY with RocketMQ's reason, which the
client reports; every send ends stored or refused, none unanswered (the client logs the broker's reason; this
client version then reports a send that failed all its retries as "No route info of this topic").

The broker is overloaded honestly: sync flush on a disk throttled to 1 MB/s (a blkio cgroup on its
flush worker, ``perf/disk_throttle.py``; skipped with the reason where cgroups cannot be written)
while a raw sender that never holds back offers ten times what that disk takes."""

from __future__ import annotations

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf import disk_throttle
from tests.overload_gate import BROKER_OVERRIDES, sends_under_overload
from tests.remoting.cpp_client import CppClient, require_cpp_client

# The client is let go only once the broker refuses, so a few hundred sends meet the overload; each
# refused one costs the client its retries, and 1500 of them outran the two minutes on a loaded CI.
SENDS = 300


@pytest.mark.timeout(240)
def test_the_cpp_client_gets_system_busy_with_the_reason_from_an_overloaded_broker(tmp_path):
    require_cpp_client()
    why = disk_throttle.unavailable()
    if why:
        pytest.skip(f"the broker cannot be given a slow disk here: {why}")
    cluster = LocalCluster(str(tmp_path / "cluster"), flush_mode=SYNC_FLUSH,
                           broker_overrides=BROKER_OVERRIDES).start()
    try:
        with Admin(cluster.namesrv) as admin:
            admin.create_topic("CppOverload", 2)
        messages = [{"topic": "CppOverload", "body": f"cpp-{i}"} for i in range(SENDS)]
        client = CppClient("produce", {"namesrv": cluster.remoting_namesrv, "timeout_ms": 3000, "gate": True,
                                       "messages": messages}, tmp_path / "cpp")
        results = sends_under_overload(cluster, "CppOverload", client)
    finally:
        cluster.stop()
    outcomes = [r for r in results if "i" in r]
    assert len(outcomes) == SENDS, results
    refused = [r["error"] for r in outcomes if "error" in r]
    assert refused, f"no send of {SENDS} refused"
    assert all(r.get("status") == 0 for r in outcomes if "error" not in r), [r for r in outcomes if "error" not in r]
    # The client got SYSTEM_BUSY (code 2) with the broker's reason on the wire, logged it and retried;
    # after its retries this client version reports every failed send as "No route info of this
    # topic" (rocketmq-client-cpp's sendDefaultImpl), whatever the broker said.
    log = _cpp_log(tmp_path / "cpp")
    assert "broker busy, start flow control for a while" in log and "error code:2" in log, log[-2000:]
    assert all("No route info of this topic" in error for error in refused), refused[:5]


def _cpp_log(home) -> str:
    return "".join(path.read_text(errors="replace") for path in sorted(home.glob("logs/rocketmq-cpp/*.log*")))

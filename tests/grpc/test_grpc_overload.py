"""Overload through the gRPC proxy: a broker refusing sends SYSTEM_BUSY makes the
proxy answer RocketMQ 5's TOO_MANY_REQUESTS with the broker's reason, as Apache's proxy maps it.

The broker is overloaded honestly: sync flush on a disk throttled to 1 MB/s (a blkio cgroup on its
flush worker, ``perf/disk_throttle.py``; skipped with the reason where cgroups cannot be written)
while a raw sender that never holds back offers ten times what that disk takes."""

from __future__ import annotations

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf import disk_throttle
from tests.grpc.grpc_client import GrpcClient, statuses
from tests.overload_gate import BROKER_OVERRIDES, sends_under_overload

SENDS = 30


def _send(i: int) -> dict:
    properties = {"messageId": f"0102FC0000000100000000000000{i:05d}", "messageType": "NORMAL",
                  "bodyEncoding": "IDENTITY"}
    return {"messages": [{"topic": {"name": "GrpcOverload"}, "body": "Ym9keQ==", "systemProperties": properties}]}


@pytest.mark.timeout(240)
def test_sends_to_an_overloaded_broker_are_answered_too_many_requests_with_the_reason(tmp_path):
    why = disk_throttle.unavailable()
    if why:
        pytest.skip(f"the broker cannot be given a slow disk here: {why}")
    cluster = LocalCluster(str(tmp_path / "cluster"), proxy=True, flush_mode=SYNC_FLUSH,
                           broker_overrides=BROKER_OVERRIDES).start()
    try:
        with Admin(cluster.namesrv) as admin:
            admin.create_topic("GrpcOverload", 2)
        client = GrpcClient("raw", {"endpoint": cluster.proxy_endpoint, "steps": [{"gate": True}] + [
            {"name": f"send-{i}", "rpc": "SendMessage", "request": _send(i)} for i in range(SENDS)]},
            tmp_path / "client")
        lines = sends_under_overload(cluster, "GrpcOverload", client)
    finally:
        cluster.stop()
    answers = [statuses(lines, f"send-{i}")[0] for i in range(SENDS)]
    codes = {a.get("code") for a in answers}
    assert codes <= {"OK", "TOO_MANY_REQUESTS"}, answers
    busy = [a for a in answers if a.get("code") == "TOO_MANY_REQUESTS"]
    assert busy, answers
    assert all("SYSTEM_BUSY" in a["message"] and "broker busy, start flow control for a while" in a["message"]
               for a in busy), busy

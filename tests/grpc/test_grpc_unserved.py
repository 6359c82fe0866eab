"""What RocketBox does not serve is refused with the status Apache uses, never served as something
else (issue 34 item 5): an RPC of service.proto it does not implement (gRPC UNIMPLEMENTED, as
Apache's grpc-java stub answers for an RPC its proxy does not override, and no traceback in the
proxy's log). Lite topics (RocketMQ 5.5) are served: tests/grpc/test_grpc_lite.py.
"""

from __future__ import annotations

import os

import pytest

from tests.grpc.grpc_client import run_grpc, statuses

SERVICE = "apache.rocketmq.v2.MessagingService"
QUEUE = {"topic": {"name": "GrpcUnserved"}, "id": 0, "broker": {"name": "broker-a"}}
# Every RPC of service.proto the proxy does not serve, with a request of its own type.
UNSERVED = {
    "PullMessage": {"group": {"name": "GrpcUnservedCG"}, "messageQueue": QUEUE, "offset": "0", "batchSize": 1},
    "UpdateOffset": {"group": {"name": "GrpcUnservedCG"}, "messageQueue": QUEUE, "offset": "1"},
    "GetOffset": {"group": {"name": "GrpcUnservedCG"}, "messageQueue": QUEUE},
    "QueryOffset": {"messageQueue": QUEUE, "queryOffsetPolicy": "END"},
}


def _log_tail(cluster, since: int) -> str:
    with open(os.path.join(cluster.data_dir, "logs", "proxy.log"), errors="replace") as f:
        f.seek(since)
        return f.read()


def _log_size(cluster) -> int:
    return os.path.getsize(os.path.join(cluster.data_dir, "logs", "proxy.log"))


@pytest.fixture(scope="module")
def topic(grpc_cluster, admin):
    admin.create_topic("GrpcUnserved", 2)


@pytest.mark.timeout(240)
def test_rpcs_not_served_are_unimplemented_without_a_traceback(grpc_cluster, topic, tmp_path):
    log_from = _log_size(grpc_cluster)
    steps = [{"name": rpc, "rpc": rpc, "request": request} for rpc, request in UNSERVED.items()]
    steps.append({"name": "still-serving", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcUnserved"}}})
    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "steps": steps}, tmp_path / "raw")
    for rpc in UNSERVED:
        assert statuses(lines, rpc) == [{"grpc_error": f"UNIMPLEMENTED: Method {SERVICE}/{rpc} is unimplemented"}], \
            (rpc, lines)
    assert statuses(lines, "still-serving")[0]["code"] == "OK"
    log = _log_tail(grpc_cluster, log_from)
    assert "Traceback" not in log and "NotImplementedError" not in log, log[-3000:]
    assert "PullMessage refused: RocketBox does not serve it" in log

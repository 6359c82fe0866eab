"""Proxy process: ``python -m rocketbox.cluster.procs.proxy --config-json '{...}'``.

RocketMQ 5's proxy in cluster mode (``cluster/proxy/``): gRPC clients on one side, the brokers'
native doors on the other. One per cluster (host), a supervisor child like the others; it holds
no state of its own that a restart loses (pop state is in the brokers, transaction ids name their
half message)."""

from __future__ import annotations

import sys

from rocketbox.cluster.procs.runner import run_role, start_server


def build(config_json: str):
    # Here, not at the top: the gRPC modules load rocketmq-python-client's whole package.
    from rocketbox.cluster.proxy.server import ProxyServer
    from rocketbox.cluster.proxy.settings import ProxySettings
    server, address = start_server(ProxySettings.from_json(config_json), ProxyServer)
    return server, {"endpoint": f"grpc://{address}", "role": "proxy"}, server.close


def main(argv=None) -> int:
    return run_role("proxy", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

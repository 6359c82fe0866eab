"""NameServer process: ``python -m cluster.procs.namesrv --config-json '{...}'``."""

from __future__ import annotations

import sys

from cluster.config import namesrv_config_from_json
from cluster.namesrv import NamesrvService
from cluster.procs.runner import run_role
from cluster.zmq_transport import EventLoop, RpcServer


NAMESRV_FRAME_BYTES_MAX = 32 * 1024 * 1024


def build(config_json: str):
    cfg = namesrv_config_from_json(config_json)
    cfg.validate()
    service = NamesrvService(cfg)
    loop = EventLoop()
    # Registrations carry a broker's topic table: generous, but bounded.
    server = RpcServer(cfg.endpoint, service.handlers, name="namesrv", frame_bytes_max=NAMESRV_FRAME_BYTES_MAX)
    server.attach(loop)
    loop.call_every(cfg.scan_interval_ms / 1000, service.scan_expired)
    return loop, {"endpoint": server.endpoint, "role": "namesrv"}, server.close


def main(argv=None) -> int:
    return run_role("namesrv", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

"""Broker main process: ``python -m rocketbox.cluster.procs.broker --config-json '{...}'``.

Runs recovery before serving, so the supervisor starts the flush, reput and
allocate workers only after this process reports ready.
"""

from __future__ import annotations

import sys

from rocketbox.cluster.acl.curve import use_cluster_keys
from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.config import broker_config_from_json
from rocketbox.cluster.procs.runner import run_role
from rocketbox.cluster.supervision.lifecycle import EXIT_ROLE_CHANGED
from rocketbox.cluster.zmq_transport import EventLoop


def build(config_json: str):
    cfg = broker_config_from_json(config_json)
    cfg.validate()
    if cfg.acl_enable:   # its NameServer, master and controller requests go out with the cluster's key
        use_cluster_keys(cfg.acl_file)
    booted = boot(cfg)  # recovery and, with a controller, this replica's role
    service = BrokerService(booted)
    cfg = booted.cfg
    loop = EventLoop(busy_poll_s=cfg.busy_poll_us / 1e6)
    doors = service.serve(loop)

    def on_exit():
        service.shutdown()
        doors.close()
        if service.role_changed:  # the controller gave this replica another role: restart it at once
            loop.exit_code = EXIT_ROLE_CHANGED
    return loop, {"endpoint": doors.native.endpoint, "role": "broker", "brokerName": cfg.broker_name,
                  "address": cfg.address, "remoting": cfg.remoting_address}, on_exit


def main(argv=None) -> int:
    return run_role("broker", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

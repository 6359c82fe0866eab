"""NameServer process: ``python -m rocketbox.cluster.procs.namesrv --config-json '{...}'``."""

from __future__ import annotations

import sys

from rocketbox.cluster.config import TLS_DISABLED, namesrv_config_from_json
from rocketbox.cluster.namesrv import NamesrvService
from rocketbox.cluster.procs.runner import run_role
from rocketbox.cluster.remoting_admission import AdmissionLimits
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.zmq_transport import EventLoop, RpcServer

# The controller (Raft: pysyncobj, cryptography), access control (yaml) and TLS (ssl) are imported
# only by a NameServer configured for them: a quarter of its start-up and resident size otherwise.


NAMESRV_FRAME_BYTES_MAX = 32 * 1024 * 1024


def build(config_json: str):
    cfg = namesrv_config_from_json(config_json)
    cfg.validate()
    controller = replicated = None
    if cfg.controller_address:
        from rocketbox.cluster.controller.raft import ReplicatedController
        from rocketbox.cluster.controller.secret import read_secret
        from rocketbox.cluster.controller.service import ControllerService
        replicated = ReplicatedController(cfg.controller_address, list(cfg.controller_peers),
                                          read_secret(cfg.controller_secret_file), data_dir=cfg.data_dir)
        controller = ControllerService(cfg, replicated)
    service = NamesrvService(cfg, controller=controller)
    loop = EventLoop()
    handlers, guard = service.handlers, None
    if cfg.acl_enable:   # access control (cluster/acl/): route changes need an admin, the rest an account
        from rocketbox.cluster.acl.guard import AclGuard
        guard = AclGuard.from_file(cfg.acl_file, "namesrv")
        guard.start(loop)
        handlers = guard.wrap(handlers)
        service.acl_refusals = guard.refusal_counts
    # Registrations carry a broker's topic table: generous, but bounded.
    server = RpcServer(cfg.endpoint, handlers, name="namesrv", frame_bytes_max=NAMESRV_FRAME_BYTES_MAX,
                       curve=guard.server_pair if guard is not None else None)
    server.attach(loop)
    remoting = None
    if cfg.remoting_port:
        tls = None
        if cfg.tls_server_mode != TLS_DISABLED:
            from rocketbox.cluster.tls import ServerTls
            tls = ServerTls.of(cfg)
        remoting = RemotingServer(cfg.host, cfg.remoting_port, handlers, name="namesrv remoting",
                                  frame_bytes_max=NAMESRV_FRAME_BYTES_MAX, limits=AdmissionLimits.of(cfg),
                                  authenticated_only=cfg.acl_enable, tls=tls)
        remoting.attach(loop)
    loop.call_every(cfg.scan_interval_ms / 1000, service.scan_expired)
    if controller is not None:
        loop.call_every(cfg.controller_scan_interval_ms / 1000, controller.scan)

    def on_exit():
        server.close()
        if remoting is not None:
            remoting.close()
        if replicated is not None:
            replicated.close()
    return loop, {"endpoint": server.endpoint, "role": "namesrv", "controller": cfg.controller_address,
                  "remoting": remoting.address if remoting else ""}, on_exit


def main(argv=None) -> int:
    return run_role("namesrv", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

"""``cluster up`` on a busy port: name the port, the process holding it and, when that is one of
ours, the data dir of its cluster (and how to stop it), before anything starts."""

from __future__ import annotations

import os
import socket


def planned_ports(topology, exporter) -> list[tuple[str, str, str, int]]:
    """(process, what, host, port) of every listening socket the topology's processes will open."""
    out = []
    for i, namesrv in enumerate(topology.namesrvs):
        out += [(f"namesrv-{i}", "port", namesrv.host, namesrv.port),
                (f"namesrv-{i}", "remoting port", namesrv.host, namesrv.remoting_port)]
    for broker in topology.brokers + topology.slaves:
        name = broker.broker_name if broker.broker_id == 0 else f"{broker.broker_name}-s{broker.broker_id}"
        out += [(name, "port", broker.host, broker.port), (name, "remoting port", broker.host, broker.remoting_port)]
        if broker.broker_id == 0 or broker.controller_mode:
            out.append((name, "HA port", broker.host, int(broker.ha_address.rsplit(":", 1)[1])))
    if exporter is not None:
        out.append(("metrics", "metrics port", exporter.host, exporter.port))
    if topology.proxy is not None:
        out.append(("proxy", "gRPC port", topology.proxy.host, topology.proxy.port))
    if topology.console is not None:
        out.append(("console", "web console port", topology.console.host, topology.console.port))
    return [entry for entry in out if entry[3]]


def _in_use(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as our servers bind
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _holder(port: int) -> str:
    """Who listens on ``port``: our process with its cluster's data dir, another one, or unknown."""
    import psutil   # here: only a busy port needs it, and `cluster up` starts sooner without it
    try:
        pids = {c.pid for c in psutil.net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    except (psutil.AccessDenied, OSError):
        pids = set()
    for pid in pids:
        try:
            process = psutil.Process(pid)
            title = " ".join(" ".join(process.cmdline()).split())   # a set title is padded with spaces
            # Our children write to <data dir>/logs/<name>.log on stdout and stderr (their
            # environment is no witness: setproctitle may reuse the memory /proc shows it from).
            log_file = next((f.path for f in process.open_files()
                             if f.path.endswith(".log") and os.path.basename(os.path.dirname(f.path)) == "logs"), "")
        except (psutil.Error, OSError):
            continue
        if log_file:   # <data dir>/logs/<name>.log: one of our clusters
            data_dir = os.path.dirname(os.path.dirname(log_file))
            return (f"{title} (pid {pid}) of the cluster in {data_dir}: stop it with "
                    f"`cluster down --data-dir {data_dir}`, or choose other ports")
        return f"{title or process.name()} (pid {pid})"
    return "another process"


def busy_port_problem(topology, exporter) -> str | None:
    for name, what, host, port in planned_ports(topology, exporter):
        if _in_use(host, port):
            return f"{name}'s {what} {port} is in use by {_holder(port)}"
    return None

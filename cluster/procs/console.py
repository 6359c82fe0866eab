"""Console process: ``python -m rocketbox.cluster.procs.console --config-json '{...}'``.

The web console (``cluster/console/``), one per cluster like the metrics exporter: its HTTP server
runs on a thread of its own; the main loop waits for the stop signal and samples the brokers'
counters for the throughput charts. It holds no state a restart loses but the charts' history."""

from __future__ import annotations

import sys

from rocketbox.cluster.procs.runner import run_role, start_server
from rocketbox.cluster.zmq_transport import EventLoop


def build(config_json: str):
    # Here, not at the top: the web libraries load only in this process.
    from rocketbox.cluster.console.server import ConsoleServer
    from rocketbox.cluster.console.settings import ConsoleSettings
    server, url = start_server(ConsoleSettings.from_json(config_json), ConsoleServer)
    loop = EventLoop()
    loop.call_every(server.settings.sample_interval_s, server.sample)
    if server.context.access is not None:
        server.context.access.watch(loop)
    return loop, {"endpoint": url, "role": "console", "credentials": server.context.access is not None}, server.close


def main(argv=None) -> int:
    return run_role("console", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

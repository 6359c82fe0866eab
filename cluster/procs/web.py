"""Web process: ``python -m rocketbox.cluster.procs.web --config-json '{"console": ..., "metrics": ...}'``.

The cluster's two HTTP doors in one process (one per cluster, or host): the web console
(``cluster/console/``) and the Prometheus endpoint (``cluster/metrics/``), each given as its own
settings' JSON object, or null when it does not run (``topology.web_config_json``). One process
instead of two saves ~29 MB RSS (perf/RESULTS.md "One web process, the allocate worker on a
thread"). Each door keeps its own listener, bound where its settings say, its own access rules and
bounds (``http_door.py``), and its own uvicorn thread and event loop: a slow console page never
holds a scrape. The main loop waits for the stop signal and samples the brokers for the console's
charts. A taken port or a refused address of either fails the boot (the supervisor reports it); a
death restarts both."""

from __future__ import annotations

import json
import logging
import sys

from rocketbox.cluster.procs.runner import run_role, start_server
from rocketbox.cluster.zmq_transport import EventLoop

log = logging.getLogger("web")


def _serve_metrics(metrics: dict):
    from rocketbox.cluster.metrics.exporter import MetricsExporter   # only where the endpoint runs
    from rocketbox.cluster.metrics.settings import ExporterSettings
    settings = ExporterSettings.from_json(json.dumps(metrics))
    settings.validate()
    return start_server(settings, MetricsExporter)


def _serve_console(console: dict):
    from rocketbox.cluster.console.server import ConsoleServer   # the web libraries: only with a console
    from rocketbox.cluster.console.settings import ConsoleSettings
    return start_server(ConsoleSettings.from_json(json.dumps(console)), ConsoleServer)


def build(config_json_text: str):
    doors = json.loads(config_json_text)
    if not isinstance(doors, dict) or not (doors.get("console") or doors.get("metrics")):
        raise ValueError("the web process serves the console, the metrics endpoint or both: neither was given")
    loop = EventLoop()
    ready_info: dict = {"role": "web"}
    closers = []

    def close_all():
        for close in reversed(closers):
            close()
    try:
        if doors.get("metrics"):
            exporter, url = _serve_metrics(doors["metrics"])
            closers.append(exporter.close)
            ready_info["metrics"] = url
            if exporter.access is not None:
                exporter.access.watch(loop)
        if doors.get("console"):
            server, url = _serve_console(doors["console"])
            closers.append(server.close)
            ready_info["console"] = url
            ready_info["credentials"] = server.context.access is not None
            loop.call_every(server.settings.sample_interval_s, server.sample)
            if server.context.access is not None:
                server.context.access.watch(loop)
    except BaseException:
        close_all()   # the door that did start must not keep its port while the process reports the boot error
        raise
    served = [door for door in ("console", "metrics") if door in ready_info]
    ready_info["endpoint"] = " ".join(ready_info[door] for door in served)
    log.info("serving %s", ", ".join(f"the {door} on {ready_info[door]}" for door in served))
    return loop, ready_info, close_all


def main(argv=None) -> int:
    return run_role("web", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

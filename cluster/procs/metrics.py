"""Metrics exporter process: ``python -m rocketbox.cluster.procs.metrics --config-json '{...}'``.

One per cluster (host), a supervisor child like the others; its HTTP door (``cluster/http_door.py``)
and scrapes run on threads of their own, and its main loop only waits for the stop signal
(``cluster/metrics/exporter.py``)."""

from __future__ import annotations

import sys

from rocketbox.cluster.acl.curve import use_cluster_keys
from rocketbox.cluster.metrics.exporter import MetricsExporter
from rocketbox.cluster.metrics.settings import ExporterSettings
from rocketbox.cluster.procs.runner import run_role
from rocketbox.cluster.zmq_transport import EventLoop


def build(config_json: str):
    settings = ExporterSettings.from_json(config_json)
    settings.validate()
    if settings.acl_file:   # it asks the brokers with the cluster's key
        use_cluster_keys(settings.acl_file)
    exporter = MetricsExporter(settings)
    try:
        url = exporter.serve()
    except OSError:
        exporter.close()
        raise   # a taken port: run_role reports it as a boot error
    loop = EventLoop()
    if exporter.access is not None:
        exporter.access.watch(loop)
    return loop, {"endpoint": url, "role": "metrics"}, exporter.close


def main(argv=None) -> int:
    return run_role("metrics", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())

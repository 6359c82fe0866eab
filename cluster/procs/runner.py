"""What every role's entry point shares: config from argv, logging, signals, readiness.

Entry points stay thin: parse config, build the service, run its loop, return an
exit code (``lifecycle`` holds the codes the supervisor understands).
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import signal
import sys

from rocketbox.cluster.log_limit import LimitingFilter, report_held_back, start_reporter
from rocketbox.cluster.supervision import lifecycle, titles


def parse_config_arg(argv, description: str) -> str:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config-json", required=True, help="the role's config as JSON")
    return parser.parse_args(argv).config_json


# The supervisor names each child's log file (lifecycle.LOG_FILE_ENV); its size and how many rotated
# files are kept come from the environment (cluster up --log-max-bytes / --log-backups): a cap per process.
LOG_MAX_BYTES_ENV = "ROCKETBOX_LOG_MAX_BYTES"
LOG_BACKUPS_ENV = "ROCKETBOX_LOG_BACKUPS"
LOG_MAX_BYTES_DEFAULT = 64 * 1024 * 1024
LOG_BACKUPS_DEFAULT = 3


class StdioRotatingHandler(logging.handlers.RotatingFileHandler):
    """Rotates by size, and points stdout and stderr at the new file each time: a crash's traceback
    must land in the current log, where ``cluster logs`` and the supervisor look for it."""

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os.dup2(self.stream.fileno(), 1)
            os.dup2(self.stream.fileno(), 2)


def setup_logging(role: str) -> None:
    """The role's log; a line a peer can make the process repeat is written a burst per window
    (``log_limit``: the call sites that know so, and a filter on the handler for the rest)."""
    fmt = f"%(asctime)s {role} %(levelname)s %(name)s: %(message)s"
    path = os.environ.get(lifecycle.LOG_FILE_ENV)
    if path:
        handler = StdioRotatingHandler(path, maxBytes=int(os.environ.get(LOG_MAX_BYTES_ENV, LOG_MAX_BYTES_DEFAULT)),
                                       backupCount=int(os.environ.get(LOG_BACKUPS_ENV, LOG_BACKUPS_DEFAULT)))
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    handler.addFilter(LimitingFilter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    start_reporter()


def stop_on_signals(on_stop) -> int:
    """SIGTERM/SIGINT only set a flag; the returned fd becomes readable at once, so a loop
    that polls it notices the stop on its next turn instead of after its poll time-out."""
    def handler(signum, frame):
        on_stop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return read_fd


def run_role(role: str, argv, build):
    """Boot ``build(config_json)`` -> (loop-like object with .run() and .stopping, ready info, on_exit)."""
    setup_logging(role)
    titles.set_child_title(role)
    lifecycle.install_parent_death_signal()
    config_json = parse_config_arg(argv, f"RocketBox {role}")
    try:
        loop, ready_info, on_exit = build(config_json)
    except (ValueError, KeyError, TypeError) as exc:
        logging.getLogger(role).error("bad configuration: %s", exc)
        return lifecycle.EXIT_BOOT_ERROR
    except OSError as exc:
        logging.getLogger(role).error("cannot start: %s", exc)
        return lifecycle.EXIT_BOOT_ERROR if "Address already in use" in str(exc) else 1

    def stop():
        loop.stopping = True
    loop.watch_stop_fd(stop_on_signals(stop))
    lifecycle.notify_ready(ready_info)
    try:
        loop.run()
    finally:
        try:
            on_exit()
        finally:
            report_held_back(every=True)   # the last window's count, before the process is gone
    # A role may ask for a restart (a broker whose controller role changed sets EXIT_ROLE_CHANGED in on_exit).
    return getattr(loop, "exit_code", 0)


def start_server(settings, make_server):
    """(server, the address it serves) for a door of its own (the proxy, the console, the metrics endpoint):
    with access control its requests to the cluster go out with the cluster's key; a taken port
    closes the server and raises OSError, which ``run_role`` reports as a boot error."""
    from rocketbox.cluster.acl.curve import use_cluster_keys
    if settings.acl_file:
        use_cluster_keys(settings.acl_file)
    server = make_server(settings)
    try:
        return server, server.start()
    except OSError:
        server.close()
        raise

"""The console's HTTP server: uvicorn serving the Starlette app on a thread of its own, on a
socket bound here first (so a taken port fails the boot with "Address already in use", which the
supervisor reports), while the process's main loop waits for the stop signal and samples the
brokers for the throughput charts."""

from __future__ import annotations

import logging
import socket
import threading
import time

import uvicorn

from rocketbox.cluster.console.app import build_app
from rocketbox.cluster.console.context import ConsoleContext
from rocketbox.cluster.console.settings import ConsoleSettings

log = logging.getLogger(__name__)
START_TIMEOUT_S = 15.0


class ConsoleServer:
    def __init__(self, settings: ConsoleSettings):
        settings.validate()
        self.settings = settings
        self.context = ConsoleContext(settings)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Listen and serve; the console's URL. OSError when the address is taken."""
        family = socket.AF_INET6 if ":" in self.settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.settings.host, self.settings.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        config = uvicorn.Config(build_app(self.context), log_config=None, access_log=False, lifespan="off",
                                server_header=False, timeout_graceful_shutdown=2, limit_concurrency=64)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="console-http",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the console's HTTP server did not start (see the log above)")
            time.sleep(0.01)
        log.info("console on %s", self.settings.url)
        return self.settings.url

    def sample(self) -> None:
        try:
            self.context.history.sample()
        except Exception:   # a sampler bug must not end the process: the pages still serve
            log.exception("throughput sample failed")

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5.0)
        self.context.close()

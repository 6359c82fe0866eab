"""The console's HTTP server: the Starlette app behind the bounded HTTP door (``cluster/http_door.py``:
uvicorn on a thread of its own, deadlines for heads and bodies, bounded connections), while the
process's main loop waits for the stop signal and samples the brokers for the throughput charts."""

from __future__ import annotations

import logging

from rocketbox.cluster.console.app import build_app
from rocketbox.cluster.console.context import ConsoleContext
from rocketbox.cluster.console.settings import ConsoleSettings
from rocketbox.cluster.http_door import HttpDoor

log = logging.getLogger(__name__)


class ConsoleServer:
    def __init__(self, settings: ConsoleSettings):
        settings.validate()
        self.settings = settings
        self.context = ConsoleContext(settings)
        self.door = HttpDoor(build_app(self.context), settings.host, settings.port, "console")

    def start(self) -> str:
        """Listen and serve; the console's URL. OSError when the address is taken."""
        self.door.start()
        log.info("console on %s", self.settings.url)
        return self.settings.url

    def sample(self) -> None:
        try:
            self.context.history.sample()
        except Exception:   # a sampler bug must not end the process: the pages still serve
            log.exception("throughput sample failed")

    def close(self) -> None:
        self.door.close()
        self.context.close()

"""One thread that runs callables when they are due: the next attempts of a producer's async sends
(at once after a failure, or after a SYSTEM_BUSY back-off). Never the RPC I/O thread, since an
attempt may look up a route (a blocking call); one thread, not one per retry, so an overloaded
broker's many busy answers cost no thread each."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)


class RetryTimer:
    def __init__(self, name: str = "send-retry"):
        self._name = name
        self._due: list = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        with self._cv:
            heapq.heappush(self._due, (time.monotonic() + delay_s, next(self._seq), fn))
            if self._thread is None or not self._thread.is_alive():   # first use, or a forked child
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cv.notify()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stopping:
                    wait_s = self._due[0][0] - time.monotonic() if self._due else None
                    if wait_s is not None and wait_s <= 0:
                        break
                    self._cv.wait(wait_s)
                if self._stopping:
                    return
                _, _, fn = heapq.heappop(self._due)
            try:
                fn()
            except Exception:
                log.exception("a send's next attempt failed")

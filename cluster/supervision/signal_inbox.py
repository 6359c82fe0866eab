"""Signals for a supervising loop, gunicorn-style: handlers only enqueue, and a wake-up pipe
(``signal.set_wakeup_fd``) makes the loop's ``select`` return at once.

Only the main thread can install handlers; a loop driven from another thread gets none and
polls instead (``installed`` stays False).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import deque


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
HANDLED_SIGNALS = (*STOP_SIGNALS, signal.SIGCHLD)
QUEUE_LENGTH_MAX = 32


class SignalInbox:
    def __init__(self):
        self.queue: deque[int] = deque()
        self.wake_reader: int | None = None
        self._wake_writer: int | None = None
        self._previous_handlers: dict[int, object] = {}
        self._previous_wakeup_fd: int | None = None
        self.installed = False

    def install(self) -> bool:
        """Take over the stop signals and SIGCHLD; False (and nothing done) off the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        self.wake_reader, self._wake_writer = os.pipe()
        os.set_blocking(self.wake_reader, False)
        os.set_blocking(self._wake_writer, False)
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._wake_writer, warn_on_full_buffer=False)
        for signum in HANDLED_SIGNALS:
            self._previous_handlers[signum] = signal.signal(signum, self._enqueue)
        self.installed = True
        return True

    def _enqueue(self, signum: int, frame) -> None:
        # SIGCHLD only wakes the loop (which reaps anyway); a flood of stop signals is bounded.
        if signum != signal.SIGCHLD and len(self.queue) < QUEUE_LENGTH_MAX:
            self.queue.append(signum)

    def drain_wake_pipe(self) -> None:
        while True:
            try:
                if not os.read(self.wake_reader, 512):
                    return
            except BlockingIOError:
                return

    def restore(self) -> None:
        """Give the previous handlers and wake-up fd back, and close the pipe."""
        if not self.installed:
            return
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_wakeup_fd if self._previous_wakeup_fd is not None else -1)
        self._previous_handlers.clear()
        for fd in (self.wake_reader, self._wake_writer):
            if fd is not None:
                os.close(fd)
        self.wake_reader = self._wake_writer = None
        self.installed = False

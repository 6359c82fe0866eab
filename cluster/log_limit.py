"""Warnings about what peers send, bounded: a flood of bad frames must not become a flood of log lines.

``RateLimitedLog.warning(kind, fmt, *args)`` writes at most ``burst`` lines of one kind per
``interval_s``; the lines it holds back are counted, and the next line of that kind that is
written says how many were dropped since ("... (1234 more like this in the last 10 s)").
"""

from __future__ import annotations

import logging
import time
from typing import Callable


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, *, burst: int = 10, interval_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self.clock = clock
        # kind -> [window start, lines written in the window, lines held back since the last written]
        self._windows: dict[str, list] = {}
        self.suppressed_total = 0

    def warning(self, kind: str, fmt: str, *args) -> bool:
        """Log unless ``kind`` is over its budget; True when a line was written."""
        now = self.clock()
        window = self._windows.get(kind)
        if window is None or now - window[0] >= self.interval_s:
            held = window[2] if window else 0
            window = self._windows[kind] = [now, 0, held]
        if window[1] >= self.burst:
            window[2] += 1
            self.suppressed_total += 1
            return False
        window[1] += 1
        if window[2]:
            fmt += f" ({window[2]} more like this held back in the last {self.interval_s:g} s)"
            window[2] = 0
        self.logger.warning(fmt, *args)
        return True

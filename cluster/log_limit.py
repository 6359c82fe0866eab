"""Lines about what peers send, bounded: a flood of bad frames must not become a flood of log lines.

``RateLimitedLog.warning(kind, fmt, *args)`` (and ``info``, ``error``) writes at most ``burst``
lines of one kind per ``interval_s``; the lines it holds back are counted, and the next line of
that kind that is written says how many were held back since ("... (1234 more like this held back
in the last 10 s)"). A flood that stops leaves no such next line: ``report_held_back()`` (every
few seconds on a thread of each cluster process, ``start_reporter``) writes one line for each kind
whose window ended with lines held back, with the last of them as the example, and a process
about to exit reports every window still holding lines back (``report_held_back(every=True)``,
``procs/runner.py``): a flood and a ``cluster down`` within one window would otherwise leave the
count unsaid. ``kind`` must come
from a small set (a door's name, a request code the process serves), never from a peer's bytes:
past ``KINDS_MAX`` kinds the rest share one window.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Callable

KINDS_MAX = 512
OTHER_KIND = "(other)"
REPORT_INTERVAL_S = 5.0

_live: "weakref.WeakSet[RateLimitedLog]" = weakref.WeakSet()
_reporter_lock = threading.Lock()
_reporter: threading.Thread | None = None


class _Window:
    __slots__ = ("start", "written", "held", "example")

    def __init__(self, start: float, held: int = 0, example=None):
        self.start = start
        self.written = 0
        self.held = held
        self.example = example   # (level, fmt, args) of the last line held back


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, *, burst: int = 10, interval_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()   # the proxy and console log from many threads
        self.suppressed_total = 0
        _live.add(self)

    def warning(self, kind: str, fmt: str, *args) -> bool:
        """Log unless ``kind`` is over its budget; True when a line was written."""
        return self.log(logging.WARNING, kind, fmt, *args)

    def info(self, kind: str, fmt: str, *args) -> bool:
        return self.log(logging.INFO, kind, fmt, *args)

    def error(self, kind: str, fmt: str, *args, exc_info=None) -> bool:
        return self.log(logging.ERROR, kind, fmt, *args, exc_info=exc_info)

    def log(self, level: int, kind: str, fmt: str, *args, exc_info=None) -> bool:
        suffix = self.admit(level, kind, fmt, args)
        if suffix is None:
            return False
        self.logger.log(level, fmt + suffix, *args, exc_info=exc_info)
        return True

    def admit(self, level: int, kind: str, fmt: str, args) -> str | None:
        """None when the line is held back, else what to add to it (the count held back before it)."""
        now = self.clock()
        with self._lock:
            windows = self._windows
            if kind not in windows and len(windows) >= KINDS_MAX:
                for stale in [k for k, w in windows.items() if not w.held and now - w.start >= self.interval_s]:
                    del windows[stale]
                if len(windows) >= KINDS_MAX:
                    kind = OTHER_KIND
            window = windows.get(kind)
            if window is None or now - window.start >= self.interval_s:
                window = windows[kind] = _Window(now, *((window.held, window.example) if window else ()))
            if window.written >= self.burst:
                window.held += 1
                window.example = (level, fmt, args)
                self.suppressed_total += 1
                return None
            window.written += 1
            if not window.held:
                return ""
            held, window.held, window.example = window.held, 0, None
            return f" ({held} more like this held back in the last {self.interval_s:g} s)"

    def report_held_back(self, every: bool = False) -> int:
        """One line for each kind whose window ended (``every``: ended or not) with lines held back;
        how many were written."""
        now = self.clock()
        due = []
        with self._lock:
            for kind, window in self._windows.items():
                if window.held and (every or now - window.start >= self.interval_s):
                    due.append((window.held, window.example))
                    self._windows[kind] = _Window(now)
                    self._windows[kind].written = 1
        for held, (level, fmt, args) in due:
            self.logger.log(level, f"{held} more like this held back in the last {self.interval_s:g} s, the last: "
                            + fmt, *args)
        return len(due)


class LimitingFilter(logging.Filter):
    """A log handler's last line of defence (every cluster process's, ``procs/runner.py``): at most
    ``burst`` records of one logger, level and message template per ``interval_s``, the rest
    counted and reported as ``RateLimitedLog`` does. It catches lines a peer can repeat that no
    call site limits, libraries' included (uvicorn's "Invalid HTTP request received."); its burst is
    well above what a process logs of one template in normal operation."""

    def __init__(self, burst: int = 50, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.limiter = RateLimitedLog(logging.getLogger(__name__), burst=burst, interval_s=interval_s, clock=clock)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == __name__:   # the held-back reports themselves
            return True
        template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        suffix = self.limiter.admit(record.levelno, f"{record.name}:{record.levelno}:{template[:200]}",
                                    template, record.args)
        if suffix is None:
            return False
        if suffix:
            record.msg = template + suffix
        return True


def report_held_back(every: bool = False) -> int:
    """``RateLimitedLog.report_held_back`` of every limiter of the process."""
    return sum(limiter.report_held_back(every) for limiter in list(_live))


def start_reporter(interval_s: float = REPORT_INTERVAL_S) -> None:
    """A daemon thread of this process that reports held-back lines every ``interval_s`` (once)."""
    global _reporter
    with _reporter_lock:
        if _reporter is not None and _reporter.is_alive():
            return

        def run() -> None:
            while True:
                time.sleep(interval_s)
                try:
                    report_held_back()
                except Exception:   # a bad example's arguments must not end the reports
                    logging.getLogger(__name__).exception("reporting held-back log lines failed")
        _reporter = threading.Thread(target=run, name="log-limit", daemon=True)
        _reporter.start()

"""``cluster/log_limit.py``: a burst of each kind per window, the rest counted and said, by the next
line of the kind or by the held-back report once the window ended; the handler filter that catches
repeated lines no call site limits."""

from __future__ import annotations

import logging

from rocketbox.cluster import log_limit
from rocketbox.cluster.log_limit import KINDS_MAX, LimitingFilter, RateLimitedLog


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _logger(name: str, caplog) -> logging.Logger:
    logger = logging.getLogger(f"test_log_limit.{name}")
    caplog.set_level(logging.INFO, logger=logger.name)
    return logger


def test_a_burst_a_window_and_the_next_line_says_how_many_were_held_back(caplog):
    clock = Clock()
    limited = RateLimitedLog(_logger("burst", caplog), burst=3, interval_s=10, clock=clock)
    written = [limited.warning("bad", "bad frame %d", i) for i in range(100)]
    assert written.count(True) == 3 and limited.suppressed_total == 97
    assert limited.info("other", "another kind has its own window")
    clock.now = 10.0
    assert limited.warning("bad", "bad frame %d", 100)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:3] == ["bad frame 0", "bad frame 1", "bad frame 2"]
    assert lines[-1] == "bad frame 100 (97 more like this held back in the last 10 s)"


def test_a_flood_that_stops_is_reported_with_its_last_line_once_its_window_ended(caplog):
    clock = Clock()
    limited = RateLimitedLog(_logger("report", caplog), burst=2, interval_s=10, clock=clock)
    for code in (35, 36, 37, 38):
        limited.error("refused", "request %d refused", code)
    assert limited.report_held_back() == 0   # the window is still open
    clock.now = 12.0
    assert log_limit.report_held_back() >= 1   # every limiter of the process
    # Other limiters of this process (earlier tests in this worker) may report beside it.
    reports = [r for r in caplog.records if r.name == "test_log_limit.report"]
    assert reports[-1].getMessage() == "2 more like this held back in the last 10 s, the last: request 38 refused"
    assert reports[-1].levelno == logging.ERROR
    assert limited.report_held_back() == 0   # said once
    limited.error("refused", "request %d refused", 39)
    assert caplog.records[-1].getMessage() == "request 39 refused"   # the report opened a window; no count twice


def test_a_process_about_to_exit_says_the_count_of_a_window_still_open(caplog):
    clock = Clock()
    limited = RateLimitedLog(_logger("exit", caplog), burst=1, interval_s=10, clock=clock)
    for code in (35, 36, 37):
        limited.warning("refused", "request %d refused", code)
    clock.now = 1.0
    assert limited.report_held_back() == 0
    assert limited.report_held_back(every=True) == 1
    assert caplog.records[-1].getMessage() == "2 more like this held back in the last 10 s, the last: request 37 refused"
    assert limited.report_held_back(every=True) == 0   # said once


def test_kinds_are_bounded_stale_ones_dropped_then_the_rest_share_one(caplog):
    clock = Clock()
    limited = RateLimitedLog(_logger("kinds", caplog), burst=1, interval_s=10, clock=clock)
    for i in range(KINDS_MAX):
        limited.warning(f"kind{i}", "line %d", i)
    assert not limited.warning("kind0", "again")   # its window holds
    assert limited.warning("new", "a new kind")   # full: shares the one extra window
    assert not limited.warning("newer", "a newer kind")
    clock.now = 20.0   # every window ended: stale kinds (nothing held) make room
    assert limited.warning("newest", "a fresh kind once the old windows ended")
    assert len(limited._windows) <= KINDS_MAX


def test_the_handler_filter_holds_back_a_repeated_template_and_lets_others_through(caplog):
    clock = Clock()
    flt = LimitingFilter(burst=2, interval_s=10, clock=clock)
    logger = logging.getLogger("uvicorn.error.test")

    def record(msg, *args):
        return logging.LogRecord(logger.name, logging.WARNING, __file__, 1, msg, args, None)
    passed = [flt.filter(record("Invalid HTTP request received.")) for _ in range(50)]
    assert passed.count(True) == 2
    assert flt.filter(record("a different line %s", "x"))
    clock.now = 11.0
    again = record("Invalid HTTP request received.")
    assert flt.filter(again) and again.getMessage() == ("Invalid HTTP request received. (48 more like this held "
                                                        "back in the last 10 s)")

"""The supervisor's errors: what it cannot do, a child that did not boot, a stop during start."""

from __future__ import annotations


class SupervisorError(Exception):
    """The supervisor cannot do what was asked (bad table, data dir in use, ...)."""


class BootError(SupervisorError):
    """A child did not become ready during ``start()``; everything started was stopped."""

    def __init__(self, message: str, child_name: str | None = None, reason: str | None = None,
                 exit_code: int | None = None, log_tail: str = ""):
        super().__init__(message)
        self.child_name = child_name
        self.reason = reason
        self.exit_code = exit_code
        self.log_tail = log_tail


class StopRequested(SupervisorError):
    """A stop signal arrived while ``start()`` was still starting children."""

"""Asking a child to stop, and killing it: the two signals the supervisor sends."""

from __future__ import annotations

import os
import signal

from rocketbox.cluster.supervision.children import _Child


def send_stop(child: _Child, now: float) -> None:
    """The child's stop signal, with its deadline for the SIGKILL that follows if it lingers."""
    child.kill_deadline = now + child.spec.stop_timeout_s
    try:
        os.kill(child.pid, child.spec.stop_signal)
    except ProcessLookupError:
        pass  # already dead, not reaped yet: the reaper will see it


def kill(child: _Child) -> None:
    """SIGKILL to the child's whole process group (what it started dies with it)."""
    child.kill_sent = True
    try:
        # Not reaped yet, so its pid (= its process group id) cannot have been reused.
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(child.pid, signal.SIGKILL)

"""How long the supervisor's loop may sleep, and the sleep itself: a ``select`` on the children's
ready pipes and the signal wake-up pipe, bounded by the next deadline or restart that falls due."""

from __future__ import annotations

import select
import time
from typing import Sequence

from rocketbox.cluster.supervision.children import ChildState, _Child
from rocketbox.cluster.supervision.signal_inbox import SignalInbox

# Loop wake-up ceiling when signals cannot wake us (driven from a non-main thread).
POLL_INTERVAL_NO_SIGNALS_S = 0.05
# Wake-up ceiling while a child is due but waits for another (first boot goes one child at a time):
# what unblocks it comes as a ready line or a SIGCHLD, which wake the loop anyway; this bounds a
# transition that does not. A due child counted as due now made the loop spin: a second of a core
# at every cluster start.
BLOCKED_CHILD_RECHECK_S = 0.05


def wait_budget_s(children: Sequence[_Child], timeout_s: float, next_heartbeat: float, signals_installed: bool,
                  now: float) -> float:
    """``timeout_s``, shortened to the next ready or kill deadline, restart or heartbeat that falls due
    (a child whose restart is already due but was not started waits for another; it is looked at
    again soon, not at once)."""
    wake_at = now + max(0.0, timeout_s)
    for child in children:
        if child.state == ChildState.STARTING and not child.kill_sent:
            wake_at = min(wake_at, child.ready_deadline)
        if child.kill_deadline is not None and not child.kill_sent:
            wake_at = min(wake_at, child.kill_deadline)
        if child.restart_due is not None and child.state in (ChildState.BACKOFF, ChildState.PENDING):
            # Called after the due children were started: one still waiting here is blocked.
            wake_at = min(wake_at, child.restart_due if child.restart_due > now else now + BLOCKED_CHILD_RECHECK_S)
    wake_at = min(wake_at, next_heartbeat)
    budget_s = max(0.0, wake_at - now)
    if not signals_installed:
        budget_s = min(budget_s, POLL_INTERVAL_NO_SIGNALS_S)
    return budget_s


def wait_for_events(children: Sequence[_Child], signals: SignalInbox, timeout_s: float) -> set[int]:
    """The ready pipes that became readable within ``timeout_s`` (a signal ends the wait early)."""
    fds = [c.ready_reader for c in children if c.ready_reader is not None]
    if signals.wake_reader is not None:
        fds.append(signals.wake_reader)
    if not fds:
        # Only without signal handlers (non-main thread); the budget is then short.
        if timeout_s > 0:
            time.sleep(timeout_s)
        return set()
    readable, _, _ = select.select(fds, [], [], timeout_s)
    if signals.wake_reader is not None and signals.wake_reader in readable:
        signals.drain_wake_pipe()
    return set(readable)

"""When a child may be started: the table's order on first boot, a fate-sharing group's order on
every restart. Pure: reads the children's states, changes nothing."""

from __future__ import annotations

from typing import Sequence

from rocketbox.cluster.supervision.children import ChildState, _Child, _TERMINAL_STATES


def may_start(child: _Child, children: Sequence[_Child], members: Sequence[_Child], *, first_boot: bool,
              now: float) -> bool:
    """Whether ``child`` (its restart due by ``now``) may start now.

    ``children`` is the whole table in start order, ``members`` the child's group in start order.
    On first boot a child waits for every child of a lower ``start_order`` to be ready: children of
    one start order (the brokers; their workers; ...) start side by side, a cluster's imports and
    recoveries spread over the cores instead of queueing on one; a group's members together once
    their leader is ready; a child that is not ``awaited`` holds back no later order. After that only the group matters: its leader starts alone, since
    recovering the group's shared store needs no worker running, and a member waits for those
    before it."""
    if child.restart_due is None or now < child.restart_due:
        return False
    if first_boot:
        for other in children:
            if other.spec.start_order >= child.spec.start_order:
                break
            if other.spec.awaited and other.state != ChildState.RUNNING:
                return False
        if not child.spec.leader and _leader_running(members):
            return True   # a group's workers share nothing but the store their leader recovered
    if child.spec.leader:
        return all(not m.alive for m in members if m is not child)
    for member in members:
        if member is child:
            return True
        if member.state != ChildState.RUNNING and member.state not in _TERMINAL_STATES:
            return False
    return True


def _leader_running(members: Sequence[_Child]) -> bool:
    return any(m.spec.leader and m.state == ChildState.RUNNING for m in members)


def next_in_line(child: _Child, children: Sequence[_Child]) -> bool:
    """On first boot, whether ``child`` belongs to the wave after the one booting now: every awaited
    child of a lower start order has been started. The supervisor imports what such a child is forked
    with while that wave boots, not earlier: an import holds its loop (one module a turn), and a
    readiness line of the booting wave waits in its pipe meanwhile."""
    for other in children:
        if other.spec.start_order >= child.spec.start_order:
            break
        if other.spec.awaited and other.state == ChildState.PENDING:
            return False
    return True

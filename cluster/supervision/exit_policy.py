"""What a child's death means: the supervisor's decision table, kept apart from its bookkeeping so
that each rule reads on one line. Pure."""

from __future__ import annotations

import enum

from rocketbox.cluster.supervision.child_table import RestartPolicy
from rocketbox.cluster.supervision.children import ChildState
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR, EXIT_ROLE_CHANGED
from rocketbox.cluster.supervision.run_state import SupervisorState


class ExitAction(enum.StrEnum):
    STOPPED = "stopped"  # we stopped it, or the whole cluster is stopping: it stays down
    REJOIN_GROUP = "rejoin-group"  # stopped because its group's leader died: restarts with the group
    RESTART_AT_ONCE = "restart-at-once"  # a replica given another role: not a crash
    BOOT_FAILURE = "boot-failure"  # died while the cluster was starting: start() fails
    HALT = "halt"  # a boot error: restarting cannot help, the cluster stops
    STAY_DOWN = "stay-down"  # its restart policy says so
    RESTART = "restart"  # after its back-off


def exit_action(*, child_state: ChildState, cluster_state: SupervisorState, code: int,
                stopped_with_group: bool, policy: RestartPolicy) -> ExitAction:
    """``child_state`` is the child's state when it died, ``code`` its exit code (negative: the signal)."""
    if child_state == ChildState.STOPPING or cluster_state == SupervisorState.STOPPING:
        if stopped_with_group and cluster_state != SupervisorState.STOPPING:
            return ExitAction.REJOIN_GROUP
        return ExitAction.STOPPED
    died_booting = child_state == ChildState.STARTING
    if code == EXIT_ROLE_CHANGED and not died_booting:
        # A back-off here could outlast the failover controller's time-out and make the replica
        # look dead in its new role.
        return ExitAction.RESTART_AT_ONCE
    if cluster_state == SupervisorState.STARTING:
        return ExitAction.BOOT_FAILURE
    if died_booting and code == EXIT_BOOT_ERROR:
        return ExitAction.HALT
    if policy == RestartPolicy.NEVER or (policy == RestartPolicy.ON_FAILURE and code == 0):
        return ExitAction.STAY_DOWN
    return ExitAction.RESTART

"""The supervisor's two decisions, as the pure functions they are: who may start now
(``start_gate``), and what a child's death means (``exit_policy``). The loop that applies them runs
against real processes in ``test_supervisor.py``."""

from __future__ import annotations

import pytest

from rocketbox.cluster.supervision.child_table import ChildSpec, RestartPolicy
from rocketbox.cluster.supervision.children import ChildState, _Child
from rocketbox.cluster.supervision.event_wait import BLOCKED_CHILD_RECHECK_S, wait_budget_s
from rocketbox.cluster.supervision.exit_policy import ExitAction, exit_action
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR, EXIT_ROLE_CHANGED
from rocketbox.cluster.supervision.run_state import SupervisorState
from rocketbox.cluster.supervision.start_gate import may_start, next_in_line

A = ChildState
S = SupervisorState


@pytest.mark.parametrize("child_state, cluster_state, code, with_group, policy, expected", [
    (A.STOPPING, S.READY, -15, False, RestartPolicy.ALWAYS, ExitAction.STOPPED),
    (A.RUNNING, S.STOPPING, 1, True, RestartPolicy.ALWAYS, ExitAction.STOPPED),
    (A.STOPPING, S.READY, -15, True, RestartPolicy.ALWAYS, ExitAction.REJOIN_GROUP),
    (A.RUNNING, S.READY, EXIT_ROLE_CHANGED, False, RestartPolicy.NEVER, ExitAction.RESTART_AT_ONCE),
    (A.STARTING, S.READY, EXIT_ROLE_CHANGED, False, RestartPolicy.ALWAYS, ExitAction.RESTART),
    (A.RUNNING, S.STARTING, 1, False, RestartPolicy.ALWAYS, ExitAction.BOOT_FAILURE),
    (A.STARTING, S.READY, EXIT_BOOT_ERROR, False, RestartPolicy.ALWAYS, ExitAction.HALT),
    (A.RUNNING, S.READY, EXIT_BOOT_ERROR, False, RestartPolicy.ALWAYS, ExitAction.RESTART),
    (A.RUNNING, S.READY, 0, False, RestartPolicy.ON_FAILURE, ExitAction.STAY_DOWN),
    (A.RUNNING, S.READY, 1, False, RestartPolicy.ON_FAILURE, ExitAction.RESTART),
    (A.RUNNING, S.READY, -9, False, RestartPolicy.NEVER, ExitAction.STAY_DOWN),
    (A.RUNNING, S.READY, -9, False, RestartPolicy.ALWAYS, ExitAction.RESTART),
])
def test_exit_action(child_state, cluster_state, code, with_group, policy, expected):
    assert exit_action(child_state=child_state, cluster_state=cluster_state, code=code,
                       stopped_with_group=with_group, policy=policy) == expected


def _group(*states: ChildState) -> list[_Child]:
    children = []
    for position, state in enumerate(states):
        spec = ChildSpec(name=f"b{position}", argv=["true"], group="b", leader=position == 0)
        child = _Child(spec, position, "/dev/null")
        child.state, child.restart_due = state, 0.0
        children.append(child)
    return children


def test_first_boot_starts_a_groups_members_together_once_its_leader_is_ready():
    leader, flush, reput = _group(A.STARTING, A.PENDING, A.PENDING)
    table = [leader, flush, reput]
    assert not may_start(flush, table, table, first_boot=True, now=1.0)
    leader.state = A.RUNNING
    assert may_start(flush, table, table, first_boot=True, now=1.0)
    flush.state = A.STARTING
    assert may_start(reput, table, table, first_boot=True, now=1.0)
    # On a restart a member still waits for those before it.
    assert not may_start(reput, table, table, first_boot=False, now=1.0)


def test_a_restart_waits_for_its_due_time():
    leader, flush = _group(A.RUNNING, A.BACKOFF)
    flush.restart_due = 5.0
    assert not may_start(flush, [leader, flush], [leader, flush], first_boot=False, now=4.9)
    assert may_start(flush, [leader, flush], [leader, flush], first_boot=False, now=5.0)


def test_a_leader_restarts_only_once_its_group_is_down():
    leader, flush, reput = _group(A.BACKOFF, A.STOPPING, A.STOPPED)
    flush.pid = 12345   # still alive: the group's store is not the leader's alone yet
    group = [leader, flush, reput]
    assert not may_start(leader, group, group, first_boot=False, now=1.0)
    flush.state, flush.pid = A.STOPPED, None
    assert may_start(leader, group, group, first_boot=False, now=1.0)


def test_a_member_waits_for_those_before_it_in_its_group():
    leader, flush, reput = _group(A.STARTING, A.BACKOFF, A.BACKOFF)
    group = [leader, flush, reput]
    assert not may_start(flush, group, group, first_boot=False, now=1.0)
    leader.state = A.RUNNING
    assert may_start(flush, group, group, first_boot=False, now=1.0)
    flush.state = A.EXITED   # its policy keeps it down: it holds nobody back
    assert may_start(reput, group, group, first_boot=False, now=1.0)


def test_the_loop_sleeps_while_a_due_child_waits_for_another():
    """A child due to start but held back (first boot goes one at a time) must not make the loop's
    wait zero: that spun a core for the whole of every cluster start."""
    leader, flush = _group(A.STARTING, A.PENDING)
    leader.ready_deadline = 100.0
    budget_s = wait_budget_s([leader, flush], 1.0, next_heartbeat=50.0, signals_installed=True, now=10.0)
    assert budget_s == pytest.approx(BLOCKED_CHILD_RECHECK_S)
    flush.restart_due = 10.5   # a restart not yet due wakes the loop when it falls due
    assert wait_budget_s([leader, flush], 1.0, next_heartbeat=50.0, signals_installed=True,
                         now=10.0) == pytest.approx(0.5)


def _alone(name: str, order: int, state: ChildState, awaited: bool = True) -> _Child:
    """A child in a group of its own, due to start."""
    child = _Child(ChildSpec(name=name, argv=["true"], start_order=order, awaited=awaited), 0, "/dev/null")
    child.state, child.restart_due = state, 0.0
    return child


def test_first_boot_starts_each_start_order_side_by_side_once_the_one_before_is_ready():
    namesrv, master, proxy, workers = (_alone("namesrv", 0, A.STARTING), _alone("broker-a", 1, A.PENDING),
                                       _alone("proxy", 1, A.PENDING), _alone("flush", 2, A.PENDING))
    table = [namesrv, master, proxy, workers]
    assert not may_start(master, table, [master], first_boot=True, now=1.0)   # the NameServer first
    namesrv.state = A.RUNNING
    assert may_start(master, table, [master], first_boot=True, now=1.0)
    master.state = A.STARTING
    assert may_start(proxy, table, [proxy], first_boot=True, now=1.0)          # beside the broker
    assert not may_start(workers, table, [workers], first_boot=True, now=1.0)  # after both are ready
    master.state = proxy.state = A.RUNNING
    assert may_start(workers, table, [workers], first_boot=True, now=1.0)


def test_a_door_not_awaited_starts_with_the_first_wave_and_holds_no_later_one_back():
    """The proxy, console and metrics exporter need nothing to boot and nothing needs them: a cluster
    is ready as soon as its slowest door is, not after the doors' imports and then the workers'."""
    namesrv, proxy, master, flush = (_alone("namesrv", 0, A.STARTING), _alone("proxy", 0, A.PENDING, awaited=False),
                                     _alone("broker-a", 1, A.PENDING), _alone("flush", 2, A.PENDING))
    table = [namesrv, proxy, master, flush]
    assert may_start(proxy, table, [proxy], first_boot=True, now=1.0)          # beside the NameServer
    proxy.state = A.STARTING
    assert not may_start(master, table, [master], first_boot=True, now=1.0)   # the NameServer still first
    namesrv.state = A.RUNNING
    assert may_start(master, table, [master], first_boot=True, now=1.0)       # the proxy still booting
    master.state = A.RUNNING
    assert may_start(flush, table, [flush], first_boot=True, now=1.0)


def test_preload_names_what_the_supervisor_imports_before_the_fork():
    spec = ChildSpec(name="broker-a", module="m.broker", preload=["m.base"])
    assert spec.modules_before_fork == ("m.base",)
    assert ChildSpec.from_dict(spec.to_dict()) == spec
    assert ChildSpec(name="flush", module="m.flush").modules_before_fork == ("m.flush",)
    with pytest.raises(ValueError, match="preload goes with module"):
        ChildSpec(name="x", argv=["true"], preload=["m.base"]).validate()


def test_what_the_next_wave_is_forked_with_is_imported_while_the_wave_before_it_boots_not_earlier():
    """An import holds the supervisor's loop: made while the NameServer boots, it delayed the moment
    the NameServer's readiness was read, and with it every later wave."""
    namesrv, metrics, master, flush = (_alone("namesrv", 0, A.STARTING), _alone("metrics", 0, A.STARTING, awaited=False),
                                       _alone("broker-a", 1, A.PENDING), _alone("flush", 2, A.PENDING))
    table = [namesrv, metrics, master, flush]
    assert next_in_line(master, table)           # the NameServer boots: the masters are next
    assert not next_in_line(flush, table)        # the workers two waves ahead
    master.state = A.STARTING
    assert next_in_line(flush, table)            # the masters boot (the metrics exporter holds none back)

"""The controller's first election (controller/service.py): the broker configured as master
(replica 1) is elected at a group's first start even when the configured slave registered first,
unless it stays away past FIRST_MASTER_WAIT_MAX_S. The replicated log is the pure ControllerState
applied at once (Raft's ordering is raft.py's concern, not the decision's)."""

from __future__ import annotations

import json

from rocketbox.cluster.config import NamesrvConfig
from rocketbox.cluster.controller import service
from rocketbox.cluster.controller.state import ControllerState
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.wire_format import Command


class AppliedAtOnce:
    """ControllerService's view of the replicated state, one node, every command applied at once."""

    def __init__(self):
        self.state = ControllerState()

    def is_leader(self) -> bool:
        return True

    def leader_address(self) -> str:
        return "127.0.0.1:1"

    def group(self, broker_name):
        return self.state.group(broker_name)

    def groups(self):
        return list(self.state.groups.values())

    def register(self, broker_name, replica, outcome):
        outcome(self.state.register(broker_name, replica))

    def elect(self, broker_name, new_master_id, expected_epoch, epoch_floor, outcome):
        outcome(self.state.elect(broker_name, new_master_id, expected_epoch, epoch_floor))

    def alter_sync_set(self, broker_name, master_id, epoch, sync_set, outcome):
        outcome(self.state.alter_sync_set(broker_name, master_id, epoch, frozenset(sync_set)))


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _heartbeat(controller, replica_id: int) -> None:
    port = 10910 + replica_id
    request = Command(RequestCode.BROKER_HEARTBEAT, {
        "brokerName": "broker-a", "brokerId": str(replica_id), "brokerAddr": f"127.0.0.1:{port}",
        "haServerAddr": f"127.0.0.1:{port + 1000}", "epoch": "0", "maxOffset": "0"}, json.dumps({}).encode(), 7, 0)
    answer = controller.on_heartbeat(request)
    assert answer.code == 0, answer.remark


def _controller():
    clock = Clock()
    replicated = AppliedAtOnce()
    return service.ControllerService(NamesrvConfig(), replicated, clock_s=clock), replicated, clock


def test_the_configured_master_is_elected_though_the_slave_registered_first():
    controller, replicated, clock = _controller()
    _heartbeat(controller, 2)
    for _ in range(6):   # the slave alone for 3 s: past the first wait, nobody is elected
        clock.now += 0.5
        _heartbeat(controller, 2)
        controller.scan()
    assert replicated.group("broker-a").master_id is None
    _heartbeat(controller, 1)
    controller.scan()
    assert replicated.group("broker-a").master_id == 1


def test_a_slave_is_elected_when_the_configured_master_stays_away():
    controller, replicated, clock = _controller()
    _heartbeat(controller, 2)
    steps = int(service.FIRST_MASTER_WAIT_MAX_S / 0.5) + 1
    for _ in range(steps):
        clock.now += 0.5
        _heartbeat(controller, 2)
        controller.scan()
    assert replicated.group("broker-a").master_id == 2


class HeldUntilApplied(AppliedAtOnce):
    """Registrations wait, as a Raft proposal waits for its commit, until ``apply_registrations``."""

    def __init__(self):
        super().__init__()
        self.held = []

    def register(self, broker_name, replica, outcome):
        self.held.append((broker_name, replica, outcome))

    def apply_registrations(self):
        held, self.held = self.held, []
        for broker_name, replica, outcome in held:
            outcome(self.state.register(broker_name, replica))


def test_a_replicas_registration_does_not_wait_for_anothers_in_flight():
    clock = Clock()
    replicated = HeldUntilApplied()
    controller = service.ControllerService(NamesrvConfig(), replicated, clock_s=clock)
    _heartbeat(controller, 2)
    _heartbeat(controller, 1)   # replica 2's registration not yet committed
    assert sorted(replica.replica_id for _, replica, _ in replicated.held) == [1, 2]
    _heartbeat(controller, 1)   # its own is in flight: not proposed again
    assert len(replicated.held) == 2
    replicated.apply_registrations()
    assert [r.replica_id for r in replicated.group("broker-a").replicas] == [1, 2]

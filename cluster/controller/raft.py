"""The controller state replicated by Raft: the one module that knows PySyncObj.

Everything else sees ``ReplicatedController``: ``is_leader``, ``group``, ``groups`` and three
proposals (register, elect, alter_sync_set) that complete asynchronously with True (applied
and changed something), False (applied, changed nothing: its expectation no longer held) or
an error text (not committed: no leader, leadership lost, time-out).

PySyncObj runs its own thread (autoTick) with a TCP listener bound to the node's controller
address (never every interface); commands are applied on that thread, in log order, on every
node. What it guarantees: a command is applied only once a majority of nodes hold it, every
node applies the same commands in the same order, and with a journal file a restarted node
resumes its log. Its messages are pickled Python, so nothing of a peer is read before the peer
proves it holds the cluster's controller secret (``secret``: PySyncObj's Fernet encryption,
authenticated, keyed from it; controller/secret.py), and even then only through an unpickler
that refuses every global but plain data types, with what a connection may buffer bounded
(controller/raft_wire.py). A single node is its own majority: it commits alone.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from rocketbox.cluster.controller import raft_codec
from rocketbox.cluster.controller.raft_wire import BoundedTransport
from rocketbox.cluster.controller.state import ControllerState, GroupState, Replica

log = logging.getLogger(__name__)

Outcome = Callable[[object], None]   # called with True, False, or an error text

_FAILURES = {value: name for name, value in vars(FAIL_REASON).items() if not name.startswith("_")}


class _StateMachine(SyncObjConsumer):
    """The replicated part; every method marked @replicated runs on each node in log order."""

    def __init__(self):
        self._lock = threading.Lock()   # before SyncObjConsumer's __init__: what exists then is not serialized
        super().__init__()
        self.state = ControllerState()

    @replicated
    def register(self, broker_name: str, replica_id: int, address: str, ha_address: str) -> bool:
        with self._lock:
            return self.state.register(broker_name, Replica(replica_id, address, ha_address))

    @replicated
    def elect(self, broker_name: str, new_master_id: int, expected_epoch: int, epoch_floor: int) -> bool:
        with self._lock:
            return self.state.elect(broker_name, new_master_id, expected_epoch, epoch_floor)

    @replicated
    def alter_sync_set(self, broker_name: str, master_id: int, epoch: int, sync_set: list) -> bool:
        with self._lock:
            return self.state.alter_sync_set(broker_name, master_id, epoch, frozenset(sync_set))

    def group(self, broker_name: str) -> GroupState:
        with self._lock:
            return self.state.group(broker_name)

    def groups(self) -> list[GroupState]:
        with self._lock:
            return list(self.state.groups.values())


class ReplicatedController:
    def __init__(self, self_address: str, peer_addresses: list[str], secret: str, data_dir: str = "",
                 election_timeout_s: tuple[float, float] = (0.4, 1.4)):
        if not secret:
            raise ValueError("a controller node needs the cluster's controller secret")
        raft_codec.install()
        self.machine = _StateMachine()
        journal = dump = None
        if data_dir:
            os.makedirs(data_dir, exist_ok=True)
            journal = os.path.join(data_dir, "controller.journal")
            dump = os.path.join(data_dir, "controller.dump")
        conf = SyncObjConf(
            password=secret, bindAddress=self_address, journalFile=journal, fullDumpFile=dump,
            raftMinTimeout=election_timeout_s[0], raftMaxTimeout=election_timeout_s[1],
            appendEntriesPeriod=min(0.1, election_timeout_s[0] / 4),
            # A leader cut off from the majority steps down soon, so it stops answering as leader.
            leaderFallbackTimeout=max(1.0, election_timeout_s[1]),
            connectionRetryTime=0.5, commandsWaitLeader=False, dynamicMembershipChange=False)
        self.node = SyncObj(self_address, list(peer_addresses), conf=conf, consumers=[self.machine],
                            transportClass=BoundedTransport)

    def is_leader(self) -> bool:
        return self.node._isLeader()

    def leader_address(self) -> str:
        leader = self.node._getLeader()
        return "" if leader is None else getattr(leader, "address", str(leader))

    def group(self, broker_name: str) -> GroupState:
        return self.machine.group(broker_name)

    def groups(self) -> list[GroupState]:
        return self.machine.groups()

    def status(self) -> dict:
        raw = self.node.getStatus()
        return {"self": str(raw.get("self")), "leader": str(raw.get("leader")), "state": raw.get("state"),
                "term": raw.get("raft_term"), "commitIdx": raw.get("commit_idx")}

    def register(self, broker_name: str, replica: Replica, outcome: Outcome) -> None:
        self.machine.register(broker_name, replica.replica_id, replica.address, replica.ha_address,
                              callback=_callback(outcome))

    def elect(self, broker_name: str, new_master_id: int, expected_epoch: int, epoch_floor: int,
              outcome: Outcome) -> None:
        self.machine.elect(broker_name, new_master_id, expected_epoch, epoch_floor, callback=_callback(outcome))

    def alter_sync_set(self, broker_name: str, master_id: int, epoch: int, sync_set: list[int],
                       outcome: Outcome) -> None:
        self.machine.alter_sync_set(broker_name, master_id, epoch, sorted(sync_set), callback=_callback(outcome))

    def close(self) -> None:
        self.node.destroy()


def _callback(outcome: Outcome):
    def done(result, error):
        if error == FAIL_REASON.SUCCESS:
            outcome(bool(result))
        else:
            outcome(f"not committed: {_FAILURES.get(error, error)}")
    return done

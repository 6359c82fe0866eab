"""The controller's replicated state and its election rule (RocketMQ 5's Controller). Pure: no I/O.

Per broker group (a broker name) it holds who the master is, the group's epoch, and the
in-sync replica set (``sync_set``, RocketMQ's SyncStateSet): the replicas a master has
confirmed hold everything it acknowledged. Replicas are numbered from 1 (``replica_id``,
RocketMQ 5's controller-assigned brokerId); routes show the master as brokerId 0.

Every change is a command applied in the same order on every controller node (the Raft
log, ``raft.py``); each command checks what it expects (compare and set), so a command
proposed on stale knowledge changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Replica:
    replica_id: int
    address: str        # request endpoint host:port
    ha_address: str     # where its slaves connect when it is master


@dataclass(frozen=True)
class GroupState:
    broker_name: str
    master_id: int | None = None
    epoch: int = 0
    sync_set: frozenset[int] = frozenset()
    replicas: tuple[Replica, ...] = ()

    def replica(self, replica_id: int | None) -> Replica | None:
        return next((r for r in self.replicas if r.replica_id == replica_id), None)

    def to_json(self) -> dict:
        master = self.replica(self.master_id)
        return {"brokerName": self.broker_name, "masterId": self.master_id, "epoch": self.epoch,
                "masterAddress": master.address if master else "",
                "masterHaAddress": master.ha_address if master else "",
                "syncStateSet": sorted(self.sync_set),
                "replicas": {str(r.replica_id): r.address for r in self.replicas}}


@dataclass(frozen=True)
class Liveness:
    """What a replica said in its last heartbeat (leader-local, not replicated)."""
    heard_s: float
    epoch: int        # the last epoch in its log
    max_offset: int   # its CommitLog end


@dataclass
class ControllerState:
    groups: dict[str, GroupState] = field(default_factory=dict)

    def group(self, broker_name: str) -> GroupState:
        return self.groups.get(broker_name) or GroupState(broker_name)

    # ---- commands (each applied through the replicated log) ----

    def register(self, broker_name: str, replica: Replica) -> bool:
        g = self.group(broker_name)
        if g.replica(replica.replica_id) == replica:
            return False
        others = tuple(r for r in g.replicas if r.replica_id != replica.replica_id)
        self.groups[broker_name] = replace(g, replicas=tuple(sorted(others + (replica,),
                                                                    key=lambda r: r.replica_id)))
        return True

    def elect(self, broker_name: str, new_master_id: int, expected_epoch: int, epoch_floor: int = 0) -> bool:
        """Make ``new_master_id`` master in a new epoch, if the group is still at ``expected_epoch``.

        The new epoch is above every epoch any replica reported (``epoch_floor``), so it is new
        even if this state was lost and rebuilt. The sync set becomes the new master alone: each
        slave joins again once it has caught up with it."""
        g = self.group(broker_name)
        if g.epoch != expected_epoch or g.replica(new_master_id) is None:
            return False
        self.groups[broker_name] = replace(g, master_id=new_master_id, epoch=max(g.epoch, epoch_floor) + 1,
                                           sync_set=frozenset({new_master_id}))
        return True

    def alter_sync_set(self, broker_name: str, master_id: int, epoch: int, sync_set: frozenset[int]) -> bool:
        """The master's view of its in-sync replicas; refused from anyone but the current master."""
        g = self.group(broker_name)
        if g.master_id != master_id or g.epoch != epoch or master_id not in sync_set:
            return False
        known = {r.replica_id for r in g.replicas}
        self.groups[broker_name] = replace(g, sync_set=frozenset(sync_set) & known)
        return True


def choose_master(g: GroupState, live: dict[int, Liveness], now_s: float, timeout_s: float) -> int | None:
    """The replica to elect, or None when the master is alive or nobody may take over.

    Candidates are live replicas (heard within ``timeout_s``) of the sync set, or of the whole
    group when it never had one (first start). Ranked by epoch, then CommitLog end, then the
    lowest id (RocketMQ 5's DefaultElectPolicy)."""
    def alive(replica_id: int) -> bool:
        seen = live.get(replica_id)
        return seen is not None and now_s - seen.heard_s <= timeout_s

    if g.master_id is not None and alive(g.master_id):
        return None
    pool = g.sync_set if g.sync_set else {r.replica_id for r in g.replicas}
    candidates = [i for i in pool if alive(i) and g.replica(i) is not None]
    if not candidates:
        return None
    return max(candidates, key=lambda i: (live[i].epoch, live[i].max_offset, -i))

"""A controller-mode master's SyncStateSet and what a sync write waits for. Pure: no I/O.

RocketMQ 5 (AutoSwitchHAService, ReplicasManager, CommitLog.asyncPutMessage, GroupTransferService):

- The SyncStateSet is the master and the replicas that have kept up with it; only its members may
  be elected. A slave joins (*expand*) once it acknowledges everything the master had when it last
  sent to it, and at least the start of the master's epoch. A member leaves (*shrink*) once it has
  not caught up for ``haMaxTimeSlaveNotCatchup`` (15 s; ``ha_max_time_slave_not_catchup_ms``). The
  master reports its set in every heartbeat and the controller's leader takes it (a Raft commit).
- Until the controller holds a change, a write waits for the union of the master's set and the
  controller's (Apache's "synchronizing" state): a shrunken member stops being waited for only once
  it can no longer be elected, so no write answered SEND_OK is missing from an electable replica.
- A SYNC_MASTER write that waits for the store (waitStoreMsgOK) is refused before it is stored,
  SYSTEM_ERROR "in-sync replicas not enough", when the set is smaller than ``minInSyncReplicas``
  (1: never). Then, with ``allAckInSyncStateSet`` it waits for every member of the set (none but
  the master: at once); else for ``inSyncReplicas`` replicas counting the master (1: at once), any
  connected slaves. A wait that runs out answers FLUSH_SLAVE_TIMEOUT; the write stays stored.

So with one slave gone, the set shrinks to the master alone and the master keeps answering SEND_OK
(instead of SLAVE_NOT_AVAILABLE, the classic master/slave answer when no slave is in sync).
"""

from __future__ import annotations

NO_LIMIT = (1 << 63) - 1


class SyncStateSet:
    def __init__(self, own_id: int, given, not_catchup_s: float, now_s: float):
        """``given``: the set the controller named with this master. Its members count as caught up
        now, so a restarted master keeps them until they have had ``not_catchup_s`` to reconnect
        (else a quick master restart would leave nobody else electable)."""
        self.own_id = own_id
        self.not_catchup_s = not_catchup_s
        self.local = frozenset(given) | {own_id}
        self.confirmed = self.local   # the controller's set, from its leader's last answer
        self.caught_up_s = {i: now_s for i in self.local if i != own_id}

    def members(self) -> frozenset[int]:
        """Whose acknowledgement an all-ack write waits for (the master's own counts at once)."""
        return self.local | self.confirmed

    def size(self) -> int:
        """RocketMQ's inSyncReplicasNums: the larger of the master's set and the controller's."""
        return max(len(self.local), len(self.confirmed))

    def controller_holds(self, sync_set) -> None:
        self.confirmed = frozenset(int(i) for i in sync_set) | {self.own_id}

    def acknowledged(self, replica_id: int, acked: int, caught_up_s: float | None, epoch_start: int) -> bool:
        """A slave's acknowledgement of ``acked``; ``caught_up_s``: when the master's end was last no
        further than that (None: it has not caught up). True when the slave joined the set."""
        if caught_up_s is None or replica_id == self.own_id:
            return False
        self.caught_up_s[replica_id] = max(self.caught_up_s.get(replica_id, caught_up_s), caught_up_s)
        if replica_id in self.local or acked < epoch_start:
            return False
        self.local = self.local | {replica_id}
        return True

    def shrink(self, now_s: float) -> frozenset[int]:
        """Drop the members that have not caught up for ``not_catchup_s``: the members dropped."""
        stale = frozenset(i for i in self.local
                          if i != self.own_id and now_s - self.caught_up_s.get(i, float("-inf")) > self.not_catchup_s)
        self.local = self.local - stale
        return stale


def replicated_to(sync_state: SyncStateSet, acks: dict[int, int], all_ack: bool, in_sync_replicas: int) -> int:
    """The end offset up to which a sync write may be answered SEND_OK: ``acks`` is each connected,
    non-diverged slave's acknowledged offset by replica id. NO_LIMIT: nothing to wait for."""
    if all_ack:
        others = sync_state.members() - {sync_state.own_id}
        return min((acks.get(i, -1) for i in others), default=NO_LIMIT)
    if in_sync_replicas <= 1:
        return NO_LIMIT
    ranked = sorted(acks.values(), reverse=True)
    return ranked[in_sync_replicas - 2] if len(ranked) >= in_sync_replicas - 1 else -1

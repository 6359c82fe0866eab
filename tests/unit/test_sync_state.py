"""broker/sync_state.py: a controller-mode master's SyncStateSet (RocketMQ 5's shrink and expand) and
what a sync write waits for under allAckInSyncStateSet, inSyncReplicas and minInSyncReplicas."""

from rocketbox.cluster.broker.sync_state import NO_LIMIT, SyncStateSet, replicated_to

MASTER, SLAVE, OTHER = 1, 2, 3


def test_a_member_that_stops_catching_up_leaves_after_the_limit_and_a_caught_up_slave_joins():
    sync = SyncStateSet(MASTER, [MASTER, SLAVE], not_catchup_s=15.0, now_s=100.0)
    assert sync.shrink(114.0) == frozenset() and sync.local == {MASTER, SLAVE}   # the boot grace
    assert sync.shrink(115.5) == {SLAVE} and sync.local == {MASTER}
    # Behind the epoch's start it has not caught up with this master yet; at or past it, it joins.
    assert not sync.acknowledged(SLAVE, 900, caught_up_s=120.0, epoch_start=1000)
    assert sync.acknowledged(SLAVE, 1000, caught_up_s=121.0, epoch_start=1000) and sync.local == {MASTER, SLAVE}
    assert not sync.acknowledged(OTHER, 5000, caught_up_s=None, epoch_start=0)   # still copying: not caught up
    assert sync.local == {MASTER, SLAVE}


def test_an_all_ack_write_waits_for_every_member_the_controller_may_still_elect():
    sync = SyncStateSet(MASTER, [MASTER, SLAVE], not_catchup_s=15.0, now_s=0.0)
    assert replicated_to(sync, {SLAVE: 700}, all_ack=True, in_sync_replicas=1) == 700
    assert replicated_to(sync, {}, all_ack=True, in_sync_replicas=1) == -1   # a member gone: wait, time out
    sync.shrink(16.0)
    # The master dropped it, the controller has not: it may still be elected, so it is still waited for.
    assert sync.local == {MASTER} and replicated_to(sync, {}, all_ack=True, in_sync_replicas=1) == -1
    sync.controller_holds([MASTER])
    assert replicated_to(sync, {}, all_ack=True, in_sync_replicas=1) == NO_LIMIT   # the master alone: at once


def test_in_sync_replicas_counts_the_master_and_any_connected_slaves():
    sync = SyncStateSet(MASTER, [MASTER], not_catchup_s=15.0, now_s=0.0)
    assert replicated_to(sync, {}, all_ack=False, in_sync_replicas=1) == NO_LIMIT
    assert replicated_to(sync, {SLAVE: 500, OTHER: 300}, all_ack=False, in_sync_replicas=2) == 500
    assert replicated_to(sync, {SLAVE: 500, OTHER: 300}, all_ack=False, in_sync_replicas=3) == 300
    assert replicated_to(sync, {SLAVE: 500}, all_ack=False, in_sync_replicas=3) == -1


def test_the_size_min_in_sync_replicas_is_held_to_is_the_larger_of_the_two_views():
    sync = SyncStateSet(MASTER, [MASTER, SLAVE], not_catchup_s=1.0, now_s=0.0)
    sync.shrink(2.0)
    assert sync.size() == 2   # the controller still holds two
    sync.controller_holds([MASTER])
    assert sync.size() == 1

"""The controller's replicated state and election rule (cluster/controller/state.py): pure."""

from rocketbox.cluster.controller.state import ControllerState, GroupState, Liveness, Replica, choose_master

A1 = Replica(1, "h:1", "h:2")
A2 = Replica(2, "h:3", "h:4")
A3 = Replica(3, "h:5", "h:6")


def _state(*replicas) -> ControllerState:
    state = ControllerState()
    for r in replicas:
        assert state.register("broker-a", r)
    return state


def test_register_is_idempotent_and_follows_a_new_address():
    state = _state(A1)
    assert not state.register("broker-a", A1)
    assert state.register("broker-a", Replica(1, "h:9", "h:10"))
    assert state.group("broker-a").replica(1).address == "h:9"


def test_elect_is_compare_and_set_on_the_epoch():
    state = _state(A1, A2)
    assert state.elect("broker-a", 1, expected_epoch=0)
    g = state.group("broker-a")
    assert (g.master_id, g.epoch, g.sync_set) == (1, 1, frozenset({1}))
    assert not state.elect("broker-a", 2, expected_epoch=0)      # proposed on stale knowledge
    assert not state.elect("broker-a", 9, expected_epoch=1)      # unknown replica
    assert state.elect("broker-a", 2, expected_epoch=1, epoch_floor=5)
    assert state.group("broker-a").epoch == 6                    # above every epoch a replica reported


def test_only_the_current_master_alters_the_sync_set():
    state = _state(A1, A2, A3)
    state.elect("broker-a", 1, 0)
    assert not state.alter_sync_set("broker-a", 2, 1, frozenset({1, 2}))   # not the master
    assert not state.alter_sync_set("broker-a", 1, 0, frozenset({1, 2}))   # old epoch
    assert not state.alter_sync_set("broker-a", 1, 1, frozenset({2}))      # without itself
    assert state.alter_sync_set("broker-a", 1, 1, frozenset({1, 2, 7}))
    assert state.group("broker-a").sync_set == {1, 2}                      # unknown ids dropped


def _live(now, **by_id):
    return {int(k[1:]): Liveness(now - age, epoch, offset) for k, (age, epoch, offset) in by_id.items()}


def test_choose_master_ranks_live_sync_set_members_by_epoch_then_offset():
    g = GroupState("broker-a", master_id=1, epoch=4, sync_set=frozenset({1, 2, 3}), replicas=(A1, A2, A3))
    now = 100.0
    assert choose_master(g, _live(now, r1=(1, 4, 900), r2=(0, 4, 800)), now, 3.0) is None   # master alive
    assert choose_master(g, _live(now, r1=(5, 4, 900), r2=(0, 4, 800), r3=(0, 3, 999)), now, 3.0) == 2
    assert choose_master(g, _live(now, r1=(5, 4, 900), r2=(0, 4, 800), r3=(0, 4, 850)), now, 3.0) == 3
    assert choose_master(g, _live(now, r1=(5, 4, 900), r2=(0, 4, 800), r3=(0, 4, 800)), now, 3.0) == 2
    assert choose_master(g, _live(now, r1=(5, 4, 900), r2=(4, 4, 800)), now, 3.0) is None   # nobody alive


def test_choose_master_never_picks_outside_the_sync_set():
    g = GroupState("broker-a", master_id=1, epoch=2, sync_set=frozenset({1}), replicas=(A1, A2))
    assert choose_master(g, _live(10.0, r1=(9, 2, 5), r2=(0, 2, 5)), 10.0, 3.0) is None


def test_first_start_elects_any_live_replica():
    g = GroupState("broker-a", replicas=(A1, A2))
    assert choose_master(g, _live(10.0, r2=(0, 0, 0)), 10.0, 3.0) == 2
    assert choose_master(g, _live(10.0, r1=(0, 0, 0), r2=(0, 0, 0)), 10.0, 3.0) == 1

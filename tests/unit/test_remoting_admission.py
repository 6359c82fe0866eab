"""The remoting door's admission policy (``cluster/remoting_admission.py``): who gives way to a
newcomer, what the byte budgets drop, when a stranger's time is up. Pure: places and a clock."""

from __future__ import annotations

from rocketbox.cluster.remoting_admission import (EVICTED_BYTES, EVICTED_DEADLINE, EVICTED_HOST_CAP,
                                                  EVICTED_TABLE_FULL, Admission, AdmissionLimits)

LIMITS = AdmissionLimits(connections_max=4, unproven_timeout_s=10.0, unproven_bytes_max=100, buffered_bytes_max=300,
                         unproven_per_host_max=3, proven_quiet_s=5.0)


def _admit(admission: Admission, name: str, host: str = "127.0.0.1", now: float = 0.0):
    place, taken = admission.admit(name, host, now)
    assert place is not None, f"{name} refused"
    return place, [p.owner for p in taken]


def admission_place(admission: Admission, owner: str):
    return next(p for p in admission.places() if p.owner == owner)


def test_a_host_over_its_share_gives_up_its_unproven_place_idle_longest():
    admission = Admission(LIMITS)
    a, _ = _admit(admission, "a", now=0)
    b, _ = _admit(admission, "b", now=1)
    _admit(admission, "c", now=2)
    admission.active(a, now=3)   # a spoke since: b is now the one idle longest
    _, taken = _admit(admission, "d", now=4)
    assert taken == ["b"] and not b.present
    _, taken = _admit(admission, "other-host", host="127.0.0.2", now=5)
    assert taken == []   # another host's newcomer takes nobody's place while the table has room
    assert admission.evicted == {EVICTED_HOST_CAP: 1}


def test_a_full_table_drops_a_stranger_before_a_quiet_client_and_never_a_busy_one():
    admission = Admission(LIMITS)
    clients = [_admit(admission, f"client{i}", host=f"10.0.0.{i}", now=0)[0] for i in range(3)]
    for place in clients:
        admission.prove(place)
    _admit(admission, "stranger", host="10.0.0.9", now=1)
    _, taken = _admit(admission, "newcomer", host="10.0.0.8", now=2)
    assert taken == ["stranger"]
    # Now every place is proven. A parked pull (an answer owed) keeps clients[0] in use however
    # long it is quiet; clients[1] spoke recently; clients[2] and the newcomer have been quiet.
    clients[0].unanswered = 1
    clients[1].last_active = 5.5
    admission.prove(admission_place(admission, "newcomer"))
    admission.active(admission_place(admission, "newcomer"), now=6)
    _, taken = _admit(admission, "late", host="10.0.0.7", now=8)
    assert taken == ["client2"]   # quiet for 8 s (>= 5) with nothing unanswered
    admission.prove(admission_place(admission, "late"))
    admission.active(admission_place(admission, "late"), now=8)
    place, taken = admission.admit("refused", "10.0.0.6", 9)
    assert place is None and taken == []   # every place in use: the newcomer is the one refused
    assert admission.evicted == {EVICTED_TABLE_FULL: 2}


def test_the_unproven_budget_drops_the_oldest_unfinished_frame_and_proof_lifts_it():
    admission = Admission(LIMITS)
    old, _ = _admit(admission, "old", host="10.0.0.1")
    new, _ = _admit(admission, "new", host="10.0.0.2")
    assert admission.holding(old, 60, frame_done=False) == []
    assert admission.holding(new, 30, frame_done=False) == []
    # The newer frame grows past the budget: the older unfinished one goes, not the one growing.
    assert [p.owner for p in admission.holding(new, 50, frame_done=False)] == ["old"]
    assert (admission.unproven_bytes, admission.buffered_bytes) == (50, 50)
    # Proven, its bytes count against the overall budget only.
    admission.prove(new)
    assert admission.unproven_bytes == 0 and admission.buffered_bytes == 50
    stranger, _ = _admit(admission, "stranger", host="10.0.0.3")
    assert admission.holding(stranger, 100, frame_done=False) == []
    assert admission.evicted == {EVICTED_BYTES: 1}


def test_the_overall_budget_drops_the_holder_whose_frame_is_oldest_and_a_finished_frame_starts_anew():
    admission = Admission(LIMITS)
    places = []
    for name in ("a", "b", "c"):
        place, _ = _admit(admission, name, host=f"10.0.0.{len(places)}")
        admission.prove(place)
        places.append(place)
    a, b, c = places
    admission.holding(a, 100, frame_done=False)
    admission.holding(b, 100, frame_done=False)
    admission.holding(a, 100, frame_done=True)   # a finished a frame and holds a new one's start: the newest now
    assert [p.owner for p in admission.holding(c, 150, frame_done=False)] == ["b"]
    assert admission.buffered_bytes == 250
    admission.leave(a)
    admission.leave(a)   # closing twice changes nothing
    assert admission.buffered_bytes == 150 and len(admission) == 1


def test_a_stranger_has_its_time_out_from_accept_to_prove_itself():
    admission = Admission(LIMITS)
    early, _ = _admit(admission, "early", host="10.0.0.1", now=0)
    proven, _ = _admit(admission, "proven", host="10.0.0.2", now=0)
    _admit(admission, "late", host="10.0.0.3", now=5)
    admission.prove(proven)
    admission.active(early, now=9.9)   # dripping bytes does not buy time
    assert [p.owner for p in admission.overdue(10.5)] == ["early"]
    assert [p.owner for p in admission.overdue(15.5)] == ["late"]
    assert admission.overdue(100) == [] and len(admission) == 1
    assert admission.evicted == {EVICTED_DEADLINE: 2}

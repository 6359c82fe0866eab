"""Pure client pieces: queue allocation, unique ids, group-commit waiters."""

from __future__ import annotations

import os

from cluster.broker.waiters import FlushWaiters
from cluster.client.allocation import allocate_average
from cluster.client.message import UniqueIdMaker


def test_average_allocation_covers_every_queue_once():
    for n_queues in range(0, 13):
        for n_members in range(1, 6):
            members = [f"c{i}" for i in range(n_members)]
            queues = list(range(n_queues))
            shares = [allocate_average(queues, members, m) for m in members]
            flat = [q for share in shares for q in share]
            assert sorted(flat) == queues if n_queues >= n_members else len(set(flat)) == len(flat)
            sizes = [len(s) for s in shares]
            assert max(sizes) - min(sizes) <= 1


def test_average_allocation_is_rocketmq_paging():
    members = ["a", "b", "c"]
    assert [allocate_average(range(8), members, m) for m in members] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert allocate_average(range(8), members, "stranger") == []


def test_unique_ids_are_unique_and_fork_safe():
    maker = UniqueIdMaker()
    ids = {maker.next() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(len(i) == 32 for i in ids)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, maker.next().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child_id = os.read(r, 64).decode()
    assert child_id not in ids and child_id[:20] != next(iter(ids))[:20]


def test_group_commit_releases_every_flushed_waiter_and_times_out_the_rest():
    waiters = FlushWaiters()
    answered = []
    for end in (100, 200, 300):
        waiters.park(end, deadline_s=10.0, on_flushed=lambda e=end: answered.append(("ok", e)),
                     on_timeout=lambda e=end: answered.append(("timeout", e)))
    assert waiters.release(flushed_pos=250, now_s=0.0) == 2
    assert answered == [("ok", 100), ("ok", 200)]
    assert waiters.release(flushed_pos=250, now_s=11.0) == 1
    assert answered[-1] == ("timeout", 300)

"""A pull answered from the newest writes before the reput indexed them (shm/recent_writes.py):
the same records, offsets and next offsets the ConsumeQueue gives once dispatched."""

from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.shm import commitlog_format as fmt
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.shm import batch_format
from rocketbox.cluster.shm.recent_writes import RUNS_PER_QUEUE_MAX, RecentWrites
from rocketbox.cluster.shm.store import BatchBody, GetMessageStatus as G
from tests.store_harness import Harness, message, tiny_config

import pytest


@pytest.fixture
def h(tmp_path):
    harness = Harness(tiny_config(tmp_path))
    yield harness
    harness.close()


def _bodies(payload: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(payload):
        rec = fmt.decode_at(payload, pos)
        out.append((rec.queue_offset, rec.body))
        pos += rec.total_size
    return out


def _get(h, offset, count=32, max_bytes=1 << 20, tags=None, queue=0):
    return h.store.get_messages("T", queue, offset, count, max_bytes, tags, joined=True)


def test_a_pull_reads_records_written_but_not_yet_dispatched_and_the_same_after_dispatch(h):
    h.store.put_messages("T", 0, [message(b"a"), message(b"b")])
    h.store.put_messages("U", 0, [message(b"other queue")])   # interleaved in the CommitLog
    h.store.put_messages("T", 0, [message(b"c")])
    early = [_get(h, offset) for offset in (0, 1, 2)]
    assert [(r.status, r.next_begin_offset, r.max_offset) for r in early] == [(G.FOUND, 3, 3), (G.FOUND, 3, 3),
                                                                                (G.FOUND, 3, 3)]
    assert _bodies(early[0].payload) == [(0, b"a"), (1, b"b"), (2, b"c")] and early[0].message_count == 3
    assert _bodies(early[1].payload) == [(1, b"b"), (2, b"c")]
    assert _get(h, 3).status is G.OFFSET_OVERFLOW_ONE     # caught up: the pull parks
    h.dispatch_all()
    late = [_get(h, offset) for offset in (0, 1, 2)]
    assert [(r.status, r.next_begin_offset, r.payload) for r in late] == \
        [(r.status, r.next_begin_offset, r.payload) for r in early]


def test_counts_bytes_and_tag_filters_are_kept(h):
    h.store.put_messages("T", 0, [message(bytes([i]) * 10) for i in range(5)])
    r = _get(h, 1, count=2)
    assert (r.status, r.next_begin_offset, [b for _, b in _bodies(r.payload)]) == \
        (G.FOUND, 3, [b"\x01" * 10, b"\x02" * 10])
    one = len(_get(h, 0, count=1).payload)
    r = _get(h, 0, max_bytes=2 * one)
    assert (r.message_count, r.next_begin_offset) == (2, 2)
    assert _get(h, 0, max_bytes=1).message_count == 1      # at least one record
    # A tag subscription needs the reput's tag hashes: it waits for the ConsumeQueue.
    assert _get(h, 0, tags=frozenset({1})).status is G.OFFSET_OVERFLOW_ONE
    # A consumer served ahead of the ConsumeQueue is not moved back (no OFFSET_OVERFLOW_BADLY).
    assert _get(h, 4).status is G.FOUND and _get(h, 5).status is G.OFFSET_OVERFLOW_ONE


def test_batch_bodies_are_served_from_the_c_encoders_record_ends(h):
    body = batch_format.encode_items((0, b"x%d" % i, b"") for i in range(40))
    result = h.store.put_messages("T", 0, BatchBody(body, 0, 1, pack_host("127.0.0.1", 1)))
    assert result.count == 40
    r = _get(h, 5, count=32)
    assert (r.message_count, r.next_begin_offset) == (32, 37)
    assert [o for o, _ in _bodies(r.payload)] == list(range(5, 37))
    h.dispatch_all()
    assert _get(h, 5, count=32).payload == r.payload


def test_sync_flush_serves_only_the_consumequeue(tmp_path):
    harness = Harness(tiny_config(tmp_path, flush_mode=SYNC_FLUSH))
    try:
        harness.store.put_messages("T", 0, [message(b"a")])
        assert _get(harness, 0).status is G.NO_MESSAGE_IN_QUEUE
    finally:
        harness.close()


def test_runs_are_dropped_once_dispatched_and_bounded_per_queue():
    recent = RecentWrites()
    key = ("T", 0)
    for i in range(RUNS_PER_QUEUE_MAX + 10):
        recent.add(key, i, 1, i * 100, [100], 0, dispatched_pos=0)
    assert recent.select(key, 0, 8, 1 << 20, 1 << 40) == ([], 0)   # the oldest were let go
    assert recent.select(key, 10, 2, 1 << 20, 1 << 40) == ([(1000, 100), (1100, 100)], 2)
    assert recent.end_offset(key) == RUNS_PER_QUEUE_MAX + 10
    recent.add(key, RUNS_PER_QUEUE_MAX + 10, 1, 10 ** 6, [100], 0, dispatched_pos=10 ** 6)
    assert recent.select(key, 10, 2, 1 << 20, 1 << 40) == ([], 0)   # dispatched: the ConsumeQueue has them
    assert recent.take_touched() == {key} and recent.take_touched() == set()
    recent.forget_topic("T")
    assert recent.end_offset(key) == 0

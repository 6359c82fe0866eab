"""MessageStore: puts, pulls (statuses and next offsets), tags, keys, topics, full disk."""

import errno

import pytest

from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import offset_msg_id
from rocketbox.cluster.message.properties import (PROPERTY_CRC32, PROPERTY_DELAY, PROPERTY_REAL_QID,
                                                  PROPERTY_REAL_TOPIC, PROPERTY_TAGS, encode_properties)
from rocketbox.cluster.message.sysflags import (SYSFLAG_TRANSACTION_COMMIT, SYSFLAG_TRANSACTION_PREPARED,
                                                SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.shm import mapped_file
from rocketbox.cluster.message.tags import tag_hash_code
from rocketbox.cluster.shm.store import (BatchBody, GetMessageStatus as G, MessageStore, MessageToStore,
                                        PutMessageStatus as P)
from tests.store_harness import STORE_HOST, Harness, message, tiny_config


@pytest.fixture
def h(tmp_path):
    harness = Harness(tiny_config(tmp_path))
    yield harness
    harness.close()


def bodies(result):
    return [fmt.decode_at(raw, 0).body for raw in result.records]


def test_put_assigns_offsets_and_ids(h):
    r = h.store.put_messages("T", 1, [message(b"a"), message(b"bb"), message(b"ccc")])
    assert r.status is P.PUT_OK and r.count == 3 and r.queue_offset == 0 and r.phys_offset == 0
    sizes = [fmt.record_size(n, 1, fmt.RECORD_CRC_SIZE) for n in (1, 2, 3)]   # each sealed
    assert r.end_phys_offset == sum(sizes) == h.control.write_pos
    assert r.msg_ids == [offset_msg_id(STORE_HOST, p) for p in (0, sizes[0], sizes[0] + sizes[1])]
    r2 = h.store.put_messages("T", 1, [message(b"d")])
    assert r2.queue_offset == 3 and r2.phys_offset == r.end_phys_offset
    rec = h.store.read_record(r2.phys_offset)
    assert rec.queue_offset == 3 and rec.phys_offset == r2.phys_offset and rec.store_host == STORE_HOST
    assert h.store.queue_next_offset("T", 1) == 4


def test_a_written_message_is_readable_at_once_without_the_workers(h):
    """Async flush: one route, the broker's own ConsumeQueue entries; neither worker runs."""
    h.store.put_messages("T", 0, [message(b"a")])
    got = h.store.get_messages("T", 0, 0, 10, 1 << 20, joined=True)
    assert got.status is G.FOUND and got.message_count == 1 and got.next_begin_offset == 1
    assert h.store.max_offset("T", 0) == h.store.readable_end("T", 0) == 1
    assert h.control.dispatched_pos == 0 and h.control.flushed_pos == 0


def test_under_sync_flush_a_message_is_readable_once_flushed(tmp_path):
    h = Harness(tiny_config(tmp_path, flush_mode=SYNC_FLUSH))
    try:
        h.store.put_messages("T", 0, [message(b"a")])
        assert h.store.get_messages("T", 0, 0, 10, 1 << 20).status is G.NO_MESSAGE_IN_QUEUE
        assert h.store.max_offset("T", 0) == 0 and h.control.queued_pos == h.control.write_pos
        h.flush.step()
        got = h.store.get_messages("T", 0, 0, 10, 1 << 20)
        assert got.status is G.FOUND and bodies(got) == [b"a"] and got.next_begin_offset == 1
        assert h.store.max_offset("T", 0) == 1 and h.control.dispatched_pos == 0
    finally:
        h.close()


def test_get_statuses_and_next_begin_offsets(h):
    assert h.store.get_messages("X", 0, 5, 10, 1 << 20)[0] is G.NO_MATCHED_LOGIC_QUEUE
    h.store.put_messages("T", 0, [message(bytes([i])) for i in range(10)])
    h.dispatch_all()
    get = h.store.get_messages
    r = get("T", 0, 4, 3, 1 << 20)
    assert (r.status, bodies(r), r.next_begin_offset, r.min_offset, r.max_offset) == \
        (G.FOUND, [b"\x04", b"\x05", b"\x06"], 7, 0, 10)
    r = get("T", 0, 10, 3, 1 << 20)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_OVERFLOW_ONE, 10)
    r = get("T", 0, 15, 3, 1 << 20)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_OVERFLOW_BADLY, 10)
    r = get("T", 0, -1, 3, 1 << 20)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_TOO_SMALL, 0)
    size = fmt.record_size(1, 1, fmt.RECORD_CRC_SIZE)
    r = get("T", 0, 0, 32, 2 * size + 1)  # max bytes: two records fit
    assert len(r.records) == 2 and r.next_begin_offset == 2
    r = get("T", 0, 0, 32, 1)  # always at least one record
    assert len(r.records) == 1 and r.records[0] == h.store.commitlog.read(0, size)


def test_tag_filter(h):
    msgs = [message(b"%d" % i, tags="A" if i % 3 == 0 else "B") for i in range(9)]
    h.store.put_messages("T", 0, msgs)
    h.dispatch_all()
    want = frozenset({tag_hash_code("A")})
    r = h.store.get_messages("T", 0, 0, 2, 1 << 20, want)
    assert bodies(r) == [b"0", b"3"] and r.next_begin_offset == 4
    r = h.store.get_messages("T", 0, 7, 10, 1 << 20, want)
    assert (r.status, r.records, r.next_begin_offset) == (G.NO_MATCHED_MESSAGE, [], 9)


def test_illegal_input_is_a_status(h):
    put = h.store.put_messages
    assert put("T" * 128, 0, [message()]).status is P.MESSAGE_ILLEGAL
    assert put("", 0, [message()]).status is P.MESSAGE_ILLEGAL
    assert put("T", 0, []).status is P.MESSAGE_ILLEGAL
    assert put("T", -1, [message()]).status is P.MESSAGE_ILLEGAL
    assert put("T", 0, [message(b"x" * 40_000)]).status is P.MESSAGE_ILLEGAL
    big_props = message()._replace(properties=b"p" * 32768)
    assert put("T", 0, [big_props]).status is P.MESSAGE_ILLEGAL
    assert put("T", 0, [message()._replace(flag=1 << 40)]).status is P.MESSAGE_ILLEGAL
    assert put("T", 0, [object()]).status is P.MESSAGE_ILLEGAL
    assert put("T", 0, [message(b"x" * 20_000)] * 4).status is P.MESSAGE_ILLEGAL  # > a segment
    assert h.control.write_pos == 0 and h.store.queue_next_offset("T", 0) == 0
    assert put("T", 0, [message()]).status is P.PUT_OK


def test_not_recovered_store_refuses(tmp_path):
    from rocketbox.cluster.shm.control import ControlBlock
    store = MessageStore(tiny_config(tmp_path), ControlBlock(str(tmp_path / "control")))
    assert store.put_messages("T", 0, [message()]).status is P.SERVICE_NOT_AVAILABLE


def test_batches_never_span_segments(h):
    body = b"b" * 9_000
    ends = []
    for _ in range(10):
        r = h.store.put_messages("T", 0, [message(body), message(body)])
        assert r.status is P.PUT_OK
        seg_start = r.phys_offset - r.phys_offset % (64 * 1024)
        assert r.end_phys_offset <= seg_start + 64 * 1024
        ends.append(r)
    h.dispatch_all()
    r = h.store.get_messages("T", 0, 0, 100, 1 << 30)
    assert len(r.records) == 20 and {fmt.decode_at(x, 0).body for x in r.records} == {body}
    assert [fmt.decode_at(x, 0).queue_offset for x in r.records] == list(range(20))


def test_half_messages_stay_invisible(h):
    prepared = message(b"half", sys_flag=SYSFLAG_TRANSACTION_PREPARED, uniq="H1")
    r = h.store.put_messages("T", 0, [message(b"a"), prepared, message(b"b")])
    assert r.status is P.PUT_OK and h.store.queue_next_offset("T", 0) == 2
    h.dispatch_all()
    assert bodies(h.store.get_messages("T", 0, 0, 10, 1 << 20)) == [b"a", b"b"]
    assert [x.body for x in h.store.query_by_key("T", "H1", 10, 0, 1 << 62)] == [b"half"]


def test_query_by_key_compares_real_keys(h):
    h.store.put_messages("T", 0, [message(b"1", keys="order-1 user-9", uniq="U1"),
                                  message(b"2", keys="order-2", uniq="U2")])
    h.store.put_messages("Other", 0, [message(b"3", keys="order-1")])
    h.dispatch_all()
    q = h.store.query_by_key
    assert [r.body for r in q("T", "order-1", 10, 0, 1 << 62)] == [b"1"]
    assert [r.body for r in q("T", "user-9", 10, 0, 1 << 62)] == [b"1"]
    assert [r.body for r in q("T", "U2", 10, 0, 1 << 62)] == [b"2"]
    assert q("T", "order-1", 10, 0, 1000) == []  # outside the time range
    assert [r.body for r in q("Other", "order-1", 10, 0, 1 << 62)] == [b"3"]


def test_topics_and_delete(h):
    h.store.put_messages("A", 0, [message()])
    h.store.put_messages("A", 2, [message()])
    h.store.put_messages("B", 1, [message()])
    assert h.store.topics_and_queues() == {"A": [0, 2], "B": [1]}
    h.dispatch_all()
    assert h.store.delete_topic("A") == 2
    assert h.store.topics_and_queues() == {"B": [1]}
    assert h.store.get_messages("A", 0, 0, 1, 100).status is G.NO_MATCHED_LOGIC_QUEUE
    assert h.store.queue_next_offset("A", 0) == 0


def test_disk_full_then_resumes(h, monkeypatch):
    body = b"f" * 10_000
    while True:
        r = h.store.put_messages("T", 0, [message(body)])
        assert r.status is P.PUT_OK
        if r.end_phys_offset + 2 * len(body) > 64 * 1024:
            break

    def no_space(fd, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mapped_file, "fallocate", no_space)
    before = h.control.write_pos
    assert h.store.put_messages("T", 0, [message(body)] * 2).status is P.DISK_FULL
    assert h.control.write_pos == before
    next_offset = h.store.queue_next_offset("T", 0)
    monkeypatch.undo()
    r = h.store.put_messages("T", 0, [message(body)] * 2)
    assert r.status is P.PUT_OK and r.phys_offset == 64 * 1024 and r.queue_offset == next_offset
    h.dispatch_all()
    got = h.store.get_messages("T", 0, 0, 100, 1 << 30)
    assert [fmt.decode_at(x, 0).queue_offset for x in got.records] == list(range(next_offset + 2))


def test_a_batch_body_put_matches_its_messages_put(h):
    from rocketbox.cluster.message import batch_format
    items = [(i, b"body-%d" % i, encode_properties({"KEYS": f"k{i}"})) for i in range(5)]
    r = h.store.put_messages("T", 2, BatchBody(batch_format.encode_items(items), 0, 7, STORE_HOST))
    assert r.status is P.PUT_OK and r.count == 5 and r.queue_offset == 0
    h.dispatch_all()
    recs = [fmt.decode_at(x, 0) for x in h.store.get_messages("T", 2, 0, 10, 1 << 20).records]
    assert [(x.flag, x.body, fmt.without_record_crc(x.properties_raw)) for x in recs] == items
    assert all(fmt.stored_record_crc(x.properties_raw) is not None for x in recs)
    assert [x.queue_offset for x in recs] == list(range(5))
    assert r.msg_ids == [offset_msg_id(STORE_HOST, x.phys_offset) for x in recs]
    assert h.store.put_messages("T", 2, BatchBody(b"\x00\x01", 0, 7, STORE_HOST)).status is P.MESSAGE_ILLEGAL


def test_joined_reads_equal_the_records_concatenated_across_segments(tmp_path):
    """A pull's joined payload is the records back to back, also when a run crosses a segment."""
    h = Harness(tiny_config(tmp_path))
    for i in range(1200):
        h.store.put_messages("T", i % 2, [message(b"m" * (50 + i % 37))])
    # Records of exactly 256 bytes (91 fixed + 1 topic + 20 CRC property + 144 body) fill a 64 KiB
    # segment to the byte: no blank, so the next record is adjacent yet in the next file.
    empty_record = fmt.record_size(0, 1, fmt.RECORD_CRC_SIZE)
    start = h.control.write_pos
    left = h.cfg.commitlog_file_size_bytes - start % h.cfg.commitlog_file_size_bytes
    filler = left % 256
    if filler and filler < empty_record:
        filler += 256   # no record is that small: one 256 bytes longer
    assert filler <= left
    if filler:
        h.store.put_messages("T", 2, [message(b"f" * (filler - empty_record))])
    for _ in range(300):
        h.store.put_messages("T", 2, [message(b"x" * (256 - empty_record))])
    h.dispatch_all()
    assert h.control.write_pos > 2 * h.cfg.commitlog_file_size_bytes
    for queue_id in (0, 1, 2):
        for offset, max_count in ((0, 500), (17, 33), (150, 60), (200, 100)):
            plain = h.store.get_messages("T", queue_id, offset, max_count, 1 << 20)
            joined = h.store.get_messages("T", queue_id, offset, max_count, 1 << 20, joined=True)
            assert joined.payload == b"".join(plain.records)
            assert joined.message_count == len(plain.records)
            assert (joined.status, joined.next_begin_offset) == (plain.status, plain.next_begin_offset)
    h.close()


def _record_kinds(i: int) -> tuple[str, int, list]:
    """(topic, queue, messages) of one put: every kind of record the broker writes, by turns."""
    kind = i % 9
    plain = message(b"b" * (i % 97), keys=f"k{i}", flag=i - 300)._replace(reconsume_times=i % 3)
    if kind == 0:   # a send (each topic's first included), a reply
        return f"T{i % 3}", i % 4, [plain]
    if kind == 1:   # parked in the schedule topic
        return "SCHEDULE_TOPIC_XXXX", 2, [message(b"later-%d" % i, **{PROPERTY_DELAY: "3", PROPERTY_REAL_TOPIC: "T0",
                                                                     PROPERTY_REAL_QID: "1"})]
    if kind == 2:   # sent back: a retry with its reconsume times
        return "%RETRY%G", 0, [plain._replace(reconsume_times=3)]
    if kind == 3:   # a transaction's half, its commit (a prepared offset) and its op record
        return "RMQ_SYS_TRANS_HALF_TOPIC", 0, [
            message(b"half-%d" % i), message(b"commit-%d" % i, sys_flag=SYSFLAG_TRANSACTION_COMMIT)._replace(
                prepared_transaction_offset=1 << 40 | i), message(b"op-%d" % i, tags="d")]
    if kind == 4:   # records that take no queue offset, among ones that do
        return "T1", 1, [message(b"prepared", sys_flag=SYSFLAG_TRANSACTION_PREPARED), plain,
                         message(b"rolled back", sys_flag=SYSFLAG_TRANSACTION_ROLLBACK), plain]
    if kind == 5:   # a client's own __CRC32# pair, dropped
        return "T0", 0, [message(b"own-crc-%d" % i, **{PROPERTY_CRC32: "0000000001"})]
    if kind == 6:   # a pop's checkpoint and ack records
        return "rmq_sys_REVIVE_LOG_C", 0, [MessageToStore(b'{"ck": %d}' % i, 0, encode_properties({PROPERTY_TAGS: tag}),
                                                          0, 1_700_000_000_000, STORE_HOST) for tag in ("ck", "ack")]
    if kind == 7:   # a revive's copies (many at once), properties without a closing separator
        return "%RETRY%G", 0, [plain._replace(properties=b"A\x01x\x02B\x01y")] * 3
    return "T2", 3, [message(b"")]   # an empty body


@pytest.mark.parametrize("record_crc", [True, False])
def test_every_record_the_store_writes_is_the_python_oracles_bytes(tmp_path, monkeypatch, record_crc):
    """The one put encodes in C (record_writer.py); record_format.encode_batch is the oracle. Every
    kind of record, one at a time and many at once, across segment rolls: the CommitLog holds the
    oracle's bytes, and a refused put (too large, properties over 32767 bytes, a NUL) writes nothing."""
    from rocketbox.cluster.shm import record_writer
    store_ts = 1_750_000_000_000
    monkeypatch.setattr(record_writer, "_now_ms", lambda: store_ts)
    h = Harness(tiny_config(tmp_path, record_crc_enabled=record_crc))
    try:
        for i in range(600):   # ~100 KiB: more than one 64 KiB segment
            topic, queue_id, messages = _record_kinds(i)
            before = h.store.queue_next_offset(topic, queue_id)
            result = h.store.put_messages(topic, queue_id, messages)
            assert result.status is P.PUT_OK, (i, result)
            stored = [fmt.stored_properties(m.properties, record_crc) for m in messages]
            sizes = fmt.batch_record_sizes(len(topic.encode()), messages, stored)
            oracle, next_offset = fmt.encode_batch(
                messages, sizes, topic=topic.encode(), queue_id=queue_id, queue_offset_first=before,
                phys_offset_first=result.phys_offset, store_timestamp_ms=store_ts, store_host=STORE_HOST,
                record_crc=record_crc, properties=stored)
            assert h.store.commitlog.read(result.phys_offset, len(oracle)) == oracle, f"put {i} ({topic}) differs"
            assert result.end_phys_offset == result.phys_offset + len(oracle)
            assert h.store.queue_next_offset(topic, queue_id) == next_offset
        end = h.control.write_pos
        assert end > 64 * 1024
        for refused in (message(b"x" * (40 * 1024)), message(b"y", keys="k" * 40_000), message(b"z", keys="a\x00b")):
            assert h.store.put_messages("T0", 0, [message(b"fine"), refused]).status is P.MESSAGE_ILLEGAL
        assert h.control.write_pos == end
    finally:
        h.close()

"""The sends of one remoting read are stored together (broker/send.py ``_store_deferred``): each is
checked and routed by the one send handler as before, its put waits for the end of the read
(``request_dispatch.ReadPass``), then one put a queue and, under sync flush, one durability wait for
them all. A refused send keeps its own code; the sends of a queue keep their order, also around a
batch that is stored at once. A real broker service in process, its own handler table behind a real
remoting door, frames over a real socket."""

from __future__ import annotations

import select
import socket

import pytest

from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.config import SYNC_FLUSH, BrokerConfig
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_format import encode_frame
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.message.batch_format import encode_items
from rocketbox.cluster.wire_format import Command
from tests.store_harness import tiny_config
from tests.unit.test_remoting_answer_writes import _answers, _send_in_one_read
from tests.unit.test_remoting_arrival_stamps import DEADLINE_S, _serve_until

TOPIC = "PassT"


def _send(opaque: int, queue_id: int, body: bytes, topic: str = TOPIC) -> bytes:
    return encode_frame(Command(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG", "b": topic, "c": "TBW102", "d": "2", "e": str(queue_id), "f": "0", "g": "1", "h": "0",
        "i": properties_text([("UNIQ_KEY", f"u{opaque}")]), "j": "0"}, body, opaque=opaque))


def _batch(opaque: int, queue_id: int, bodies: list[bytes]) -> bytes:
    body = encode_items((0, item, properties_text([("UNIQ_KEY", item.hex())]).encode()) for item in bodies)
    return encode_frame(Command(RequestCode.SEND_BATCH_MESSAGE, {
        "a": "PG", "b": TOPIC, "c": "TBW102", "d": "2", "e": str(queue_id), "f": "0", "g": "1", "h": "0",
        "i": "", "j": "0", "m": "true"}, body, opaque=opaque))


@pytest.fixture
def broker(tmp_path, request):
    store = tiny_config(tmp_path / "store", **getattr(request, "param", {}))
    service = BrokerService(boot(BrokerConfig(store=store)))
    service.topics.create_on_send(TOPIC, 2)
    puts = []
    real_put = service.store.put_messages

    def counted_put(topic, queue_id, records):   # the real put, each call noted
        puts.append((topic, queue_id))
        return real_put(topic, queue_id, records)
    service.store.put_messages = counted_put
    server = RemotingServer("127.0.0.1", 0, service.handlers, name="send-pass")
    host, port = server.address.split(":")
    client = socket.create_connection((host, int(port)), timeout=DEADLINE_S)
    _serve_until(server, lambda: server._connections)
    yield service, server, client, puts
    client.close()
    server.close()
    service.shutdown()


def _recent(service, queue_id: int) -> list[bytes]:
    """Bodies of the queue's records in order, from the CommitLog (no reput runs in process)."""
    bodies, phys = [], service.store.commitlog_floor()
    for _ in range(1000):
        rec = service.store.read_record(phys)
        if rec is None:
            return bodies
        if rec.topic == TOPIC and rec.queue_id == queue_id:
            bodies.append(rec.body)
        phys = rec.phys_offset + rec.total_size
    return bodies


def test_the_sends_of_one_read_take_one_put_a_queue_and_each_keeps_its_own_answer(broker):
    service, server, client, puts = broker
    too_big = b"x" * (service.cfg.store.message_size_bytes_max + 1)
    frames = [_send(1, 0, b"a0"), _send(2, 1, b"b0"), _send(3, 0, b"a1"),
              _send(4, 0, too_big),                       # refused: over the size limit
              _send(5, 1, b"b1"), _send(6, 5, b"q5"),      # refused: no queue 5
              _send(7, 0, b"bad", topic="bad topic!"),     # refused: not a topic name
              _send(8, 0, b"a2"), _send(9, 1, b"b2")]
    _send_in_one_read(server, client, frames)
    answers = {a.opaque: a for a in _answers(server, client, len(frames))}
    assert sorted(answers) == list(range(1, 10))
    assert {n: answers[n].code for n in (4, 6, 7)} == {4: ResponseCode.MESSAGE_ILLEGAL, 6: ResponseCode.MESSAGE_ILLEGAL,
                                                      7: ResponseCode.MESSAGE_ILLEGAL}
    stored = {n: (answers[n].fields["queueId"], answers[n].fields["queueOffset"]) for n in (1, 2, 3, 5, 8, 9)}
    assert stored == {1: ("0", "0"), 3: ("0", "1"), 8: ("0", "2"), 2: ("1", "0"), 5: ("1", "1"), 9: ("1", "2")}
    assert all(answers[n].code == ResponseCode.SUCCESS for n in stored)
    assert len({answers[n].fields["msgId"] for n in stored}) == 6
    assert sorted(puts) == [(TOPIC, 0), (TOPIC, 1)]   # one put a queue, not one a send
    assert _recent(service, 0) == [b"a0", b"a1", b"a2"] and _recent(service, 1) == [b"b0", b"b1", b"b2"]
    assert service.sender.messages_stored == 6


def test_a_queue_whose_put_is_refused_stores_its_sends_one_by_one_each_with_its_own_answer(broker):
    """Properties past the record's 2-byte length pass the send's checks but not the store's: the
    queue's one put is refused whole, then each of its sends is put alone, in order."""
    service, server, client, puts = broker
    unstorable = encode_frame(Command(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG", "b": TOPIC, "c": "TBW102", "d": "2", "e": "0", "f": "0", "g": "1", "h": "0",
        "i": properties_text([("UNIQ_KEY", "u2"), ("KEYS", "k" * 40_000)]), "j": "0"}, b"a-bad", opaque=2))
    frames = [_send(1, 0, b"a0"), unstorable, _send(3, 1, b"b0"), _send(4, 0, b"a1")]
    _send_in_one_read(server, client, frames)
    answers = {a.opaque: a for a in _answers(server, client, len(frames))}
    assert answers[2].code == ResponseCode.MESSAGE_ILLEGAL and "MESSAGE_ILLEGAL" in answers[2].remark
    assert [(answers[n].code, answers[n].fields["queueId"], answers[n].fields["queueOffset"]) for n in (1, 4, 3)] == \
        [(ResponseCode.SUCCESS, "0", "0"), (ResponseCode.SUCCESS, "0", "1"), (ResponseCode.SUCCESS, "1", "0")]
    assert sorted(puts) == [(TOPIC, 0)] * 4 + [(TOPIC, 1)]   # queue 0: together, then one by one
    assert _recent(service, 0) == [b"a0", b"a1"] and service.sender.messages_stored == 3


def test_a_batch_in_the_middle_of_a_read_is_stored_after_the_sends_before_it(broker):
    service, server, client, puts = broker
    frames = [_send(1, 0, b"s0"), _batch(2, 0, [b"m0", b"m1"]), _send(3, 0, b"s1")]
    _send_in_one_read(server, client, frames)
    answers = {a.opaque: a for a in _answers(server, client, len(frames))}
    assert [answers[n].code for n in (1, 2, 3)] == [ResponseCode.SUCCESS] * 3
    assert [answers[n].fields["queueOffset"] for n in (1, 2, 3)] == ["0", "1", "3"]
    assert _recent(service, 0) == [b"s0", b"m0", b"m1", b"s1"]
    assert len(puts) == 3


@pytest.mark.parametrize("broker", [{"flush_mode": SYNC_FLUSH}], indirect=True)
def test_under_sync_flush_the_sends_of_one_read_wait_once_and_are_answered_when_flushed(broker):
    service, server, client, puts = broker
    waits_before = len(service.flush_waiters)   # the broker's own (its state written at start)
    frames = [_send(n, n % 2, b"f%d" % n) for n in range(1, 7)]
    _send_in_one_read(server, client, frames)
    _serve_until(server, lambda: service.sender.messages_stored == 6)
    assert len(service.flush_waiters) == waits_before + 1    # one wait for the six
    assert len(puts) == 2
    assert _answers_now(server, client) == []   # none before the flush
    end = service.store.commitlog.write_pos
    service.store.commitlog.flush(service.store.commitlog.segment_start(end), end)
    service.flush_waiters.release(end)
    answers = _answers(server, client, len(frames))
    assert sorted(a.opaque for a in answers) == list(range(1, 7))
    assert all(a.code == ResponseCode.SUCCESS for a in answers)


def _answers_now(server, client) -> list:
    """What the client can read at once after the door's next pass."""
    server.on_events()
    return select.select([client], [], [], 0)[0]

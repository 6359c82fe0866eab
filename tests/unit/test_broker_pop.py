"""Pop consumption in one broker service, driven in process on a ManualClock: real request frames
through the handler table, a real store dispatched by an in-process reput service, and the
broker rebooted over the same store to show that pop state is rebuilt from its revive log."""

from __future__ import annotations

import contextlib

import pytest

from rocketbox.cluster import receipt_handle
from rocketbox.cluster.broker.subscription_groups import SubscriptionGroupConfig
from rocketbox.cluster.protocol import RequestCode, ResponseCode, dlq_topic, pop_retry_topic
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import PROPERTY_RETRY_TOPIC, PROPERTY_UNIQ_KEY
from rocketbox.cluster.wire_format import Command
from tests.in_process import InProcessBroker, send_request

pytestmark = pytest.mark.timeout(60)

TOPIC = "PopTopic"
GROUP = "PopGroup"
INVISIBLE_MS = 10_000


class Broker(InProcessBroker):
    """The in-process broker with pop's own requests on TOPIC for GROUP."""

    def __init__(self, tmp_path, **settings):
        super().__init__(tmp_path / "store", **settings)

    def call(self, code, fields, body=b"") -> Command:
        reply = self.request(Command(code, fields, body))
        assert reply is not None, "a handler answers exactly once"
        return reply

    def send(self, body: bytes, queue_id: int = 0, **properties: str) -> None:
        answer = super().send(TOPIC, body, queue_id=queue_id, **properties)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        self.dispatch()

    def pop(self, max_count=32, order=False, exp="*", exp_type="TAG", **extra) -> list[tuple[bytes, str, int, fmt.Record]]:
        """(body, handle, attempt, record) of each popped message; [] for PULL_NOT_FOUND."""
        fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": str(max_count),
                  "invisibleTime": str(INVISIBLE_MS), "pollTime": "0", "order": str(order).lower(),
                  "exp": exp, "expType": exp_type, **extra}
        answer = self.call(RequestCode.POP_MESSAGE, fields)
        if answer.code == ResponseCode.PULL_NOT_FOUND:
            return []
        assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
        records = list(fmt.iter_records(answer.body))
        handles = answer.fields["handles"].split(",")
        attempts = [int(a) for a in answer.fields["attempts"].split(",")]
        assert len(records) == len(handles) == len(attempts)
        return [(r.body, h, a, r) for r, h, a in zip(records, handles, attempts)]

    def ack(self, handle: str) -> int:
        return self.call(RequestCode.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "extraInfo": handle}).code

    def expire(self, ms: int = INVISIBLE_MS):
        self.clock.advance(ms / 1000)
        self.service.reviver.tick()
        self.dispatch()


@pytest.fixture
def broker(tmp_path, request):
    b = Broker(tmp_path, **getattr(request, "param", {}))
    yield b
    with contextlib.suppress(Exception):
        b.close()


def _bodies(popped):
    return sorted(p[0] for p in popped)


def test_pop_serves_every_queue_and_an_ack_settles_each_message(broker):
    for i in range(8):
        broker.send(b"m%d" % i, queue_id=i % 4)
    first = broker.pop(max_count=5)
    rest = broker.pop(max_count=32)
    assert len(first) == 5 and len(rest) == 3
    assert _bodies(first + rest) == [b"m%d" % i for i in range(8)]
    assert {a for _, _, a, _ in first + rest} == {1}
    assert broker.pop() == []                        # invisible, and nothing new
    handle = receipt_handle.decode(first[0][1])
    assert handle.broker_name == broker.cfg.broker_name and handle.invisible_ms == INVISIBLE_MS
    for _, h, _, _ in first + rest:
        assert broker.ack(h) == ResponseCode.SUCCESS
    assert broker.ack(first[0][1]) == ResponseCode.NO_MESSAGE   # acked already
    broker.expire()
    assert broker.pop() == []                        # acked messages never come back


def test_an_unacked_message_comes_back_with_the_next_attempt_then_goes_to_the_dlq(broker):
    broker.service.groups.upsert(SubscriptionGroupConfig(GROUP, retryMaxTimes=1))
    broker.send(b"kept", queue_id=1)
    broker.send(b"done", queue_id=2)
    popped = {body: (h, a) for body, h, a, _ in broker.pop()}
    assert broker.ack(popped[b"done"][0]) == ResponseCode.SUCCESS
    broker.clock.advance(INVISIBLE_MS / 1000 - 1)
    broker.service.reviver.tick()
    assert broker.pop() == []                        # still invisible
    broker.expire(1000)
    again = broker.pop()
    assert [(b, a) for b, _, a, _ in again] == [(b"kept", 2)]
    record = again[0][3]
    assert record.topic == pop_retry_topic(GROUP, TOPIC)
    assert record.properties[PROPERTY_RETRY_TOPIC] == TOPIC
    assert record.properties[PROPERTY_UNIQ_KEY] == b"kept".hex()   # the same message id
    assert broker.ack(popped[b"kept"][0]) == ResponseCode.NO_MESSAGE    # the first delivery's handle is dead
    broker.expire()
    assert broker.pop() == []                        # 2 attempts = retryMaxTimes + 1: dead-lettered
    dlq = broker.service.store.queue_entries(dlq_topic(GROUP), 0, 0, 10)
    assert len(dlq) == 1
    dead = broker.service.store.read_record(dlq[0][1])
    assert dead.body == b"kept" and dead.reconsume_times == 2
    assert broker.service.reviver.dead_lettered == 1


def test_changing_the_invisible_time_moves_the_redelivery_and_replaces_the_handle(broker):
    broker.send(b"slow")
    [(_, handle, _, _)] = broker.pop()
    answer = broker.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": GROUP, "topic": TOPIC, "extraInfo": handle, "invisibleTime": str(3 * INVISIBLE_MS)})
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    new_handle = answer.fields["receiptHandle"]
    assert receipt_handle.decode(new_handle).invisible_ms == 3 * INVISIBLE_MS
    broker.expire()
    assert broker.pop() == []                        # the old deadline passed: nothing comes back
    assert broker.ack(handle) == ResponseCode.NO_MESSAGE
    assert broker.ack(new_handle) == ResponseCode.SUCCESS
    broker.expire(3 * INVISIBLE_MS)
    assert broker.pop() == []


def test_fifo_delivers_a_message_group_one_message_at_a_time_and_redelivers_in_place(broker):
    for body, group in ((b"a1", "A"), (b"a2", "A"), (b"b1", "B")):
        broker.send(body, __SHARDINGKEY=group)
    first = broker.pop(order=True)
    assert [b for b, *_ in first] == [b"a1"]         # a2 waits for a1's ack; b1 for its queue
    assert broker.pop(order=True) == []              # the queue is blocked while a1 is unacked
    assert broker.ack(first[0][1]) == ResponseCode.SUCCESS
    second = broker.pop(order=True)
    assert [(b, a) for b, _, a, _ in second] == [(b"a2", 1), (b"b1", 1)]
    assert broker.ack(second[1][1]) == ResponseCode.SUCCESS    # b1 acked, a2 not
    broker.expire()
    broker.reboot()                                  # what the queue owes is in the revive log
    third = broker.pop(order=True)
    assert [(b, a) for b, _, a, _ in third] == [(b"a2", 2)]    # in place, b1 not again
    assert third[0][3].topic == TOPIC
    assert broker.ack(third[0][1]) == ResponseCode.SUCCESS
    broker.send(b"a3", __SHARDINGKEY="A")
    assert [b for b, *_ in broker.pop(order=True)] == [b"a3"]


def test_a_fifo_message_past_its_attempts_goes_to_the_dlq_and_its_group_moves_on(broker):
    broker.service.groups.upsert(SubscriptionGroupConfig(GROUP, retryMaxTimes=0))
    broker.send(b"poison", __SHARDINGKEY="A")
    broker.send(b"next", __SHARDINGKEY="A")
    assert [b for b, *_ in broker.pop(order=True)] == [b"poison"]
    broker.expire()
    assert [(b, a) for b, _, a, _ in broker.pop(order=True)] == [(b"next", 1)]
    dlq = broker.service.store.queue_entries(dlq_topic(GROUP), 0, 0, 10)
    assert [broker.service.store.read_record(e[1]).body for e in dlq] == [b"poison"]


@pytest.mark.parametrize("broker", [{"enable_property_filter": True}], indirect=True)
def test_filters_select_by_tag_and_by_sql92(broker):
    broker.send(b"red", TAGS="Red", color="red")
    broker.send(b"blue", TAGS="Blue", color="blue")
    assert _bodies(broker.pop(exp="Blue || Green")) == [b"blue"]
    broker.send(b"red2", TAGS="Red", color="red")
    assert _bodies(broker.pop(exp="color = 'red'", exp_type="SQL92")) == [b"red2"]   # the group moved past red


def test_pop_state_is_rebuilt_from_the_revive_log_after_a_reboot(broker):
    for i in range(3):
        broker.send(b"r%d" % i)
    popped = {body: h for body, h, _, _ in broker.pop()}
    assert broker.ack(popped[b"r0"]) == ResponseCode.SUCCESS
    broker.reboot()
    assert broker.pop() == []                        # popped before: still invisible, offsets kept
    assert broker.ack(popped[b"r0"]) == ResponseCode.NO_MESSAGE    # its ack survived
    assert broker.ack(popped[b"r1"]) == ResponseCode.SUCCESS       # r1's checkpoint survived
    broker.reboot()
    broker.expire()
    assert [(b, a) for b, _, a, _ in broker.pop()] == [(b"r2", 2)]


def test_bad_pops_and_acks_get_clear_answers(broker):
    broker.send(b"x")
    unknown = broker.call(RequestCode.POP_MESSAGE, {"consumerGroup": GROUP, "topic": "Nope", "queueId": "-1",
                                                    "invisibleTime": "1000"})
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
    bad_group = broker.call(RequestCode.POP_MESSAGE, {"consumerGroup": "bad group!", "topic": TOPIC,
                                                      "invisibleTime": "1000"})
    assert bad_group.code == ResponseCode.SYSTEM_ERROR and "group" in bad_group.remark
    no_time = broker.call(RequestCode.POP_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "invisibleTime": "0"})
    assert no_time.code == ResponseCode.SYSTEM_ERROR
    forged = broker.call(RequestCode.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "extraInfo": "v1 nope"})
    assert forged.code == ResponseCode.SYSTEM_ERROR
    unknown_ck = receipt_handle.ReceiptHandle(999, 1, 1, False, 0, 0, 0, "b").encode()
    assert broker.ack(unknown_ck) == ResponseCode.NO_MESSAGE
    assert [b for b, *_ in broker.pop()] == [b"x"]   # and it serves on


def test_ack_messages_acks_each_handle_as_ack_message_would_and_answers_each(broker):
    from rocketbox.cluster import ack_batch_format
    for i in range(4):
        broker.send(b"b%d" % i, queue_id=i % 2)
    handles = [h for _, h, _, _ in broker.pop()]
    assert broker.ack(handles[0]) == ResponseCode.SUCCESS   # acked already: NO_MESSAGE in the batch
    asked = [handles[0], handles[1], "v1 nope", handles[2], handles[3]]
    answer = broker.call(RequestCode.ACK_MESSAGES, {"consumerGroup": GROUP, "topic": TOPIC},
                         ack_batch_format.encode_handles(asked))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    codes = [code for code, _ in ack_batch_format.decode_outcomes(answer.body, len(asked))]
    assert codes == [ResponseCode.NO_MESSAGE, ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR,
                     ResponseCode.SUCCESS, ResponseCode.SUCCESS]
    broker.expire()
    assert broker.pop() == []                        # every batch-acked message stays acked
    malformed = broker.call(RequestCode.ACK_MESSAGES, {"consumerGroup": GROUP, "topic": TOPIC}, b"no newline")
    assert malformed.code == ResponseCode.SYSTEM_ERROR and "ACK_MESSAGES" in malformed.remark


def _ack_records(broker) -> int:
    """The ack records in the revive queue (what a reboot replays)."""
    from rocketbox.cluster.broker.pop_format import TAG_ACK, revive_topic
    topic = revive_topic(broker.cfg.cluster_name)
    broker.dispatch()
    store = broker.service.store
    entries = store.queue_entries(topic, 0, 0, 10_000)
    return sum(1 for _, phys, *_ in entries if store.read_record(phys).properties.get("TAGS") == TAG_ACK)


@pytest.mark.parametrize("records_a_put", [1024, 2])
def test_ack_messages_writes_one_ack_record_a_message_it_acks_however_the_batch_is_cut(broker, monkeypatch,
                                                                                      records_a_put):
    from rocketbox.cluster import ack_batch_format
    from rocketbox.cluster.broker import pop
    monkeypatch.setattr(pop, "ACK_RECORDS_A_PUT", records_a_put)
    for i in range(5):
        broker.send(b"d%d" % i, queue_id=i % 2)
    handles = [h for _, h, _, _ in broker.pop()]
    asked = [handles[0], handles[1], handles[0], handles[2], handles[3], handles[4], handles[4]]
    answer = broker.call(RequestCode.ACK_MESSAGES, {"consumerGroup": GROUP, "topic": TOPIC},
                         ack_batch_format.encode_handles(asked))
    codes = [code for code, _ in ack_batch_format.decode_outcomes(answer.body, len(asked))]
    # A handle named twice is acked once: its second place answers as an ack of an acked message would.
    assert codes == [ResponseCode.SUCCESS, ResponseCode.SUCCESS, ResponseCode.NO_MESSAGE, ResponseCode.SUCCESS,
                     ResponseCode.SUCCESS, ResponseCode.SUCCESS, ResponseCode.NO_MESSAGE]
    assert _ack_records(broker) == 5
    broker.reboot()
    assert all(broker.ack(h) == ResponseCode.NO_MESSAGE for h in handles)   # every ack replayed
    broker.expire()
    assert broker.pop() == []


def test_a_parked_pop_wakes_when_the_first_redelivery_makes_the_retry_topic(broker):
    broker.send(b"again")
    [(_, _handle, _, _)] = broker.pop()
    replies: list[Command] = []
    parked = broker.service.handlers[RequestCode.POP_MESSAGE](Command(RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "invisibleTime": str(INVISIBLE_MS),
        "pollTime": "20000"}), replies.append)
    assert parked is None and not replies              # nothing visible: it waits
    broker.expire()                                    # the revive copies it to the pop retry topic
    assert broker.service.topics.get(pop_retry_topic(GROUP, TOPIC)) is not None
    broker.service.pull_waiters.wake({(pop_retry_topic(GROUP, TOPIC), 0)})   # as the dispatch notice does
    assert len(replies) == 1 and replies[0].code == ResponseCode.SUCCESS
    assert [r.body for r in fmt.iter_records(replies[0].body)] == [b"again"]


def test_under_sync_flush_a_pops_offset_is_committed_only_once_its_checkpoint_is_on_disk(tmp_path):
    """A pop's offset durable before its checkpoint would lose the popped messages to a power cut
    that kept the one and not the other: past the group's offset, never revived. The offset is
    held until the flush, and pops meanwhile read the held one."""
    broker = Broker(tmp_path, store_settings={"flush_mode": "SYNC_FLUSH"})
    try:
        parked = [broker.request(send_request(TOPIC, b"m%d" % i, queue_id=0)) for i in range(3)]
        assert parked == [None] * 3   # answered once flushed
        broker.dispatch()
        offsets, pop_log = broker.service.offsets, broker.service.pop_log
        replies = []
        broker.handlers[RequestCode.POP_MESSAGE](Command(RequestCode.POP_MESSAGE, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "maxMsgNums": "2",
            "invisibleTime": str(INVISIBLE_MS), "pollTime": "0", "order": "false", "exp": "*", "expType": "TAG"}),
            replies.append)
        assert replies == []   # the pop's answer, too, waits for its checkpoint
        assert offsets.query(GROUP, TOPIC, 0) in (None, 0)
        assert pop_log.commits.query(GROUP, TOPIC, 0) == 2   # a second pop goes on from the held offset
        broker.flush.step()
        broker.service.on_tick()   # releases what the flush made durable
        assert [r.code for r in replies] == [ResponseCode.SUCCESS]
        assert offsets.query(GROUP, TOPIC, 0) == 2 and len(pop_log.commits) == 0
    finally:
        broker.close()

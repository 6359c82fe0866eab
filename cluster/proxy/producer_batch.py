"""A read's SendMessage calls as one batch (the native door with ``grpc_batch_calls``; issue 33 item 2).

The 5.x clients send one message a SendMessage call, so one message a pass through the proxy (its
conversion, its broker request, its hand-off back) cost ~200 us of the proxy's CPU (perf/RESULTS.md,
"The gRPC door: the floor of a C front end and the proxy's own cost"). The native door hands over all
the calls one read of a connection completed (``native_door.Connection.readable``); here they are
taken together:

- each call's message converted and checked on its own (``messages.outgoing``): a refused one is
  answered with its own status and the others go on;
- a topic's route, its writable queues and its message-type check looked up once a batch;
- the messages a batch may carry (NORMAL and FIFO, none redelivered) grouped by the queue they go
  to: a FIFO message to its group's queue (as ``ProducerService.send_message``), the others of the
  topic to one round-robin pick for the read. Each group in arrival order, so one message group's
  messages keep their order (and a group's sends of different reads are written in the order they
  were taken: group_order.py);
- one SEND_BATCH_MESSAGE a queue (split where its body would pass the brokers' message size), whose
  answer gives each message its own entry: its message id, its queue offset (the first's + its
  place in the batch); a group of one goes as today's SEND_MESSAGE_V2. A batch the broker refuses
  is sent again one message at a time, so each message gets its own answer;
- any other call (several messages, DELAY, TRANSACTION, PRIORITY, LITE) through
  ``ProducerService.send_message``, unchanged.

Stored as a batch, a record differs from a single send's only in what no gRPC reader sees: the
broker adds no CLUSTER property to a batch's items (RocketMQ's request-reply reads it; the 5.x
clients do not use it), and the record's born timestamp is the batch's (the message's own is
kept in BORN_TIMESTAMP, which ``messages.incoming`` reads first). The broker's metrics count a
batch's messages under the message type "normal", FIFO ones included (broker/send.py).
"""

from __future__ import annotations

import asyncio
import time

from rocketbox.cluster import topic_attributes
from rocketbox.cluster.message import batch_format
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY
from rocketbox.cluster.protocol import SEND_V2_LONG_NAMES, RequestCode, ResponseCode, send_fields_short
from rocketbox.cluster.proxy import messages, validation
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.group_order import release_turns
from rocketbox.cluster.proxy.protos import Code, service
from rocketbox.cluster.proxy.status import ProxyError, status
from rocketbox.cluster.wire_format import Command

BATCHED_TYPES = frozenset({topic_attributes.NORMAL, topic_attributes.FIFO})
# SEND_BATCH_MESSAGE's header but the queue and the born time (the proxy is the producer group's
# sender, as for SEND_MESSAGE_V2: producer group = the topic).
_BATCH_FIELDS = send_fields_short({"defaultTopic": AUTO_CREATE_TOPIC_KEY, "defaultTopicQueueNums": "4", "sysFlag": "0",
                                   "flag": "0", "properties": "", "reconsumeTimes": "0", "unitMode": "false",
                                   "batch": "true"})
_GROUP, _TOPIC, _QUEUE, _BORN = (SEND_V2_LONG_NAMES[name] for name in ("producerGroup", "topic", "queueId",
                                                                       "bornTimestamp"))

Result = service.SendMessageResponse | ProxyError


class _Pending:
    """One call's message on its way into a batch."""

    __slots__ = ("index", "out", "topic", "turns")

    def __init__(self, index: int, out: messages.Outgoing, topic: str, turn):
        self.index, self.out, self.topic = index, out, topic
        self.turns = (turn,) if turn is not None else ()


class SendBatches:
    """``await batches.send(calls)``: a SendMessageResponse or a ProxyError for each (Call, request)."""

    def __init__(self, producer):
        self.producer = producer   # ProducerService: its settings, gateway, queue choice and single send
        self.requests = 0          # SEND_BATCH_MESSAGE requests sent, and the messages they carried
        self.messages = 0

    async def send(self, calls: list[tuple[Call, service.SendMessageRequest]]) -> list[Result]:
        # Each grouped send's turn (group_order.py) taken now, before any await, in the calls' order.
        turns = [self.producer.turn_of(request) for _call, request in calls]
        try:
            return await self._send(calls, turns)
        finally:
            for turn in turns:
                _release(turn)

    async def _send(self, calls: list[tuple[Call, service.SendMessageRequest]], turns: list) -> list[Result]:
        results: list[Result | None] = [None] * len(calls)
        by_topic: dict[str, list[_Pending]] = {}
        singles = []
        settings, now_ms = self.producer.settings, int(time.time() * 1000)
        topics: dict[str, str] = {}   # a read's calls name the same topic: checked once
        for index, (call, request) in enumerate(calls):
            if len(request.messages) != 1:
                singles.append(index)
                continue
            message = request.messages[0]
            try:
                topic = topics.get(message.topic.name)
                if topic is None:
                    topic = topics[message.topic.name] = validation.topic(message.topic.name)
                out = messages.outgoing(message, settings, now_ms, call.peer_host)
            except ProxyError as exc:   # refused here: its group's next sends need not wait for it
                results[index] = exc
                _release(turns[index])
                continue
            if out.type_name in BATCHED_TYPES and not out.reconsume_times:
                by_topic.setdefault(topic, []).append(_Pending(index, out, topic, turns[index]))
            else:
                singles.append(index)
        work = [self._single(calls[index], turns[index], index, results) for index in singles]
        work += [self._topic(topic, pending, results) for topic, pending in by_topic.items()]
        await asyncio.gather(*work)
        return results

    async def _single(self, call_request, turn, index: int, results: list) -> None:
        try:
            results[index] = await self.producer.send_message(*call_request, turn=turn)
        except ProxyError as exc:
            results[index] = exc

    async def _topic(self, topic: str, pending: list[_Pending], results: list) -> None:
        """The topic's messages: checked once for the topic, one request a queue."""
        producer = self.producer
        try:
            route = await producer.gateway.existing_route(topic)
            queues = producer.writable_queues(topic, route)
        except ProxyError as exc:
            for one in pending:
                results[one.index] = exc
                release_turns(one.turns)
            return
        refused_types: dict[str, ProxyError | None] = {}
        for type_name in {one.out.type_name for one in pending}:
            try:
                await producer.require_type(topic, route, type_name)
                refused_types[type_name] = None
            except ProxyError as exc:
                refused_types[type_name] = exc
        by_queue: dict[int, list[_Pending]] = {}
        unordered = None
        for one in pending:
            refusal = refused_types[one.out.type_name]
            if refusal is not None:
                results[one.index] = refusal
                release_turns(one.turns)
                continue
            group = one.out.message_group
            if group:
                queue = producer.fifo_queue(group, len(queues))
            else:
                if unordered is None:   # one round-robin pick for the read's messages of no group
                    unordered = producer.next_queue(len(queues))
                queue = unordered
            by_queue.setdefault(queue, []).append(one)
        await asyncio.gather(*(self._queue(topic, *queues[queue], group, results)
                               for queue, group in by_queue.items()))

    async def _queue(self, topic: str, broker_name: str, queue_id: int, group: list[_Pending], results: list) -> None:
        """One queue's messages in their order: SEND_BATCH_MESSAGE chunks, a lone message as a single send."""
        for chunk in _chunks(group, self.producer.settings.max_body_size):
            if len(chunk) == 1:
                await self._one(topic, broker_name, queue_id, chunk[0], results)
                continue
            try:
                entries = await self._batch(topic, broker_name, queue_id, chunk)
            except ProxyError as exc:
                for one in chunk:
                    results[one.index] = exc
                continue
            if entries is None:   # refused as a whole: each alone, for its own answer
                for one in chunk:
                    await self._one(topic, broker_name, queue_id, one, results)
                continue
            for one, entry in zip(chunk, entries):
                results[one.index] = service.SendMessageResponse(status=entry.status, entries=(entry,))

    async def _one(self, topic: str, broker_name: str, queue_id: int, one: _Pending, results: list) -> None:
        try:
            entry = await self.producer.store(topic, broker_name, queue_id, one.out, one.turns)
        except ProxyError as exc:
            results[one.index] = exc
            return
        results[one.index] = service.SendMessageResponse(status=entry.status, entries=(entry,))

    async def _batch(self, topic: str, broker_name: str, queue_id: int,
                     chunk: list[_Pending]) -> list[service.SendResultEntry] | None:
        """The entries of ``chunk``'s messages stored by one SEND_BATCH_MESSAGE; None when the broker
        refused it."""
        outs = [one.out for one in chunk]
        body = batch_format.encode_items((0, out.body, out.properties_text.encode()) for out in outs)
        fields = {**_BATCH_FIELDS, _GROUP: topic, _TOPIC: topic, _QUEUE: str(queue_id), _BORN: str(outs[0].born_ms)}
        self.requests += 1
        self.messages += len(outs)
        response = await self.producer.gateway.broker_call(
            broker_name, Command(RequestCode.SEND_BATCH_MESSAGE, fields, body),
            turns=[turn for one in chunk for turn in one.turns])
        code = self.producer.entry_code(response.code)
        if code is None:
            return None
        if code != Code.OK:
            failed = status(code, f"send message failed, the broker answered {ResponseCode(response.code).name}")
            return [service.SendResultEntry(status=failed) for _ in outs]
        first = int(response.fields.get("queueOffset", -1))
        ok = status(Code.OK)
        return [service.SendResultEntry(status=ok, message_id=out.message_id, offset=first + k if first >= 0 else -1)
                for k, out in enumerate(outs)]


def _release(turn) -> None:
    if turn is not None:
        turn.release()


def _chunks(group: list[_Pending], bytes_max: int) -> list[list[_Pending]]:
    """``group`` in order, cut where a batch body would pass ``bytes_max`` (a message that cannot share
    a batch goes alone)."""
    chunks, chunk, size = [], [], 0
    for one in group:
        item = batch_format.item_size(len(one.out.body), len(one.out.properties_text) * 4)   # utf-8's bound
        if chunk and size + item > bytes_max:
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(one)
        size += item
    if chunk:
        chunks.append(chunk)
    return chunks

"""SendMessage (RocketMQ's SendMessageActivity and ProducerProcessor): gRPC messages stored through
SEND_MESSAGE_V2 on a broker master the proxy picks.

- The queue: a FIFO message (``message_group``) goes to the writable queue its group hashes to
  (Java's hashCode, as the client library's ``select_by_hash``), so one group stays on one queue;
  any other message round-robin over every writable queue of the topic.
- The type: what the message is (its properties: TRAN_MSG, a delivery time, a message group) must
  be a type the topic takes (``message.type``), else MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
- DELAY: ``delivery_timestamp`` becomes TIMER_DELIVER_MS, the broker's timer (exact time, never
  before it; broker/schedule.py); the entry carries the broker's recall handle, which RecallMessage
  takes back (``recall_message``; the broker's recallMessageEnable, broker/recall.py). TRANSACTION: a half message (TRAN_MSG, PGROUP = the topic,
  sysFlag PREPARED) whose entry carries its transaction id (transactions.py).
- LITE (RocketMQ 5.5): only to a LITE topic; ``lite_topic`` is kept as INNER_MULTI_DISPATCH
  (``message/lite_topics.py``) and picks the queue as a message group does, so one lite topic's
  messages stay in order on one queue; a new lite topic past the proxy's lite topic quota is
  LITE_TOPIC_QUOTA_EXCEEDED (lite_subscriptions.py).
"""

from __future__ import annotations

import itertools
import time

from rocketbox.cluster import topic_attributes
from rocketbox.cluster.protocol import RequestCode, ResponseCode, send_fields_short
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY
from rocketbox.cluster.proxy import messages, validation
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.group_order import GroupOrder, Turn
from rocketbox.cluster.proxy.producer_batch import SendBatches
from rocketbox.cluster.proxy.clients import ClientRegistry
from rocketbox.cluster.proxy.protos import Code, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import ProxyError, broker_refusal, code_of_broker, status
from rocketbox.cluster.proxy.transactions import TransactionRelay, transaction_id
from rocketbox.cluster.message import recall_handle
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.message.properties import PROPERTY_PGROUP, properties_text
from rocketbox.cluster.message.tags import java_string_hash
from rocketbox.cluster.wire_format import Command

# A stored message's answer codes (the others are refusals): what each entry's status says.
_ENTRY_CODES = {ResponseCode.SUCCESS: Code.OK, ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
                ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
                ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE}


def fifo_queue_index(message_group: str, queue_count: int) -> int:
    return abs(java_string_hash(message_group)) % queue_count


class ProducerService:
    def __init__(self, settings: ProxySettings, gateway: BrokerGateway, registry: ClientRegistry,
                 transactions: TransactionRelay, note_lite_send=lambda topic, lite: None):
        self.note_lite_send = note_lite_send
        self.settings = settings
        self.gateway = gateway
        self.registry = registry
        self.transactions = transactions
        self._round_robin = itertools.count()
        self.order = GroupOrder()
        self.batches = SendBatches(self)

    def turn_of(self, request: service.SendMessageRequest) -> Turn | None:
        """The send's place in its message group's line (group_order.py), taken when its call is, before
        any await; None for a send of no group or of several messages."""
        if len(request.messages) != 1:
            return None
        message = request.messages[0]
        system = message.system_properties
        return self.order.turn(message.topic.name, system.message_group or system.lite_topic)

    async def send_message(self, call: Call, request: service.SendMessageRequest,
                           turn: Turn | None = None) -> service.SendMessageResponse:
        if turn is None:
            turn = self.turn_of(request)
        try:
            return await self._send_message(call, request, turn)
        finally:
            if turn is not None:
                turn.release()

    async def _send_message(self, call: Call, request: service.SendMessageRequest,
                            turn: Turn | None) -> service.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        topic = validation.topic(request.messages[0].topic.name)
        if any(m.topic.name != topic for m in request.messages):
            raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
        route = await self.gateway.existing_route(topic)
        now_ms = int(time.time() * 1000)
        outgoing = [messages.outgoing(m, self.settings, now_ms, call.peer_host) for m in request.messages]
        for out in outgoing:
            await self.require_type(topic, route, out.type_name)
        queues = self.writable_queues(topic, route)
        group = (outgoing[0].message_group or outgoing[0].lite_topic) if len(outgoing) == 1 else ""
        index = self.fifo_queue(group, len(queues)) if group else self.next_queue(len(queues))
        for out in outgoing:
            if out.lite_topic:
                self.note_lite_send(topic, out.lite_topic)
        broker_name, queue_id = queues[index]
        turns = (turn,) if turn is not None else ()
        entries = [await self.store(topic, broker_name, queue_id, out, turns) for out in outgoing]
        if any(out.type_name == topic_attributes.TRANSACTION for out in outgoing):
            client = self.registry.get(call.client_id)
            if client is not None:
                client.topics.add(topic)
                self.transactions.topics_changed()
        codes = {entry.status.code for entry in entries}
        overall = status(Code.MULTIPLE_RESULTS) if len(codes) > 1 else status(codes.pop())
        return service.SendMessageResponse(status=overall, entries=entries)

    async def send_batch(self, calls: list[tuple[Call, service.SendMessageRequest]]
                         ) -> list[service.SendMessageResponse | ProxyError]:
        """A read's SendMessage calls together (producer_batch.py): each call's response or refusal."""
        return await self.batches.send(calls)

    def writable_queues(self, topic: str, route) -> list[tuple[str, int]]:
        """(broker name, queue id) of every writable queue of the topic; FORBIDDEN when none is."""
        queues = [(name, queue_id) for name, data in self.gateway.writable(route)
                  for queue_id in range(data["writeQueueNums"])]
        if not queues:
            raise ProxyError(Code.FORBIDDEN, f"topic {topic} has no writable queue")
        return queues

    @staticmethod
    def fifo_queue(group: str, queue_count: int) -> int:
        return fifo_queue_index(group, queue_count)

    def next_queue(self, queue_count: int) -> int:
        return next(self._round_robin) % queue_count

    @staticmethod
    def entry_code(response_code: int) -> int | None:
        """A stored message's entry code for the broker's answer; None: the broker refused it."""
        return _ENTRY_CODES.get(response_code)

    async def require_type(self, topic: str, route, type_name: str) -> None:
        """MESSAGE_PROPERTY_CONFLICT_WITH_TYPE unless the topic takes messages of this type."""
        config = await self.gateway.topic_config(topic, route)
        declared = topic_attributes.declared_message_type((config or {}).get("attributes") or {})
        accepted = topic_attributes.accepted_types(declared)
        if type_name not in accepted:
            raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                             f"TopicMessageType validate failed, the expected type is "
                             f"{declared or ' or '.join(accepted)}, but actual type is {type_name}")

    async def recall_message(self, call: Call, request: service.RecallMessageRequest) -> service.RecallMessageResponse:
        """RecallMessage (RocketMQ 5.3.2's RecallMessageActivity and ProducerProcessor.recallMessage): the
        topic must take DELAY messages; RECALL_MESSAGE goes to the master of the broker the handle names,
        whose refusal is answered with its remark (an unreadable handle: INTERNAL_SERVER_ERROR, as there)."""
        topic = validation.topic(request.topic.name)
        route = await self.gateway.existing_route(topic)
        await self.require_type(topic, route, topic_attributes.DELAY)
        try:
            handle = recall_handle.decode(request.recall_handle)
        except ValueError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        response = await self.gateway.broker_call(handle.broker_name, Command(RequestCode.RECALL_MESSAGE, {
            "topic": topic, "recallHandle": request.recall_handle, "brokerName": handle.broker_name}))
        if response.code != ResponseCode.SUCCESS:
            return service.RecallMessageResponse(status=status(code_of_broker(response.code),
                                                               response.remark or str(response.code)))
        return service.RecallMessageResponse(status=status(Code.OK), message_id=response.fields.get("msgId", ""))

    async def store(self, topic: str, broker_name: str, queue_id: int, out: messages.Outgoing,
                    turns=()) -> service.SendResultEntry:
        fields = {"producerGroup": topic, "topic": topic, "defaultTopic": AUTO_CREATE_TOPIC_KEY,
                  "defaultTopicQueueNums": "4", "queueId": str(queue_id), "sysFlag": str(out.sys_flag),
                  "bornTimestamp": str(out.born_ms), "flag": "0", "properties": out.properties_text,
                  "reconsumeTimes": str(out.reconsume_times), "unitMode": "false", "batch": "false"}
        if out.type_name == topic_attributes.TRANSACTION:
            fields["properties"] = properties_text([*out.properties.items(), (PROPERTY_PGROUP, topic)])
        response = await self.gateway.broker_call(
            broker_name, Command(RequestCode.SEND_MESSAGE_V2, send_fields_short(fields), out.body), turns=turns)
        code = _ENTRY_CODES.get(response.code)
        if code is None:
            raise broker_refusal(response, broker_name)
        if code != Code.OK:
            return service.SendResultEntry(status=status(code, f"send message failed, the broker answered "
                                                        f"{ResponseCode(response.code).name}"))
        queue_offset = int(response.fields.get("queueOffset", -1))
        tx = ""
        if out.type_name == topic_attributes.TRANSACTION:
            _ip, _port, phys = parse_offset_msg_id(response.fields.get("msgId", ""))
            tx = transaction_id(broker_name, phys, queue_offset)
        return service.SendResultEntry(status=status(Code.OK), message_id=out.message_id, transaction_id=tx,
                                       offset=queue_offset, recall_handle=response.fields.get("recallHandle", ""))

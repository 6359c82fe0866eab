"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue (RocketMQ's
ReceiveMessageActivity, AckMessageActivity, ChangeInvisibleDurationActivity, ForwardMessageToDLQActivity)
over the brokers' pop requests (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME).

A receive pops from every readable queue of the broker its message queue names (queueId -1, as
Apache's proxy does: the 5.x SimpleConsumer picks a queue at random), with long polling, so an
empty queue never holds a receive while another has messages. Its stream is: the status, one
response per message, then the delivery timestamp; or a status and the delivery timestamp.
State lives in the broker: a receipt handle says which broker holds the pop and when it expires;
the proxy refuses a forged or expired one (INVALID_RECEIPT_HANDLE) without asking, and the broker
refuses one whose pop is over. Messages popped for a receive whose client went away before they
were written are made visible again at once (Apache's NACK, 1 s). A Lite consumer's receive takes
what lite_service.py holds for it first, and keeps only its own lite topics of what it pops.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketbox.cluster import receipt_handle
from rocketbox.cluster.filter.expressions import parse_tags
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX, RequestCode, ResponseCode
from rocketbox.cluster.proxy import messages, received_wire, validation
from rocketbox.cluster.proxy.ack_batches import AckBatches
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.clients import ClientRegistry, unserved_client_type
from rocketbox.cluster.proxy.lite_service import LiteService
from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.renewals import ReceiptRenewals
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import OK, ProxyError, broker_refusal, status
from rocketbox.cluster.message.properties import PROPERTY_RETRY_TOPIC, PROPERTY_TAGS
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

NACK_INVISIBLE_MS = 1_000
# Time kept back from a receive's deadline to write its answer.
DEADLINE_MARGIN_MS = 500
_RECEIVE_OK = service.ReceiveMessageResponse(status=OK).SerializeToString()


def now_ms() -> int:
    return int(time.time() * 1000)


def _millis(duration) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


class Popped:
    """One message of a pop answer: its record, handle and delivery attempt."""

    __slots__ = ("record", "handle", "attempt", "topic")

    def __init__(self, record, handle: str, attempt: int, topic: str):
        self.record, self.handle, self.attempt, self.topic = record, handle, attempt, topic


class ConsumerService:
    def __init__(self, settings: ProxySettings, gateway: BrokerGateway, registry: ClientRegistry,
                 lite: LiteService | None = None):
        self.lite = lite
        self.settings = settings
        self.gateway = gateway
        self.registry = registry
        self.batches = AckBatches(self)
        self.renewals = ReceiptRenewals(self._change, lambda client_id: registry.get(client_id) is not None,
                                        invisible_ms=settings.default_invisible_ms,
                                        renew_ahead_ms=min(10_000, settings.default_invisible_ms // 2))

    # ------------------------------------------------------------ receive

    def polling_ms(self, call: Call, request: service.ReceiveMessageRequest) -> int:
        s = self.settings
        client = self.registry.get(call.client_id)
        remaining_ms = None if call.time_remaining_s is None else int(call.time_remaining_s * 1000)
        if request.HasField("long_polling_timeout"):
            polling = _millis(request.long_polling_timeout)
        elif remaining_ms is not None and client is not None and client.settings is not None:
            polling = remaining_ms - _millis(client.settings.request_timeout) // 2
        else:
            polling = s.long_polling_max_ms
        polling = min(max(polling, s.long_polling_min_ms), s.long_polling_max_ms)
        if remaining_ms is not None and polling > remaining_ms - DEADLINE_MARGIN_MS:
            if remaining_ms - DEADLINE_MARGIN_MS < s.long_polling_min_ms:
                raise ProxyError(Code.ILLEGAL_POLLING_TIME, "The deadline time remaining is not enough for polling, "
                                                            "please check network condition")
            polling = remaining_ms - DEADLINE_MARGIN_MS
        return max(0, polling)

    def invisible_ms(self, request: service.ReceiveMessageRequest) -> int:
        if request.auto_renew:
            # A PushConsumer asks the proxy to keep its messages invisible while it works on them.
            return self.settings.default_invisible_ms
        return validation.invisible_ms(_millis(request.invisible_duration), self.settings.invisible_min_ms,
                                       self.settings.invisible_max_ms)

    @staticmethod
    def filter_fields(expression: pb.FilterExpression) -> tuple[str, str]:
        if expression.type == pb.SQL:
            if not expression.expression.strip():
                raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, "an SQL92 filter needs an expression")
            return "SQL92", expression.expression
        return "TAG", expression.expression.strip() or "*"

    async def receive(self, call: Call, request: service.ReceiveMessageRequest, runs: bool = False):
        """The response stream (an async generator of ReceiveMessageResponse). ``runs`` (the native door):
        the popped messages come as one list of serialized responses (status, messages, delivery
        timestamp: what the stream's end would be), made without a response object a message."""
        popped: list[Popped] = []
        written = 0
        try:
            try:
                topic, group, broker_name = await self._target(call, request)
                pop = asyncio.ensure_future(self._take(call, request, topic, group, broker_name))
                try:
                    popped = await asyncio.shield(pop)
                except asyncio.CancelledError:
                    # The client left while the pop was parked: what it brings back is made visible again.
                    pop.add_done_callback(lambda f: self._nack_later(f, group, topic))
                    raise
            except ProxyError as exc:
                _limited.warning("refused:ReceiveMessage", "ReceiveMessage refused (%s): %s", Code.Name(exc.code),
                                 exc.message)
                yield service.ReceiveMessageResponse(status=status(exc.code, exc.message))
            else:
                if popped and runs:
                    yield self._run(popped)
                    written = len(popped)
                    if request.auto_renew:
                        for item in popped:
                            self._renew_while_consumed(call, request, item)
                    return
                if popped:
                    yield service.ReceiveMessageResponse(status=OK)
                    for item in popped:
                        yield service.ReceiveMessageResponse(message=messages.incoming(
                            item.record, receipt_handle=item.handle, delivery_attempt=item.attempt, topic=item.topic))
                        written += 1
                        if request.auto_renew:
                            self._renew_while_consumed(call, request, item)
                else:
                    yield service.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
            yield service.ReceiveMessageResponse(delivery_timestamp=messages.timestamp(now_ms()))
        finally:
            if written < len(popped):
                self._nack_soon(popped[written:], request.group.name, request.message_queue.topic.name)

    @staticmethod
    def _run(popped: list[Popped]) -> list[bytes]:
        """A receive's whole stream as bytes: the OK status, each message (``received_wire``: written in C
        from the record, no protobuf objects), the delivery timestamp."""
        run = [_RECEIVE_OK, *received_wire.run(popped)]
        run.append(service.ReceiveMessageResponse(delivery_timestamp=messages.timestamp(now_ms())).SerializeToString())
        return run

    async def _target(self, call: Call, request: service.ReceiveMessageRequest) -> tuple[str, str, str]:
        client = self.registry.get(call.client_id)
        if client is not None and client.unserved_type:
            raise unserved_client_type(client.unserved_type)   # a Lite consumer is not served as a plain one
        group = validation.consumer_group(request.group.name)
        topic = validation.topic(request.message_queue.topic.name)
        route = await self.gateway.existing_route(topic)
        if self.lite is not None and not self.lite.is_lite_client(call.client_id):
            await self.lite.refuse_plain_receive(topic, route)
        readable = [name for name, data in self.gateway.readable(route) if data["readQueueNums"] > 0]
        if not readable:
            raise ProxyError(Code.FORBIDDEN, f"topic {topic} has no readable queue")
        asked = request.message_queue.broker.name
        return topic, group, asked if asked in readable else readable[0]

    async def _take(self, call: Call, request, topic: str, group: str, broker_name: str) -> list[Popped]:
        lite = self.lite
        if lite is None or not lite.is_lite_client(call.client_id):
            return await self._pop(call, request, topic, group, broker_name)
        held = lite.take_held(call.client_id, group, topic, min(max(request.batch_size, 1),
                                                                  self.settings.receive_batch_max))
        if held:
            return held
        found = lite.sort(call.client_id, group, topic, await self._pop(call, request, topic, group, broker_name))
        for item in found.unwanted:   # a lite topic nobody in the group subscribes
            asyncio.ensure_future(self._ack_quietly(group, topic, item.handle))
        self._nack_soon(found.overflow, group, topic)
        return found.mine

    async def _pop(self, call: Call, request, topic: str, group: str, broker_name: str) -> list[Popped]:
        polling = self.polling_ms(call, request)
        invisible = self.invisible_ms(request)
        exp_type, expression = self.filter_fields(request.filter_expression)
        batch = min(max(request.batch_size, 1), self.settings.receive_batch_max)
        fifo = bool((await self.gateway.group_config(group)).get("consumeMessageOrderly"))
        fields = {"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": str(batch),
                  "invisibleTime": str(invisible), "pollTime": str(polling), "expType": exp_type, "exp": expression,
                  "order": "true" if fifo else "false"}
        response = await self.gateway.broker_call(broker_name, Command(RequestCode.POP_MESSAGE, fields),
                                                   polling + self.settings.request_timeout_ms)
        if response.code == ResponseCode.PULL_NOT_FOUND:
            return []
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, broker_name)
        records = messages.records(response.body or b"")
        handles = (response.fields.get("handles") or "").split(",") if records else []
        attempts = (response.fields.get("attempts") or "").split(",") if records else []
        if len(handles) != len(records):
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"broker {broker_name} answered {len(records)} messages "
                                                         f"with {len(handles)} receipt handles")
        tags = parse_tags(expression) if exp_type == "TAG" else None
        out, unwanted = [], []
        for i, record in enumerate(records):
            shown = record.properties.get(PROPERTY_RETRY_TOPIC, topic) \
                if record.topic.startswith(RETRY_TOPIC_PREFIX) else record.topic
            if tags is not None and record.properties.get(PROPERTY_TAGS) not in tags:
                unwanted.append(handles[i])   # a tag-hash collision the broker let through
                continue
            attempt = int(attempts[i]) if i < len(attempts) and attempts[i].isdigit() else None
            out.append(Popped(record, handles[i], attempt or record.reconsume_times + 1, shown))
        for handle in unwanted:   # not for this consumer: acked, as Apache's proxy does (FilterResult.NO_MATCH)
            asyncio.ensure_future(self._ack_quietly(group, topic, handle))
        return out

    def _renew_while_consumed(self, call: Call, request, item: Popped) -> None:
        try:
            next_visible = receipt_handle.decode(item.handle).next_visible_ms
        except receipt_handle.InvalidReceiptHandle:
            return
        self.renewals.track(call.client_id, request.group.name, request.message_queue.topic.name, item.handle,
                            next_visible)

    # ------------------------------------------------------------ returning what was not delivered

    def _nack_later(self, pop: asyncio.Future, group: str, topic: str) -> None:
        if not pop.cancelled() and pop.exception() is None and pop.result():
            self._nack_soon(pop.result(), group, topic)

    def _nack_soon(self, items: list[Popped], group: str, topic: str) -> None:
        for item in items:
            asyncio.ensure_future(self._change_quietly(group, topic, item.handle, NACK_INVISIBLE_MS))

    async def _change_quietly(self, group: str, topic: str, handle: str, invisible: int) -> None:
        try:
            await self._change(group, topic, handle, invisible)
        except ProxyError as exc:
            _limited.warning("nack", "could not make an undelivered message visible again: %s", exc.message)

    async def _ack_quietly(self, group: str, topic: str, handle: str) -> None:
        try:
            await self._ack_one(group, topic, handle)
        except ProxyError as exc:
            _limited.warning("ack-unwanted", "could not ack a message the filter refused: %s", exc.message)

    # ------------------------------------------------------------ handles

    @staticmethod
    def handle_of(text: str, *, check_expiry: bool = True) -> receipt_handle.ReceiptHandle:
        try:
            handle = receipt_handle.decode(text)
        except receipt_handle.InvalidReceiptHandle as exc:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
        if check_expiry and handle.expired(now_ms()):
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        return handle

    async def _ack_one(self, group: str, topic: str, text: str) -> None:
        text = await self.renewals.take(text)
        handle = self.handle_of(text)
        response = await self.gateway.broker_call(handle.broker_name, Command(RequestCode.ACK_MESSAGE, {
            "consumerGroup": group, "topic": topic, "extraInfo": text}))
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, handle.broker_name)

    async def _change(self, group: str, topic: str, text: str, invisible: int) -> str:
        handle = self.handle_of(text)
        response = await self.gateway.broker_call(handle.broker_name, Command(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
            "consumerGroup": group, "topic": topic, "extraInfo": text, "invisibleTime": str(invisible)}))
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, handle.broker_name)
        return response.fields.get("receiptHandle", "")

    # ------------------------------------------------------------ ack, change, dead letters

    async def ack(self, call: Call, request: service.AckMessageRequest) -> service.AckMessageResponse:
        group = validation.consumer_group(request.group.name)
        topic = validation.topic(request.topic.name)
        if not request.entries:
            raise ProxyError(Code.BAD_REQUEST, "no entry to ack")
        if len(request.entries) == 1:   # the 5.x clients ack one handle a call: no task for it
            results = [await self._ack_entry(group, topic, request.entries[0])]
        else:
            results = await asyncio.gather(*(self._ack_entry(group, topic, entry) for entry in request.entries))
        codes = {entry.status.code for entry in results}
        overall = status(Code.MULTIPLE_RESULTS) if len(codes) > 1 else status(codes.pop())
        return service.AckMessageResponse(status=overall, entries=results)

    async def ack_batch(self, calls: list[tuple[Call, service.AckMessageRequest]]) -> list:
        """A read's AckMessage calls together (ack_batches.py): each call's response or refusal."""
        return await self.batches.ack(calls)

    async def _ack_entry(self, group: str, topic: str, entry: service.AckMessageEntry) -> service.AckMessageResultEntry:
        try:
            await self._ack_one(group, topic, entry.receipt_handle)
            result = OK
        except ProxyError as exc:
            result = status(exc.code, exc.message)
        return service.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                             status=result)

    async def change_invisible_duration(self, call: Call, request: service.ChangeInvisibleDurationRequest
                                        ) -> service.ChangeInvisibleDurationResponse:
        group = validation.consumer_group(request.group.name)
        topic = validation.topic(request.topic.name)
        invisible = validation.invisible_ms(_millis(request.invisible_duration), 0, self.settings.invisible_max_ms)
        handle = await self._change(group, topic, await self.renewals.take(request.receipt_handle), invisible)
        return service.ChangeInvisibleDurationResponse(status=OK, receipt_handle=handle)

    async def forward_to_dead_letter_queue(self, call: Call, request: service.ForwardMessageToDeadLetterQueueRequest
                                           ) -> service.ForwardMessageToDeadLetterQueueResponse:
        """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to %DLQ%<group>), then the handle is acked
        (RocketMQ's ProducerProcessor.forwardMessageToDeadLetterQueue; an expired handle is taken too)."""
        group = validation.consumer_group(request.group.name)
        topic = validation.topic(request.topic.name)
        text = await self.renewals.take(request.receipt_handle)
        handle = self.handle_of(text, check_expiry=False)
        response = await self.gateway.broker_call(handle.broker_name, Command(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "group": group, "offset": str(handle.commitlog_offset), "delayLevel": "-1",
            "originMsgId": request.message_id, "originTopic": topic,
            "maxReconsumeTimes": str(max(0, request.max_delivery_attempts - 1))}))
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, handle.broker_name)
        if not handle.expired(now_ms()):
            await self._ack_quietly(group, topic, text)
        return service.ForwardMessageToDeadLetterQueueResponse(status=OK)

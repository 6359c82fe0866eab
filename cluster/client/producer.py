"""Producer: sync, async (future or callback), one-way and batch sends.

Queue choice is RocketMQ's: round-robin over the route's writable queues; a failed
send is retried (``send_retry_count`` more times) on a queue of another broker. With
``send_latency_fault_enabled`` every send's latency (a failure counts as an isolation)
makes its broker avoided for the time of SPEC §2's table (``client/fault_tolerance.py``),
and queue choice skips avoided brokers. One send takes at most ``send_timeout_ms`` (its
retries included), each attempt at most ``request_timeout_ms``: a broker that stops
answering costs one attempt's time-out, then the send goes on to another broker.
Every message gets a client-made UNIQ_KEY; bodies over 4 KiB are zlib-compressed
with SYSFLAG 0x1 (batches are not, as in RocketMQ). An overloaded broker's SYSTEM_BUSY ("start
flow control for a while") holds every attempt to that broker for a random back-off, doubling with
each busy answer in a row (``send_busy_backoff_ms`` up to ``send_busy_backoff_max_ms``), within each
send's time-out: a send whose time runs out while held fails with the broker's reason, without
adding to its load. At most ``async_sends_max`` async sends wait for answers at once.
"""

from __future__ import annotations

import itertools
from array import array
import logging
import random
import threading
import zlib
from concurrent.futures import Future
from typing import Callable, Sequence

from rocketbox.cluster import _native
from rocketbox.cluster.clock import SYSTEM_CLOCK, Clock
from rocketbox.cluster.client.base import ClientBase
from rocketbox.cluster.client.fault_tolerance import LatencyFaultTolerance, select_round_robin
from rocketbox.cluster.client.retry_timer import RetryTimer
from rocketbox.cluster.client.message import UNIQUE_IDS, Message, MessageQueue, SendResult, SendStatus
from rocketbox.cluster.config import ClientConfig, name_problem
from rocketbox.cluster.errors import BrokerError, BrokerUnreachable, ClientError, MessageInvalid, NoRouteError
from rocketbox.cluster.protocol import RequestCode, ResponseCode, SEND_V2_LONG_NAMES
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY
from rocketbox.cluster.message import batch_format
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY, encode_properties, properties_text
from rocketbox.cluster.message.sysflags import SYSFLAG_COMPRESSED
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)

_SEND_STATUS_CODES = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
}
# Worth another broker (RocketMQ's DefaultMQProducerImpl retry list).
_RETRIABLE_CODES = {ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
                    ResponseCode.NO_PERMISSION, ResponseCode.SYSTEM_BUSY, ResponseCode.DISK_FULL}


# The one-letter header names SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry (RocketMQ's SendMessageRequestHeaderV2).
(_GROUP, _TOPIC, _DEFAULT_TOPIC, _DEFAULT_QUEUES, _QUEUE_ID, _SYS_FLAG, _BORN, _FLAG, _PROPERTIES, _RECONSUME,
 _UNIT_MODE, _BATCH) = (SEND_V2_LONG_NAMES[name] for name in (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag",
    "properties", "reconsumeTimes", "unitMode", "batch"))

# Properties that make a message delayed, timed or transactional: one type per message.
_TYPE_PROPERTIES = frozenset({"DELAY", "TIMER_DELIVER_MS", "TRAN_MSG"})


class Producer(ClientBase):
    def __init__(self, group: str = "DEFAULT_PRODUCER", namesrv: str | Sequence[str] | None = None,
                 config: ClientConfig | None = None, *, clock: Clock = SYSTEM_CLOCK):
        super().__init__(namesrv, config, clock)
        problem = name_problem("producer group", group)
        if problem:
            raise ValueError(problem)
        self.group = group
        self._counter = itertools.count()
        self.faults = LatencyFaultTolerance.from_config(self.cfg, self.clock.monotonic)
        self._stats_lock = threading.Lock()
        self.sent_ok = 0
        self.send_failures = 0
        self.sent_oneway = 0
        self.busy_answers = 0
        self._async_places = threading.BoundedSemaphore(self.cfg.async_sends_max)
        self._retries = RetryTimer()
        # Flow control after SYSTEM_BUSY ("start flow control for a while"): broker -> until when its
        # next attempts wait, how many busy answers in a row it gave, and the last one's reason.
        self._busy_until: dict[str, float] = {}
        self._busy_streak: dict[str, int] = {}
        self._busy_reason: dict[str, str] = {}

    # -------------------------------------------------------------- building

    def _prepare(self, msg: Message) -> tuple[bytes, str, int]:
        """(body as sent, properties text, sysFlag); fills in UNIQ_KEY."""
        problem = name_problem("topic", msg.topic)
        if problem:
            raise MessageInvalid(problem)
        body = msg.body
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise MessageInvalid("the message body must be bytes")
        if len(body) == 0:
            raise MessageInvalid("the message body is empty")
        if len(body) > self.cfg.message_size_bytes_max:
            raise MessageInvalid(f"the message body is {len(body)} bytes, more than the "
                                 f"{self.cfg.message_size_bytes_max}-byte limit")
        sys_flag = 0
        if len(body) > self.cfg.compress_body_threshold_bytes:
            body = zlib.compress(body, 5)
            sys_flag |= SYSFLAG_COMPRESSED
        props = self._properties(msg)
        return bytes(body), props, sys_flag

    @staticmethod
    def _properties(msg: Message) -> str:
        """The properties string (`name\\x01value\\x02`...), with a fresh UNIQ_KEY unless one is set."""
        props = msg.properties
        uniq = props.get(PROPERTY_UNIQ_KEY)
        if uniq is None:
            uniq = props[PROPERTY_UNIQ_KEY] = UNIQUE_IDS.next()
        pairs = list(props.items())
        if msg.tags:
            pairs.append(("TAGS", msg.tags))
        keys = msg.keys_text()
        if keys:
            pairs.append(("KEYS", keys))
        return properties_text(pairs)

    def _request(self, code: int, topic: str, queue: MessageQueue, body: bytes, props: str, sys_flag: int,
                 flag: int, auto_create: bool, batch: bool) -> Command:
        fields = {_GROUP: self.group, _TOPIC: topic, _QUEUE_ID: str(queue.queue_id), _SYS_FLAG: str(sys_flag),
                  _BORN: str(self.clock.now_ms()), _FLAG: str(flag), _PROPERTIES: props, _RECONSUME: "0",
                  _UNIT_MODE: "false", _BATCH: "true" if batch else "false"}
        if auto_create:
            fields[_DEFAULT_TOPIC] = AUTO_CREATE_TOPIC_KEY
            fields[_DEFAULT_QUEUES] = "4"
        return Command(code, fields, body)

    def _pick_queue(self, queues: list[MessageQueue], avoid_broker: str | None) -> MessageQueue:
        if self.cfg.send_latency_fault_enabled:
            return self.faults.select(queues, next(self._counter), avoid_broker)
        return select_round_robin(queues, next(self._counter), avoid_broker)

    def _record(self, broker: str, started_s: float, failed: bool) -> None:
        """One attempt's outcome for the fault tolerance (RocketMQ's updateFaultItem); a failure
        also has the topic's route fetched again soon (the group may have a new master)."""
        if failed:
            self.routes.suspect(broker)
        if self.cfg.send_latency_fault_enabled:
            self.faults.update(broker, (self.clock.monotonic() - started_s) * 1000, isolation=failed)

    def _send_deadline(self, timeout_ms: int | None) -> tuple[int, float]:
        """(the send's time-out in ms, its deadline on the monotonic clock)."""
        timeout_ms = timeout_ms or self.cfg.send_timeout_ms or self.cfg.request_timeout_ms
        return timeout_ms, self.clock.monotonic() + timeout_ms / 1000

    def _attempt_timeout_ms(self, deadline: float) -> int:
        """What is left of the send's time, at most one request's time-out; <= 0 when none is left."""
        return min(int((deadline - self.clock.monotonic()) * 1000), self.cfg.request_timeout_ms)

    def _held_s(self, broker: str) -> float:
        """How long attempts to ``broker`` still wait after its SYSTEM_BUSY (0: none)."""
        if not self._busy_until:
            return 0.0
        return max(0.0, self._busy_until.get(broker, 0.0) - self.clock.monotonic())

    def _note_busy(self, broker: str, remark: str) -> float:
        """A SYSTEM_BUSY from ``broker``: hold every attempt to it for a random back-off, doubling with
        each busy answer in a row (half of it at least: the broker asked for a while). Returns the hold."""
        cfg = self.cfg
        now = self.clock.monotonic()
        with self._stats_lock:
            streak = self._busy_streak[broker] = self._busy_streak.get(broker, 0) + 1
            cap_ms = min(cfg.send_busy_backoff_max_ms, cfg.send_busy_backoff_ms << min(streak - 1, 20))
            until = max(self._busy_until.get(broker, 0.0), now + random.uniform(cap_ms / 2, cap_ms) / 1000)
            self._busy_until[broker] = until
            self._busy_reason[broker] = remark
            self.busy_answers += 1
        return until - now

    def _note_stored(self, broker: str) -> None:
        if self._busy_streak:
            with self._stats_lock:
                self._busy_streak.pop(broker, None)
                self._busy_until.pop(broker, None)

    def fault_state(self) -> dict[str, dict]:
        """broker -> {latency_ms, isolated, available, unavailable_for_ms} (empty with fault tolerance off)."""
        return self.faults.snapshot()

    @staticmethod
    def _result(response: Command, queue: MessageQueue, uniq: str) -> SendResult:
        return SendResult(_SEND_STATUS_CODES[response.code], uniq, response.fields.get("msgId", ""),
                          MessageQueue(queue.topic, queue.broker_name, int(response.fields.get("queueId", queue.queue_id))),
                          int(response.fields.get("queueOffset", -1)))

    # -------------------------------------------------------------- sending

    def send(self, msg: Message, timeout_ms: int | None = None, queue: MessageQueue | None = None,
             selector: Callable[[list[MessageQueue], Message, object], MessageQueue] | None = None,
             arg: object = None) -> SendResult:
        """Send and wait for the store's answer; retries on another broker on failure.

        ``timeout_ms`` bounds the whole send, retries included (default ``send_timeout_ms``).
        An ordered send names its queue: ``queue``, or ``selector(queues, msg, arg)`` over the
        topic's writable queues (RocketMQ's MessageQueueSelector; ``selectors.hash_selector``
        picks by the hash of ``arg``); its retries stay on that queue."""
        if (queue is not None or selector is not None) and _TYPE_PROPERTIES.intersection(msg.properties):
            raise MessageInvalid("an ordered message cannot also be delayed, timed or transactional")
        body, props, sys_flag = self._prepare(msg)
        if selector is not None:
            queue = selector(self.routes.publish_route(msg.topic)[1], msg, arg)
        return self._send_with_retries(msg.topic, body, props, sys_flag, msg.flag, msg.properties[PROPERTY_UNIQ_KEY],
                                       timeout_ms, queue, RequestCode.SEND_MESSAGE_V2, batch=False)

    def send_batch(self, messages: Sequence[Message], timeout_ms: int | None = None,
                   queue: MessageQueue | None = None) -> SendResult:
        """Send messages of one topic as one request to one queue (RocketMQ's batch send)."""
        if not messages:
            raise MessageInvalid("the batch is empty")
        topic = messages[0].topic
        problem = name_problem("topic", topic)
        if problem:
            raise MessageInvalid(problem)
        first = messages[0]
        shared = all(m.topic == topic and m.keys is None and not m.properties and m.tags == first.tags
                     and m.flag == first.flag for m in messages)
        if shared:
            # The common batch: one tag, no keys or user properties; only bodies and ids differ.
            shared_properties = encode_properties({"TAGS": first.tags}) if first.tags else b""
            bodies = [m.body if type(m.body) is bytes else bytes(m.body) for m in messages]
            if not all(bodies):
                raise MessageInvalid("a message body of the batch is empty")
            prefix, counter_first = UNIQUE_IDS.reserve(len(messages))
            # One C call encodes every item and its UNIQ_KEY (per-message Python was the producer's cost).
            body, ids_text = _native.encode_items_shared(
                first.flag, b"".join(bodies), array("q", map(len, bodies)), shared_properties,
                prefix.encode(), counter_first)
            uniqs = ids_text.split(",")
            for msg, uniq in zip(messages, uniqs):
                msg.properties[PROPERTY_UNIQ_KEY] = uniq
        else:
            items = []
            uniqs = []
            for msg in messages:
                if msg.topic != topic:
                    raise MessageInvalid("every message of a batch must have the same topic")
                if _TYPE_PROPERTIES.intersection(msg.properties):
                    # As RocketMQ: a batch is stored as it comes, so a delay or a half would be ignored.
                    raise MessageInvalid("delayed, timed and transactional messages cannot be batched")
                props = self._properties(msg)
                uniqs.append(msg.properties[PROPERTY_UNIQ_KEY])
                items.append((msg.flag, bytes(msg.body), props.encode()))
            body = batch_format.encode_items(items)
        if len(body) > self.cfg.message_size_bytes_max:
            raise MessageInvalid(f"the batch is {len(body)} bytes, more than the "
                                 f"{self.cfg.message_size_bytes_max}-byte limit: split it")
        return self._send_with_retries(topic, body, "", 0, 0, ",".join(uniqs), timeout_ms, queue,
                                       RequestCode.SEND_BATCH_MESSAGE, batch=True)

    def _send_with_retries(self, topic, body, props, sys_flag, flag, uniq, timeout_ms, queue, code, batch):
        self._check_open()
        send = _SendAttempts(self, topic, body, props, sys_flag, flag, uniq, timeout_ms, queue, code, batch)
        while (attempt := send.next_attempt()) is not None:
            target, endpoint, request, left_ms = attempt
            if send.hold_s:
                self.clock.sleep(send.hold_s)
                left_ms -= int(send.hold_s * 1000)
            started = self.clock.monotonic()
            try:
                response = self.rpc.call(endpoint, request, left_ms)
            except TransportError as exc:
                send.answered(target, endpoint, started, error=exc)
                continue
            result = send.answered(target, endpoint, started, response)
            if result is not None:
                return result
        raise send.failure()

    def send_async(self, msg: Message, callback: Callable[[SendResult | None, Exception | None], None] | None = None,
                   timeout_ms: int | None = None) -> Future:
        """A future of the SendResult; ``callback(result, error)`` runs when it resolves.

        Retried on another broker like ``send``, within ``timeout_ms`` (default ``send_timeout_ms``)."""
        self._check_open()
        body, props, sys_flag = self._prepare(msg)
        send = _SendAttempts(self, msg.topic, body, props, sys_flag, msg.flag, msg.properties[PROPERTY_UNIQ_KEY],
                             timeout_ms, None, RequestCode.SEND_MESSAGE_V2, False)
        # Back-pressure: the caller waits for a place rather than piling up futures without end.
        if not self._async_places.acquire(timeout=max(0.0, send.deadline - self.clock.monotonic())):
            with self._stats_lock:
                self.send_failures += 1
            raise ClientError(f"{self.cfg.async_sends_max} async sends are waiting for answers: none ended "
                              f"within the send's {send.timeout_ms} ms")
        outer: Future = Future()
        outer.add_done_callback(lambda _f: self._async_places.release())
        if callback is not None:
            outer.add_done_callback(lambda f: callback(f.result() if not f.exception() else None, f.exception()))

        def attempt() -> None:
            try:
                planned = send.next_attempt()
            except ClientError as exc:  # a route lookup refused
                send.last_error = exc
                planned = None
            if planned is None:
                outer.set_exception(send.failure())
                return
            target, endpoint, request, left_ms = planned
            if send.hold_s:   # the broker asked for flow control: this attempt goes when its hold ends
                hold_s, send.hold_s = send.hold_s, 0.0
                self._retries.call_later(hold_s, lambda: fire(target, endpoint, request, left_ms - int(hold_s * 1000)))
            else:
                fire(target, endpoint, request, left_ms)

        def fire(target, endpoint, request, left_ms) -> None:
            started = self.clock.monotonic()

            def done(f: Future) -> None:
                error = f.exception()
                result = send.answered(target, endpoint, started, None if error else f.result(), error)
                if result is not None:
                    outer.set_result(result)
                else:
                    self._retries.call_later(0.0, attempt)   # its broker's hold, if any, is planned there
            try:
                self.rpc.call_async(endpoint, request, max(1, left_ms)).add_done_callback(done)
            except ClientError as exc:   # the producer was shut down meanwhile
                send.last_error = exc
                outer.set_exception(send.failure())

        attempt()
        return outer

    def send_oneway(self, msg: Message) -> None:
        """Fire and forget: no answer, so no retry once sent (RocketMQ's sendOneway); a queue whose
        broker has no master is passed over as for any send, and no route at all is an error."""
        self._check_open()
        body, props, sys_flag = self._prepare(msg)
        send = _SendAttempts(self, msg.topic, body, props, sys_flag, msg.flag, msg.properties[PROPERTY_UNIQ_KEY],
                             None, None, RequestCode.SEND_MESSAGE_V2, False)
        planned = send.next_attempt()
        if planned is None:
            raise send.failure()
        _, endpoint, request, _ = planned
        self.rpc.oneway(endpoint, request)
        with self._stats_lock:
            self.sent_oneway += 1

    def statistics(self) -> dict:
        """Sends acknowledged (sync and async), handed over without an answer (oneway), and failed."""
        return {"sent_ok": self.sent_ok, "sent_oneway": self.sent_oneway, "send_failures": self.send_failures,
                "busy_answers": self.busy_answers}


class _SendAttempts:
    """One message's (or batch's) way to a broker, the same for sync, async and oneway sends: which
    queue each attempt takes (another broker after a failure, the chosen queue always for ordered
    messages), what an answer means, when to stop, and the producer's statistics and latency
    records. The caller only carries the bytes: a blocking call, a future, or a oneway frame."""

    def __init__(self, producer: "Producer", topic: str, body: bytes, props: str, sys_flag: int, flag: int,
                 uniq: str, timeout_ms: int | None, queue: MessageQueue | None, code: int, batch: bool):
        self.producer = producer
        self.topic, self.body, self.props, self.sys_flag, self.flag = topic, body, props, sys_flag, flag
        self.uniq, self.queue, self.code, self.batch = uniq, queue, code, batch
        self.timeout_ms, self.deadline = producer._send_deadline(timeout_ms)
        self.attempts = 0
        self.attempts_max = 1 + producer.cfg.send_retry_count
        self.avoid: str | None = None
        self.last_error: Exception | None = None
        self.busy_answers = 0
        self.hold_s = 0.0   # how long the planned attempt must wait: its broker asked for flow control

    def next_attempt(self) -> tuple[MessageQueue, str, Command, int] | None:
        """(queue, broker endpoint, request, time-out ms) of the next attempt; None when none is left."""
        p = self.producer
        while self.attempts < self.attempts_max:
            left_ms = p._attempt_timeout_ms(self.deadline)
            if left_ms <= 0:
                return None
            self.attempts += 1
            try:
                route, queues, auto_create = p.routes.publish_route(self.topic)
            except NoRouteError as exc:
                self.last_error = exc
                return None
            # A chosen queue (ordered messages) is kept on retries: another queue would break the order.
            target = self.queue if self.queue is not None else p._pick_queue(queues, self.avoid)
            endpoint = route.master_endpoint(target.broker_name)
            if endpoint is None:
                self.avoid = target.broker_name
                p.routes.suspect(target.broker_name)
                self.last_error = NoRouteError(f"broker {target.broker_name} has no master")
                continue
            self.hold_s = p._held_s(target.broker_name)
            if self.hold_s and self.hold_s * 1000 >= left_ms:
                # The hold outlasts the send: it ends now, with the broker's reason.
                self.last_error = BrokerError(ResponseCode.SYSTEM_BUSY, f"held by this producer for "
                                              f"{int(self.hold_s * 1000)} ms more after SYSTEM_BUSY: "
                                              f"{p._busy_reason.get(target.broker_name, '')}", endpoint)
                self.attempts = self.attempts_max
                return None
            request = p._request(self.code, self.topic, target, self.body, self.props, self.sys_flag, self.flag,
                                 auto_create, self.batch)
            return target, endpoint, request, left_ms
        return None

    def answered(self, target: MessageQueue, endpoint: str, started: float, response: Command | None = None,
                 error: Exception | None = None) -> SendResult | None:
        """The SendResult when this attempt succeeded; None when it failed (``next_attempt`` says
        whether another may follow)."""
        p = self.producer
        self.avoid = target.broker_name
        if error is not None or response is None:
            p._record(target.broker_name, started, failed=True)
            self.last_error = BrokerUnreachable(f"{target.broker_name} ({endpoint}): {error}")
            return None
        retriable = response.code in _RETRIABLE_CODES
        # A broker-side error isolates the broker; a refused message says nothing of it.
        p._record(target.broker_name, started, failed=retriable)
        if response.code in _SEND_STATUS_CODES:
            p._note_stored(target.broker_name)
            with p._stats_lock:
                p.sent_ok += 1
            return p._result(response, MessageQueue(self.topic, target.broker_name, target.queue_id), self.uniq)
        self.last_error = BrokerError(response.code, response.remark, endpoint)
        if response.code == ResponseCode.SYSTEM_BUSY:
            self.busy_answers += 1
            p._note_busy(target.broker_name, response.remark)
        if not retriable:
            self.attempts = self.attempts_max
        return None

    def failure(self) -> ClientError:
        """The error to raise once no attempt is left (counted once)."""
        with self.producer._stats_lock:
            self.producer.send_failures += 1
        if isinstance(self.last_error, ClientError):
            return self.last_error
        return BrokerUnreachable(f"send to {self.topic} failed within {self.timeout_ms} ms: "
                                 f"{self.last_error or 'no time left'}")

"""PullConsumer (explicit queue and offset) and PushConsumer (a clustering consumer group).

PushConsumer, at-least-once: long-polling pulls per assigned queue run on the RPC
I/O thread; messages go to a pool of consume threads; a queue's committed offset
is the lowest offset still being consumed (or the next to pull when none is), sent
to the broker every ``consumer_offset_commit_interval_ms``, on rebalance and at
shutdown. Rebalance (average allocation, or another strategy of ``allocation.py``) runs at
start, every ``rebalance_interval_ms``, and whenever the group's member list changes.

Broadcasting (``message_model="BROADCASTING"``): every member reads every queue, keeps
its offsets in a local file (``offset_store.py``), has no retry topic, and drops a
message whose consumption failed, as RocketMQ does. Flow control: a queue whose cached
messages or bytes reach ``pull_threshold_for_queue`` / ``pull_threshold_size_for_queue_bytes``
pulls again only when consumption drains it. RESET_CONSUMER_CLIENT_OFFSET from a broker
(an admin's resetOffsetByTime) drops the named queues and restarts them from the new offsets.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.allocation import allocate_average, strategy as allocation_strategy
from rocketbox.cluster.client.base import ClientBase
from rocketbox.cluster.client.broker_api import PullResult, PullStatus
from rocketbox.cluster.client.consume_service import BROADCASTING, CLUSTERING, ConsumeService, ConsumeStatus
from rocketbox.cluster.client.direct_consume import answer_consume_directly
from rocketbox.cluster.client.consumer_offsets import LocalFileOffsets, RemoteBrokerOffsets
from rocketbox.cluster.client.message import MessageExt, MessageQueue
from rocketbox.cluster.client.message_selector import MessageSelector
from rocketbox.cluster.client.offset_store import LocalOffsetStore, local_offset_store_path, store_id
from rocketbox.cluster.client.orderly import (ORDERLY_RECONSUME_TIMES_MAX, SUSPEND_CURRENT_QUEUE_TIME_MS_DEFAULT,
                                    OrderlyListener, OrderlyService)
from rocketbox.cluster.client.process_queue import ProcessQueue
from rocketbox.cluster.client.pull_service import PullService
from rocketbox.cluster.client.rebalance import Rebalancer
from rocketbox.cluster.client.running_info import answer_running_info
from rocketbox.cluster.client.routes import normalize_endpoint
from rocketbox.cluster.clock import SYSTEM_CLOCK, Clock
from rocketbox.cluster.config import ClientConfig, name_problem
from rocketbox.cluster.errors import BrokerError, ClientError, NoRouteError
from rocketbox.cluster.filter.expressions import SUBSCRIBE_ALL
from rocketbox.cluster.protocol import MASTER_ID, RETRY_TOPIC_PREFIX, RequestCode, offset_table_from_reset_body, retry_topic
from rocketbox.cluster.zmq_transport import TransportError

RECONSUME_TIMES_MAX_DEFAULT = 16

log = logging.getLogger(__name__)


class _QueueClient(ClientBase):
    """Route lookups shared by both consumers, with read-from-slave (RocketMQ's PullAPIWrapper).

    Each pull answer's ``suggestWhichBrokerId`` is remembered per queue and picks the broker of
    the queue's next pull (``recalculatePullFromWhichNode``): a master sends a consumer reading far
    behind its end to a slave, a slave sends it back once it has caught up. A failed pull from a
    master marks that broker name's master down for ``slave_fallback_ms``: its queues are then
    pulled from a slave, and offsets committed there (``_commit_endpoint``).
    """

    def __init__(self, namesrv=None, config: ClientConfig | None = None, clock: Clock = SYSTEM_CLOCK):
        super().__init__(namesrv, config, clock)
        self._suggested: dict[MessageQueue, int] = {}
        self._master_down_until: dict[str, float] = {}

    def _master_down(self, broker_name: str) -> bool:
        return self._master_down_until.get(broker_name, 0.0) > self.clock.monotonic()

    def _pick(self, mq: MessageQueue, wanted: int) -> tuple[str, int]:
        route = self.routes.get(mq.topic)
        addrs = route.broker_addrs.get(mq.broker_name, {}) if route else {}
        if not addrs:
            return self._endpoint(mq), MASTER_ID
        slaves = sorted(i for i in addrs if i != MASTER_ID)
        if self._master_down(mq.broker_name):
            order = ([wanted] if wanted != MASTER_ID else []) + slaves + [MASTER_ID]
        else:
            order = [wanted, MASTER_ID] + slaves
        for broker_id in order:
            if broker_id in addrs:
                return normalize_endpoint(addrs[broker_id]), broker_id
        return self._endpoint(mq), MASTER_ID

    def _pull_endpoint(self, mq: MessageQueue) -> tuple[str, int]:
        """Where the next pull of ``mq`` goes, and that broker's id."""
        return self._pick(mq, self._suggested.get(mq, MASTER_ID))

    def _commit_endpoint(self, mq: MessageQueue) -> tuple[str, int]:
        """The master, or while it is marked down a slave (which keeps the offset for then)."""
        return self._pick(mq, MASTER_ID)

    def _pulled(self, mq: MessageQueue, broker_id: int, response=None) -> None:
        """Record a pull's outcome: its answer's suggestion, or (None) that it failed."""
        if response is None:
            self.routes.suspect(mq.broker_name)
            if broker_id == MASTER_ID:
                self._master_down_until[mq.broker_name] = self.clock.monotonic() + self.cfg.slave_fallback_ms / 1000
            self._suggested[mq] = MASTER_ID
            return
        if broker_id == MASTER_ID:
            self._master_down_until.pop(mq.broker_name, None)
        try:
            self._suggested[mq] = int(response.fields.get("suggestWhichBrokerId", MASTER_ID))
        except ValueError:
            self._suggested[mq] = MASTER_ID

    def _endpoint(self, mq: MessageQueue) -> str:
        route = self.routes.get(mq.topic)
        endpoint = route.master_endpoint(mq.broker_name) if route else None
        if endpoint is None:
            route = self.routes.get(mq.topic, refresh=True)
            endpoint = route.master_endpoint(mq.broker_name) if route else None
        if endpoint is None:
            raise NoRouteError(f"no live master for {mq.broker_name} of topic {mq.topic}")
        return endpoint

    def queues(self, topic: str) -> list[MessageQueue]:
        route = self.routes.get(topic)
        if route is None:
            raise NoRouteError(f"topic {topic} has no route")
        return route.subscribe_queues()


class PullConsumer(_QueueClient):
    """Reads a queue from an offset the application chooses (RocketMQ's DefaultMQPullConsumer)."""

    def __init__(self, group: str = "DEFAULT_CONSUMER", namesrv=None, config: ClientConfig | None = None):
        super().__init__(namesrv, config)
        problem = name_problem("consumer group", group)
        if problem:
            raise ValueError(problem)
        self.group = group

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str | MessageSelector = "*",
             suspend_ms: int = 0, timeout_ms: int | None = None) -> PullResult:
        """Messages of ``mq`` from ``offset`` that match ``expression`` (a tag expression or a MessageSelector)."""
        self._check_open()
        selector = MessageSelector.of(expression)
        endpoint, broker_id = self._pull_endpoint(mq)
        timeout_ms = (timeout_ms or self.cfg.request_timeout_ms) + suspend_ms
        request = broker_api.pull_request(self.group, mq, offset, max_nums, selector.expression, suspend_ms,
                                          expression_type=selector.expression_type)
        try:
            response = self.rpc.call(endpoint, request, timeout_ms)
        except TransportError:
            self._pulled(mq, broker_id)
            raise
        self._pulled(mq, broker_id, response)
        return broker_api.pull_result(response, mq, endpoint, selector.tags_to_recheck())

    def committed_offset(self, mq: MessageQueue) -> int | None:
        return broker_api.query_consumer_offset(self.rpc, self._endpoint(mq), self.group, mq)

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        broker_api.update_consumer_offset(self.rpc, self._commit_endpoint(mq)[0], self.group, mq, offset)

    def min_offset(self, mq: MessageQueue) -> int:
        return broker_api.min_offset(self.rpc, self._endpoint(mq), mq)

    def max_offset(self, mq: MessageQueue) -> int:
        return broker_api.max_offset(self.rpc, self._endpoint(mq), mq)


Listener = Callable[[list[MessageExt]], "ConsumeStatus | bool | None"]


class PushConsumer(_QueueClient):
    """A member of a consumer group (RocketMQ's DefaultMQPushConsumer), clustering or broadcasting.

    ``allocate``: a strategy of ``allocation.py`` or its RocketMQ name ("AVG", "AVG_BY_CIRCLE",
    "CONSISTENT_HASH"); ``cached_messages_max`` / ``cached_bytes_max``: the per-queue flow control
    caps, by default the config's ``pull_threshold_for_queue`` / ``pull_threshold_size_for_queue_bytes``;
    ``consume_threads``: the pool the listener runs on, or 0 to run it on the thread that received the
    pull, with no hand-off (``consume_service.py``: lower latency, for listeners that return quickly;
    not for orderly consumption). With a pool, batches still run on that thread while the pool is idle
    and the listener has lately been quick (``statistics()["inline_batches"]``).
    """

    def __init__(self, group: str, namesrv=None, config: ClientConfig | None = None, *,
                 consume_threads: int = 4, consume_batch_max: int = 32, cached_messages_max: int | None = None,
                 cached_bytes_max: int | None = None, allocate=allocate_average, reconsume_delay_s: float = 1.0,
                 on_commit: Callable[[MessageQueue, int], None] | None = None,
                 on_queue_start: Callable[[MessageQueue, int], None] | None = None,
                 max_reconsume_times: int = RECONSUME_TIMES_MAX_DEFAULT, message_model: str = CLUSTERING,
                 clock: Clock = SYSTEM_CLOCK):
        super().__init__(namesrv, config, clock)
        problem = name_problem("consumer group", group)
        if problem:
            raise ValueError(problem)
        if consume_threads < 0:
            raise ValueError(f"consume_threads must be >= 0, not {consume_threads}")
        self.group = group
        self.subscriptions: dict[str, str] = {}  # topic -> expression
        self._selectors: dict[str, MessageSelector] = {}  # topic -> its subscription, as given
        self._thread: threading.Thread | None = None
        self.listener: Listener | None = None
        self._orderly: OrderlyService | None = None  # set by register_message_listener_orderly
        if message_model not in (CLUSTERING, BROADCASTING):
            raise ValueError(f"message_model must be {CLUSTERING} or {BROADCASTING}, not {message_model!r}")
        self.message_model = message_model
        self.allocate = allocation_strategy(allocate)
        self.consume_batch_max = consume_batch_max
        self.cached_messages_max = cached_messages_max or self.cfg.pull_threshold_for_queue
        self.cached_bytes_max = cached_bytes_max or self.cfg.pull_threshold_size_for_queue_bytes
        # Remote (clustering) or a local file (broadcasting, opened at start()).
        self.offsets: RemoteBrokerOffsets | LocalFileOffsets = RemoteBrokerOffsets(self, group, on_commit)
        self.flow_control_pauses = 0
        self.offset_resets = 0
        self._resets: list[tuple[str, dict[MessageQueue, int]]] = []  # (topic, offsets) from brokers
        self._resets_lock = threading.Lock()
        self.reconsume_delay_s = reconsume_delay_s
        # Told of every offset the broker accepted (a checker's record of what was promised).
        self.on_commit = on_commit
        # Told when this member starts reading a queue, and from which offset (a checker's record).
        self.on_queue_start = on_queue_start
        # After this many failed deliveries a message goes to %DLQ%<group> (RocketMQ's 16).
        self.max_reconsume_times = max_reconsume_times
        self.sent_back = 0
        self._consume_threads = consume_threads
        self.pull_service = PullService(self)
        self.rebalancer = Rebalancer(self)
        self.consume_service: ConsumeService | None = None  # its threads start with start()
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._queues_lock = threading.Lock()
        self._stop = threading.Event()
        self._members: dict[str, list[str]] = {}
        self._rebalance_now = threading.Event()
        self.rpc.server_request_handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] = \
            lambda request: self._rebalance_now.set()
        self.rpc.server_request_handlers[RequestCode.RESET_CONSUMER_CLIENT_OFFSET] = self._on_reset_offset
        self.rpc.server_request_handlers[RequestCode.GET_CONSUMER_RUNNING_INFO] = \
            lambda request: answer_running_info(self, request)
        self.rpc.server_request_handlers[RequestCode.CONSUME_MESSAGE_DIRECTLY] = \
            lambda request: answer_consume_directly(self, request)
        self.started_ms = 0
        self.consumed = 0
        self.consume_failures = 0
        self.rebalances = 0

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic``'s messages that match a tag expression ("*", "TagA || TagB") or a
        MessageSelector (``MessageSelector.by_sql(...)``); the brokers check it at start()."""
        problem = name_problem("topic", topic)
        if problem:
            raise ValueError(problem)
        selector = MessageSelector.of(expression)
        self.subscriptions[topic] = selector.expression
        self._selectors[topic] = selector

    def register_listener(self, listener: Listener) -> None:
        self.listener = listener

    def register_message_listener_orderly(
            self, listener: OrderlyListener, *,
            suspend_current_queue_time_ms: int = SUSPEND_CURRENT_QUEUE_TIME_MS_DEFAULT,
            max_reconsume_times: int = ORDERLY_RECONSUME_TIMES_MAX) -> None:
        """Consume orderly (``orderly.py``): each queue locked at its broker, read by one thread
        at a time in offset order; ``listener(messages, context)`` answers ConsumeOrderlyStatus, and
        a failed batch is retried in place after ``suspend_current_queue_time_ms``."""
        self._orderly = OrderlyService(self, listener, suspend_current_queue_time_ms, max_reconsume_times)
        self.listener = listener

    def start(self) -> None:
        if self.listener is None or not self.subscriptions:
            raise ClientError("subscribe to a topic and register a listener before start()")
        if self._orderly is not None and self._consume_threads == 0:
            raise ClientError("orderly consumption runs each queue's line on a consume thread: "
                              "consume_threads must be >= 1")
        self.started_ms = self.clock.now_ms()
        if self.message_model == BROADCASTING:
            path = local_offset_store_path(self.cfg.local_offset_store_dir,
                                           store_id(self.client_id, self.cfg.instance_name), self.group)
            self.offsets = LocalFileOffsets(self, path)
        else:
            # Failed messages come back through the group's retry topic (the broker makes it on
            # our first heartbeat); every member reads it, as RocketMQ's copySubscription does
            # (for clustering only).
            self.subscriptions.setdefault(retry_topic(self.group), "*")
        self.consume_service = ConsumeService(self, self._consume_threads)
        self._executor = self.consume_service.executor  # the orderly service runs its lines here too
        self._heartbeat_all(refusals_raise=True)  # a subscription a broker refuses fails start()
        self._rebalance()
        # Published once started: a listener already running on the I/O thread may call shutdown(),
        # which must not join a thread not started yet (it found one "cannot join" under load).
        thread = threading.Thread(target=self._background, name=f"rebalance-{self.group}", daemon=True)
        thread.start()
        self._thread = thread

    def shutdown(self) -> None:
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:  # None: start() was refused
            self._thread.join(timeout=5)
        with self._queues_lock:
            queues = list(self._queues.values())
            self._queues.clear()
        for pq in queues:
            pq.dropped = True
        if self.consume_service is not None:  # not before start()
            self.consume_service.shutdown()
        for pq in queues:
            self._commit(pq, force=True)
        if self._orderly is not None:
            self._orderly.shutdown(queues)  # the locks go back once the offsets are in
        self.offsets.close()
        for endpoint in self._broker_endpoints().values():
            try:
                broker_api.unregister_client(self.rpc, endpoint, self.client_id, consumer_group=self.group)
            except (ClientError, TransportError) as exc:
                log.info("unregister from %s skipped: %s", endpoint, exc)
        super().shutdown()

    def assigned_queues(self, include_retry: bool = False) -> set[MessageQueue]:
        """The queues this member reads now; its share of the group's retry topic only if asked."""
        with self._queues_lock:
            return {q for q in self._queues if include_retry or not q.topic.startswith(RETRY_TOPIC_PREFIX)}

    def statistics(self) -> dict:
        return {"consumed": self.consumed, "consume_failures": self.consume_failures, "sent_back": self.sent_back,
                "assigned_queues": len(self._queues), "rebalances": self.rebalances,
                "cached": sum(pq.cached() for pq in list(self._queues.values())),
                "cached_bytes": sum(pq.cached_bytes for pq in list(self._queues.values())),
                "flow_control_pauses": self.flow_control_pauses, "offset_resets": self.offset_resets,
                "inline_batches": self.consume_service.inline_batches if self.consume_service else 0}

    # ----------------------------------------------------------- background

    def _background(self) -> None:
        cfg = self.cfg
        now = self.clock.monotonic()
        next_heartbeat = now + cfg.client_heartbeat_interval_ms / 1000
        next_rebalance = now + cfg.rebalance_interval_ms / 1000
        next_commit = now + cfg.consumer_offset_commit_interval_ms / 1000
        while not self._stop.wait(0.05):
            now = self.clock.monotonic()
            try:
                self.pull_service.resume_paused(now)
                if now >= next_heartbeat:
                    next_heartbeat = now + cfg.client_heartbeat_interval_ms / 1000
                    self._heartbeat_all()
                self._apply_offset_resets()
                if now >= next_rebalance or self._rebalance_now.is_set():
                    # A member joined or left (the broker said so), or the periodic check is due.
                    self._rebalance_now.clear()
                    next_rebalance = now + cfg.rebalance_interval_ms / 1000
                    self._rebalance()
                if now >= next_commit:
                    next_commit = now + cfg.consumer_offset_commit_interval_ms / 1000
                    for pq in list(self._queues.values()):
                        self._commit(pq)
                    self.offsets.persist()
            except (ClientError, TransportError) as exc:
                log.warning("consumer %s background work failed, will retry: %s", self.group, exc)
            except Exception:
                log.exception("consumer %s background work failed", self.group)

    def _broker_endpoints(self) -> dict[str, str]:
        return self.routes.all_broker_endpoints()

    def _heartbeat_all(self, refusals_raise: bool = False) -> None:
        for topic in self.subscriptions:
            try:
                self.routes.get(topic)
            except NoRouteError:
                pass
        data = [{"groupName": self.group, "consumeType": "CONSUME_PASSIVELY", "messageModel": self.message_model,
                 "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                 "subscriptionDataSet": [
                     {"topic": t, "subString": e, "expressionType": self._selector(t).expression_type}
                     for t, e in self.subscriptions.items()]}]
        for endpoint in self._broker_endpoints().values():
            try:
                broker_api.heartbeat(self.rpc, endpoint, self.client_id, data, [])
            except BrokerError as exc:
                if refusals_raise:
                    raise  # e.g. SUBSCRIPTION_PARSE_FAILED with the broker's reason
                log.warning("heartbeat to %s refused: %s", endpoint, exc)
            except (ClientError, TransportError) as exc:
                log.warning("heartbeat to %s failed: %s", endpoint, exc)

    def _selector(self, topic: str) -> MessageSelector:
        """``topic``'s subscription; one set in ``subscriptions`` directly (the retry topic's) is a tag expression."""
        expression = self.subscriptions.get(topic, SUBSCRIBE_ALL)
        selector = self._selectors.get(topic)
        if selector is None or selector.expression != expression:
            selector = self._selectors[topic] = MessageSelector.by_tag(expression)
        return selector

    def _rebalance(self) -> None:
        self.rebalancer.rebalance()

    @property
    def local_offsets(self) -> LocalOffsetStore | None:
        """A broadcasting member's own offset file; None in a clustering group."""
        return self.offsets.store if isinstance(self.offsets, LocalFileOffsets) else None

    def _commit(self, pq: ProcessQueue, force: bool = False, handing_over: bool = False) -> None:
        self.offsets.commit(pq, force, handing_over)

    def _pull(self, pq: ProcessQueue) -> None:
        self.pull_service.pull(pq)

    def _pause(self, pq: ProcessQueue, delay_s: float) -> None:
        self.pull_service.pause(pq, delay_s)

    # ----------------------------------------------------------- offset reset

    def _on_reset_offset(self, request) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (on the I/O thread): queued for the background thread,
        which also commits, so no commit of the old position can follow the reset."""
        if request.fields.get("group") != self.group:
            return
        try:
            offsets = offset_table_from_reset_body(request.body)
        except ValueError as exc:
            log.warning("unreadable offset reset for %s: %s", self.group, exc)
            return
        with self._resets_lock:
            self._resets.append((request.fields.get("topic", ""), offsets))
        self._rebalance_now.set()

    def _apply_offset_resets(self) -> None:
        """Drop the reset queues' process queues and record their new offsets (locally, or on the
        broker for the queues this member holds); the rebalance that follows restarts them there."""
        with self._resets_lock:
            resets, self._resets = self._resets, []
        for topic, offsets in resets:
            for mq, offset in sorted(offsets.items()):
                if mq.topic != topic:
                    continue
                with self._queues_lock:
                    pq = self._queues.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    if self._orderly is not None:
                        self._orderly.forget(pq)  # its running batch ends before the queue restarts
                self.offsets.reset(mq, offset, held=pq is not None)
            self.offset_resets += 1
            log.info("consumer %s of %s: offsets of %s reset to %s", self.client_id, self.group, topic,
                     {f"{mq.broker_name}:{mq.queue_id}": o for mq, o in sorted(offsets.items())})


__all__ = ["PullConsumer", "PushConsumer", "ConsumeStatus", "MessageSelector", "PullResult", "PullStatus", "Sequence"]

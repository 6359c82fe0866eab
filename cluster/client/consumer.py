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

import enum
import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Sequence

from cluster.filter.expressions import SUBSCRIBE_ALL
from cluster.client import broker_api
from cluster.client.allocation import allocate_average, strategy as allocation_strategy
from cluster.client.base import ClientBase
from cluster.client.broker_api import PullResult, PullStatus
from cluster.client.message_selector import MessageSelector
from cluster.client.message import MessageExt, MessageQueue, restore_retried_topic
from cluster.client.orderly import (ORDERLY_RECONSUME_TIMES_MAX, SUSPEND_CURRENT_QUEUE_TIME_MS_DEFAULT,
                                    OrderlyListener, OrderlyService)
from cluster.client.offset_store import (LocalOffsetStore, local_offset_store_path, offset_table_from_rows,
                                         store_id)
from cluster.config import ClientConfig, name_problem
from cluster.errors import BrokerError, ClientError, NoRouteError
from cluster.client.routes import normalize_endpoint
from cluster.protocol import MASTER_ID, RETRY_TOPIC_PREFIX, RequestCode, retry_topic

RECONSUME_TIMES_MAX_DEFAULT = 16
# RocketMQ's MessageModel.
CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
from cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class _QueueClient(ClientBase):
    """Route lookups shared by both consumers, with read-from-slave (RocketMQ's PullAPIWrapper).

    Each pull answer's ``suggestWhichBrokerId`` is remembered per queue and picks the broker of
    the queue's next pull (``recalculatePullFromWhichNode``): a master sends a consumer reading far
    behind its end to a slave, a slave sends it back once it has caught up. A failed pull from a
    master marks that broker name's master down for ``slave_fallback_ms``: its queues are then
    pulled from a slave, and offsets committed there (``_commit_endpoint``).
    """

    def __init__(self, namesrv=None, config: ClientConfig | None = None):
        super().__init__(namesrv, config)
        self._suggested: dict[MessageQueue, int] = {}
        self._master_down_until: dict[str, float] = {}

    def _master_down(self, broker_name: str) -> bool:
        return self._master_down_until.get(broker_name, 0.0) > time.monotonic()

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
                self._master_down_until[mq.broker_name] = time.monotonic() + self.cfg.slave_fallback_ms / 1000
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


class _ProcessQueue:
    """One assigned queue: where to pull next and which pulled batches are still being consumed.

    Tracked per consume batch (keyed by its first queue offset), not per message: the
    commit point is the first offset of the oldest unfinished batch.
    """

    def __init__(self, mq: MessageQueue, next_offset: int):
        self.mq = mq
        self.next_offset = next_offset
        self.in_flight: dict[int, int] = {}  # first queue offset of a batch -> its message count
        self.lock = threading.Lock()
        self.dropped = False
        self.last_committed = next_offset
        # The master endpoint that took last_committed: a different master (failover) gets it again.
        self.committed_to: str | None = None
        self.cached_count = 0
        self.cached_bytes = 0  # bodies of the cached messages (RocketMQ's ProcessQueue.msgSize)
        self.pull_in_flight = False  # at most one pull per queue, or offsets would interleave
        self.flow_paused = False  # held back by the cached messages or bytes cap until consumption drains

    def add(self, messages: list[MessageExt]) -> None:
        with self.lock:
            self.in_flight[messages[0].queue_offset] = len(messages)
            self.cached_count += len(messages)
            self.cached_bytes += sum(len(m.body) for m in messages)

    def done(self, messages: list[MessageExt]) -> None:
        with self.lock:
            if self.in_flight.pop(messages[0].queue_offset, None) is not None:
                self.cached_count -= len(messages)
                self.cached_bytes -= sum(len(m.body) for m in messages)

    def commit_point(self) -> int:
        with self.lock:
            return min(self.in_flight) if self.in_flight else self.next_offset

    def cached(self) -> int:
        return self.cached_count


Listener = Callable[[list[MessageExt]], "ConsumeStatus | bool | None"]


class PushConsumer(_QueueClient):
    """A member of a consumer group (RocketMQ's DefaultMQPushConsumer), clustering or broadcasting.

    ``allocate``: a strategy of ``allocation.py`` or its RocketMQ name ("AVG", "AVG_BY_CIRCLE",
    "CONSISTENT_HASH"); ``cached_messages_max`` / ``cached_bytes_max``: the per-queue flow control
    caps, by default the config's ``pull_threshold_for_queue`` / ``pull_threshold_size_for_queue_bytes``.
    """

    def __init__(self, group: str, namesrv=None, config: ClientConfig | None = None, *,
                 consume_threads: int = 4, consume_batch_max: int = 32, cached_messages_max: int | None = None,
                 cached_bytes_max: int | None = None, allocate=allocate_average, reconsume_delay_s: float = 1.0,
                 on_commit: Callable[[MessageQueue, int], None] | None = None,
                 on_queue_start: Callable[[MessageQueue, int], None] | None = None,
                 max_reconsume_times: int = RECONSUME_TIMES_MAX_DEFAULT, message_model: str = CLUSTERING):
        super().__init__(namesrv, config)
        problem = name_problem("consumer group", group)
        if problem:
            raise ValueError(problem)
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
        # Broadcasting: this member's own offsets, in a local file (opened at start()).
        self.local_offsets: LocalOffsetStore | None = None
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
        self._queues: dict[MessageQueue, _ProcessQueue] = {}
        self._queues_lock = threading.Lock()
        self._stop = threading.Event()
        self._paused: list[tuple[float, _ProcessQueue]] = []
        self._paused_lock = threading.Lock()
        self._members: dict[str, list[str]] = {}
        self._rebalance_now = threading.Event()
        self.rpc.server_request_handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] = \
            lambda request: self._rebalance_now.set()
        self.rpc.server_request_handlers[RequestCode.RESET_CONSUMER_CLIENT_OFFSET] = self._on_reset_offset
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
        if self.message_model == BROADCASTING:
            path = local_offset_store_path(self.cfg.local_offset_store_dir,
                                           store_id(self.client_id, self.cfg.instance_name), self.group)
            self.local_offsets = LocalOffsetStore(path).open()
        else:
            # Failed messages come back through the group's retry topic (the broker makes it on
            # our first heartbeat); every member reads it, as RocketMQ's copySubscription does
            # (for clustering only).
            self.subscriptions.setdefault(retry_topic(self.group), "*")
        self._executor = ThreadPoolExecutor(self._consume_threads, thread_name_prefix=f"consume-{self.group}")
        self._heartbeat_all(refusals_raise=True)  # a subscription a broker refuses fails start()
        self._rebalance()
        self._thread = threading.Thread(target=self._background, name=f"rebalance-{self.group}", daemon=True)
        self._thread.start()

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
        if hasattr(self, "_executor"):  # not before start()
            self._executor.shutdown(wait=True)
        for pq in queues:
            self._commit(pq, force=True)
        if self._orderly is not None:
            self._orderly.shutdown(queues)  # the locks go back once the offsets are in
        if self.local_offsets is not None:
            self.local_offsets.close()
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
                "flow_control_pauses": self.flow_control_pauses, "offset_resets": self.offset_resets}

    # ----------------------------------------------------------- background

    def _background(self) -> None:
        cfg = self.cfg
        now = time.monotonic()
        next_heartbeat = now + cfg.client_heartbeat_interval_ms / 1000
        next_rebalance = now + cfg.rebalance_interval_ms / 1000
        next_commit = now + cfg.consumer_offset_commit_interval_ms / 1000
        while not self._stop.wait(0.05):
            now = time.monotonic()
            try:
                self._resume_paused(now)
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
                    if self.local_offsets is not None:
                        self.local_offsets.persist()
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
        wanted: set[MessageQueue] = set()
        with self._queues_lock:
            held = set(self._queues)
        for topic in self.subscriptions:
            try:
                route = self.routes.get(topic)
            except NoRouteError:
                route = None
            if route is None:
                continue
            queues = route.subscribe_queues()
            if self.message_model == BROADCASTING:
                wanted.update(queues)  # every member reads every queue
                continue
            members = self._group_members(route)
            if self.client_id not in members:
                # The broker does not know us (it restarted, or our heartbeat is late): register
                # now, and keep this topic's queues until the member list includes us again.
                # Dropping them would hand the queues to nobody and stall them.
                log.info("consumer %s: not in group %s's member list %s; heartbeating", self.client_id,
                         self.group, members)
                self._heartbeat_all()   # the broker's join notice brings the next rebalance
                wanted.update(q for q in held if q.topic == topic)
                continue
            if members != self._members.get(topic):
                log.info("consumer %s: group %s members of %s now %s", self.client_id, self.group, topic, members)
                self._members[topic] = members
            wanted.update(self.allocate(queues, members, self.client_id))
        with self._queues_lock:
            current = set(self._queues)
        removed = current - wanted
        added = wanted - current
        if self._orderly is not None and added:
            added = self._orderly.lock(added)  # only what the broker locked for us; the rest later
        if not (removed or added):
            return
        self.rebalances += 1
        for mq in removed:
            with self._queues_lock:
                pq = self._queues.pop(mq, None)
            if pq is not None:
                pq.dropped = True
                self._commit(pq, force=True, handing_over=True)
                if self._orderly is not None:
                    self._orderly.release(pq)  # after its running batch: commit, then unlock
        for mq in sorted(added):
            try:
                pq = _ProcessQueue(mq, self._start_offset(mq))
                if self.on_queue_start is not None:
                    self.on_queue_start(mq, pq.next_offset)
            except (ClientError, TransportError) as exc:
                log.warning("cannot start %s: %s", mq, exc)
                continue
            with self._queues_lock:
                self._queues[mq] = pq
            self._pull(pq)

    def _group_members(self, route) -> list[str]:
        for name in sorted(route.broker_addrs):
            endpoint = route.master_endpoint(name)
            if endpoint is None:
                continue
            try:
                return sorted(broker_api.consumer_ids(self.rpc, endpoint, self.group))
            except (ClientError, TransportError) as exc:
                log.info("member list from %s failed: %s", endpoint, exc)
        return []

    def _start_offset(self, mq: MessageQueue) -> int:
        endpoint = self._endpoint(mq)
        if self.local_offsets is not None:
            offset = self.local_offsets.read(mq)
            if offset is None:  # CONSUME_FROM_LAST_OFFSET, for this member alone
                offset = broker_api.max_offset(self.rpc, endpoint, mq)
                self.local_offsets.update(mq, offset)
            return offset
        offset = broker_api.query_consumer_offset(self.rpc, endpoint, self.group, mq)
        if offset is None:  # CONSUME_FROM_LAST_OFFSET for a group new to a queue with history
            offset = broker_api.max_offset(self.rpc, endpoint, mq)
            # Recorded at once: a member that takes this queue over before our first commit
            # would otherwise start from a later maximum and skip what arrived in between.
            broker_api.update_consumer_offset(self.rpc, endpoint, self.group, mq, offset)
            self._committed(mq, offset)
        return offset

    def _committed(self, mq: MessageQueue, offset: int) -> None:
        if self.on_commit is not None:
            try:
                self.on_commit(mq, offset)
            except Exception:
                log.exception("on_commit callback failed for %s", mq)

    def _commit(self, pq: _ProcessQueue, force: bool = False, handing_over: bool = False) -> None:
        """Send the queue's commit point to the broker.

        ``handing_over``: the queue was just given to another member, which may have committed
        further already; then never move the broker's offset back (that would redeliver).
        """
        point = pq.commit_point()
        if self.local_offsets is not None:
            if point != pq.last_committed or force:
                self.local_offsets.update(pq.mq, point)
                pq.last_committed = point
            return
        broker_id = MASTER_ID
        try:
            endpoint, broker_id = self._commit_endpoint(pq.mq)
            # A new master (failover) may lack the last commits the old one took (a slave copies
            # offsets every second): it gets the commit point again even if it has not moved.
            new_master = broker_id == MASTER_ID and pq.committed_to not in (None, endpoint)
            if point == pq.last_committed and not force and not new_master:
                return
            if handing_over:
                current = broker_api.query_consumer_offset(self.rpc, endpoint, self.group, pq.mq)
                if current is not None and current > point:
                    return
            taken_by = broker_api.update_consumer_offset(self.rpc, endpoint, self.group, pq.mq, point)
            if broker_id != MASTER_ID or taken_by != MASTER_ID:
                # The slave keeps it while the master is down; not final until the master has it,
                # so every commit interval sends it again (to the master once it answers pulls).
                # Sent to the route's master but taken by a slave: the group failed over and this
                # route is stale.
                if taken_by != MASTER_ID:
                    self.routes.suspect(pq.mq.broker_name)
                return
            pq.last_committed = point
            pq.committed_to = endpoint
            self._committed(pq.mq, point)
        except TransportError as exc:
            log.warning("offset commit for %s failed: %s", pq.mq, exc)
            if broker_id == MASTER_ID:   # the next commits (and pulls) go to a slave for a while
                self._pulled(pq.mq, MASTER_ID)
        except ClientError as exc:
            log.warning("offset commit for %s failed: %s", pq.mq, exc)

    # ----------------------------------------------------------- pulling

    def _pull(self, pq: _ProcessQueue) -> None:
        if pq.dropped or self._stop.is_set():
            return
        if self._orderly is not None and self._orderly.hold_pull(pq):
            return  # no valid lock on its queue
        with pq.lock:
            if pq.pull_in_flight:
                return
            if pq.cached_count >= self.cached_messages_max or pq.cached_bytes >= self.cached_bytes_max:
                # Flow control: consumption resumes the pull as soon as the cache drains below half
                # the caps; the timed retry is only a fallback (RocketMQ waits a fixed 50 ms).
                if not pq.flow_paused:
                    self.flow_control_pauses += 1
                pq.flow_paused = True
                paused = True
            else:
                pq.flow_paused = False
                pq.pull_in_flight = True
                paused = False
        if paused:
            self._pause(pq, 0.05)
            return
        try:
            endpoint, broker_id = self._pull_endpoint(pq.mq)
        except ClientError as exc:
            log.warning("no broker for %s: %s", pq.mq, exc)
            pq.pull_in_flight = False
            self._pause(pq, 1.0)
            return
        selector = self._selector(pq.mq.topic)
        request = broker_api.pull_request(self.group, pq.mq, pq.next_offset, self.cfg.pull_batch_count,
                                          selector.expression, self.cfg.pull_suspend_ms,
                                          expression_type=selector.expression_type)
        future = self.rpc.call_async(endpoint, request, self.cfg.pull_suspend_ms + self.cfg.request_timeout_ms)
        future.add_done_callback(lambda f: self._on_pulled(pq, endpoint, selector, f, broker_id))

    def _pause(self, pq: _ProcessQueue, delay_s: float) -> None:
        with self._paused_lock:
            self._paused.append((time.monotonic() + delay_s, pq))

    def _resume_paused(self, now: float) -> None:
        with self._paused_lock:
            due = [pq for t, pq in self._paused if t <= now]
            self._paused = [(t, pq) for t, pq in self._paused if t > now]
        for pq in due:
            self._pull(pq)

    def _on_pulled(self, pq: _ProcessQueue, endpoint: str, selector: MessageSelector, future: Future,
                   broker_id: int = 0) -> None:
        try:
            self._pulled(pq.mq, broker_id, None if future.exception() is not None else future.result())
            self._handle_pulled(pq, endpoint, selector, future)
        except Exception:
            # Whatever went wrong, the queue must not stay marked as pulling forever.
            log.exception("handling a pull of %s failed; pulling again shortly", pq.mq)
            pq.pull_in_flight = False
            self._pause(pq, 1.0)

    def _handle_pulled(self, pq: _ProcessQueue, endpoint: str, selector: MessageSelector, future: Future) -> None:
        if pq.dropped or self._stop.is_set():
            return
        exc = future.exception()
        if exc is not None:
            log.info("pull of %s failed, retrying: %s", pq.mq, exc)
            pq.pull_in_flight = False
            self._pause(pq, 0.5)
            return
        try:
            result = broker_api.pull_result(future.result(), pq.mq, endpoint, selector.tags_to_recheck())
        except ClientError as error:
            log.warning("pull of %s refused: %s", pq.mq, error)
            pq.pull_in_flight = False
            self._pause(pq, 1.0)
            return
        if result.status == PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", pq.next_offset, pq.mq, result.next_begin_offset)
        if result.messages:
            for i in range(0, len(result.messages), self.consume_batch_max):
                batch = result.messages[i:i + self.consume_batch_max]
                pq.add(batch)  # before next_offset moves: the commit point never passes unconsumed work
                if self._orderly is not None:
                    self._orderly.submit(pq, batch)  # into the queue's line, consumed in order
                else:
                    self._executor.submit(self._consume, pq, batch)
        pq.next_offset = result.next_begin_offset
        pq.pull_in_flight = False  # only now: a pull started earlier would reuse the old offset
        self._pull(pq)

    def _consume(self, pq: _ProcessQueue, messages: list[MessageExt]) -> None:
        if pq.dropped:
            return
        for m in messages:
            restore_retried_topic(m)
        try:
            status = self.listener(messages)
        except Exception:
            log.exception("listener of %s raised; the messages will be consumed again", self.group)
            status = ConsumeStatus.RECONSUME_LATER
        if status is False or status == ConsumeStatus.RECONSUME_LATER:
            self.consume_failures += len(messages)
            if self.message_model == BROADCASTING:
                # No retry topic in broadcasting: RocketMQ drops what failed, and so do we.
                log.warning("broadcasting consumer of %s dropped %d messages whose consumption failed",
                            self.group, len(messages))
                kept = []
            else:
                kept = [m for m in messages if not self._send_back(pq, m)]
            if kept:
                # At-least-once: what could not go back to the broker stays in flight (the
                # offset cannot pass it) and is consumed here again later.
                timer = threading.Timer(self.reconsume_delay_s, self._retry_consume, args=(pq, messages))
                timer.daemon = True
                timer.start()
                return
        pq.done(messages)
        self.consumed += len(messages)
        if pq.flow_paused and pq.cached() <= self.cached_messages_max // 2 \
                and pq.cached_bytes <= self.cached_bytes_max // 2:
            self._pull(pq)

    def _send_back(self, pq: _ProcessQueue, message: MessageExt) -> bool:
        """CONSUMER_SEND_MSG_BACK to the broker that holds ``message``: it returns through
        %RETRY%<group> after a growing delay, or goes to %DLQ%<group> at the maximum."""
        try:
            broker_api.send_back(self.rpc, self._endpoint(pq.mq), self.group, message, self.max_reconsume_times)
        except (ClientError, TransportError) as exc:
            log.warning("sending %s back to the broker failed (%s); it is retried here", message.msg_id, exc)
            return False
        self.sent_back += 1
        return True

    def _retry_consume(self, pq: _ProcessQueue, messages: list[MessageExt]) -> None:
        if not pq.dropped and not self._stop.is_set():
            try:
                self._executor.submit(self._consume, pq, messages)
            except RuntimeError:
                pass  # shutting down: the offset was not committed past them, so they return later

    # ----------------------------------------------------------- offset reset

    def _on_reset_offset(self, request) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (on the I/O thread): queued for the background thread,
        which also commits, so no commit of the old position can follow the reset."""
        if request.fields.get("group") != self.group:
            return
        try:
            offsets = offset_table_from_rows(json.loads(request.body or b"{}").get("offsetTable"))
        except (ValueError, KeyError, TypeError) as exc:
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
                if self.local_offsets is not None:
                    self.local_offsets.update(mq, offset)
                elif pq is not None:
                    try:
                        broker_api.update_consumer_offset(self.rpc, self._endpoint(mq), self.group, mq, offset)
                        self._committed(mq, offset)
                    except (ClientError, TransportError) as exc:
                        log.warning("offset reset commit for %s failed (the broker set it already): %s", mq, exc)
            self.offset_resets += 1
            log.info("consumer %s of %s: offsets of %s reset to %s", self.client_id, self.group, topic,
                     {f"{mq.broker_name}:{mq.queue_id}": o for mq, o in sorted(offsets.items())})


__all__ = ["PullConsumer", "PushConsumer", "ConsumeStatus", "MessageSelector", "PullResult", "PullStatus", "Sequence"]

"""Lite topics' subscriptions and lifetimes (RocketMQ 5.5, RIP-83; Apache's LiteSubscriptionRegistryImpl
and AbstractLiteLifecycleManager, kept by the proxy here).

A Lite consumer (LITE_PUSH_CONSUMER, LITE_SIMPLE_CONSUMER) binds one parent topic of
``message.type=LITE`` and subscribes lite topics of it with SyncLiteSubscription: PARTIAL_ADD and
PARTIAL_REMOVE change some, COMPLETE_ADD replaces its whole set (the 5.x clients send it every 30 s,
so a restarted proxy relearns every subscription within 30 s), COMPLETE_REMOVE drops it all. A client
that leaves (NotifyClientTermination, expiry) loses its subscriptions.

Many and short-lived: a lite topic costs no queue, file or task of its own. Its messages share the
parent topic's queues (``message/lite_topics.py`` names it in each message); here it is one dict
entry of its last send time, and a subscription one entry in two dicts. Bounds, as Apache's:
``lite_subscription_quota`` lite topics a client (LITE_SUBSCRIPTION_QUOTA_EXCEEDED, the quota also
answered in the client's settings), ``max_lite_subscriptions`` in all (Apache's broker
maxLiteSubscriptionCount, the same code), ``max_lite_topics`` lite topics alive (a send that would
start one more: LITE_TOPIC_QUOTA_EXCEEDED, Apache's LMQ quota). A lite topic with no send for its
parent's ``lite.topic.expiration`` minutes is forgotten (``expire``); its subscribers are told
with NotifyUnsubscribeLiteCommand on their Telemetry stream (Apache drops such a subscription
without a word and its client re-adds it at its next full sync).
Everything runs on the proxy's loop (no locks).
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.status import ProxyError

log = logging.getLogger(__name__)

LITE_CONSUMER_TYPES = (pb.LITE_PUSH_CONSUMER, pb.LITE_SIMPLE_CONSUMER)


class ClientLite:
    """One Lite consumer's binding: its group, parent topic and lite topics."""

    __slots__ = ("group", "topic", "lite_topics")

    def __init__(self, group: str, topic: str):
        self.group, self.topic = group, topic
        self.lite_topics: set[str] = set()


class LiteSubscriptions:
    def __init__(self, per_client: int, total: int, max_topics: int, clock=time.monotonic):
        self.per_client, self.total, self.max_topics = per_client, total, max_topics
        self.clock = clock
        self._clients: dict[str, ClientLite] = {}
        # (parent topic, lite topic) -> {subscribed client id: its group}.
        self._subscribers: dict[tuple[str, str], dict[str, str]] = {}
        self._count = 0
        # (parent topic, lite topic) -> when it was last sent to (the clock's seconds).
        self._last_send: dict[tuple[str, str], float] = {}

    def __len__(self) -> int:
        return self._count

    @property
    def lite_topic_count(self) -> int:
        return len(self._last_send)

    # ------------------------------------------------------------ subscriptions

    def sync(self, client_id: str, action: int, group: str, topic: str, lite_topics: set[str]) -> None:
        """Applies one SyncLiteSubscription; ProxyError (quota) leaves what was added before it."""
        if action == pb.COMPLETE_REMOVE:
            self.drop_client(client_id)
            return
        binding = self._clients.get(client_id)
        if binding is not None and (binding.group, binding.topic) != (group, topic):
            self.drop_client(client_id)   # a client binds one group and parent topic: the newest wins
            binding = None
        if binding is None:
            binding = self._clients[client_id] = ClientLite(group, topic)
        if action == pb.PARTIAL_REMOVE:
            for lite in lite_topics:
                self._remove(client_id, binding, lite)
            return
        if action == pb.COMPLETE_ADD:
            for lite in binding.lite_topics - lite_topics:
                self._remove(client_id, binding, lite)
        for lite in sorted(lite_topics - binding.lite_topics):
            self._add(client_id, binding, lite)

    def _add(self, client_id: str, binding: ClientLite, lite: str) -> None:
        if len(binding.lite_topics) >= self.per_client:
            raise ProxyError(Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
                             f"lite subscription quota exceeded {self.per_client} (one client)")
        if self._count >= self.total:
            raise ProxyError(Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, f"lite subscription quota exceeded {self.total}")
        binding.lite_topics.add(lite)
        self._subscribers.setdefault((binding.topic, lite), {})[client_id] = binding.group
        self._count += 1

    def _remove(self, client_id: str, binding: ClientLite, lite: str) -> None:
        if lite not in binding.lite_topics:
            return
        binding.lite_topics.discard(lite)
        key = (binding.topic, lite)
        members = self._subscribers.get(key)
        if members is not None:
            members.pop(client_id, None)
            if not members:
                del self._subscribers[key]
        self._count -= 1

    def drop_client(self, client_id: str) -> None:
        binding = self._clients.pop(client_id, None)
        if binding is not None:
            for lite in list(binding.lite_topics):
                self._remove(client_id, binding, lite)

    def client_ids(self) -> list[str]:
        return list(self._clients)

    def lite_topics_of(self, client_id: str) -> frozenset[str]:
        binding = self._clients.get(client_id)
        return frozenset(binding.lite_topics) if binding is not None else frozenset()

    def subscribers(self, group: str, topic: str, lite: str) -> set[str]:
        members = self._subscribers.get((topic, lite))
        return {client_id for client_id, of in members.items() if of == group} if members else set()

    # ------------------------------------------------------------ lite topics' lifetimes

    def note_send(self, topic: str, lite: str) -> None:
        """A message for ``lite`` is about to be stored: LITE_TOPIC_QUOTA_EXCEEDED when it would be
        one lite topic more than ``max_topics``."""
        key = (topic, lite)
        if key not in self._last_send and len(self._last_send) >= self.max_topics:
            raise ProxyError(Code.LITE_TOPIC_QUOTA_EXCEEDED, f"lite topic quota exceeded {self.max_topics}")
        self._last_send[key] = self.clock()

    def parent_topics(self) -> set[str]:
        return {topic for topic, _lite in self._last_send}

    def expire(self, idle_s_of, now: float | None = None) -> list[tuple[str, str, set[str]]]:
        """Forgets every lite topic idle longer than ``idle_s_of(parent topic)`` (None: never) and
        drops its subscriptions; what was dropped: (parent topic, lite topic, client ids)."""
        now = self.clock() if now is None else now
        idle_limits: dict[str, float | None] = {}
        gone = []
        for (topic, lite), last in list(self._last_send.items()):
            if topic not in idle_limits:
                idle_limits[topic] = idle_s_of(topic)
            limit = idle_limits[topic]
            if limit is None or now - last <= limit:
                continue
            del self._last_send[(topic, lite)]
            clients = set(self._subscribers.get((topic, lite), ()))
            for client_id in clients:
                self._remove(client_id, self._clients[client_id], lite)
            gone.append((topic, lite, clients))
        return gone


def notify_unsubscribe(lite: str) -> service.TelemetryCommand:
    return service.TelemetryCommand(notify_unsubscribe_lite_command=service.NotifyUnsubscribeLiteCommand(
        lite_topic=lite))

"""SyncLiteSubscription and a Lite consumer's receives (RocketMQ 5.5's SyncLiteSubscriptionActivity and
PopLiteMessageProcessor, over the brokers' plain pops).

SyncLiteSubscription: the caller must have sent Lite consumer settings (else UNRECOGNIZED_CLIENT_TYPE),
name a valid group and a topic of ``message.type=LITE`` (a topic of another type: ILLEGAL_TOPIC), and
lite topics Apache's GrpcValidator takes (ILLEGAL_LITE_TOPIC); quotas in lite_subscriptions.py.

Receiving: a Lite consumer pops its group's parent topic like any consumer (consumer_service.py);
what the pop brings is sorted here by each message's lite topic. The receiver's own lite topics are
delivered; a lite topic another live member of the group subscribes is held for that member's next
receive (at most ``lite_held_max`` messages held, beyond that made visible again in 1 s; a held
message whose invisible time ran out is dropped here, the broker delivers it again); a lite topic
nobody in the group subscribes is acked, unseen (the group subscribed after it was sent, or not at
all: Apache's LMQ would keep it for a later subscriber until its TTL; here a group reads a lite topic
from its subscription on).
"""

from __future__ import annotations

import logging
import time
from collections import deque

from rocketbox.cluster import receipt_handle, topic_attributes
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.message.lite_topics import lite_topic_of
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.clients import ClientRegistry
from rocketbox.cluster.proxy.lite_subscriptions import LITE_CONSUMER_TYPES, LiteSubscriptions, notify_unsubscribe
from rocketbox.cluster.proxy.protos import Code, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import OK, ProxyError

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


class Sorted:
    """A pop's messages as a Lite receive sorts them."""

    __slots__ = ("mine", "unwanted", "overflow")

    def __init__(self):
        self.mine, self.unwanted, self.overflow = [], [], []


class LiteService:
    def __init__(self, settings: ProxySettings, gateway: BrokerGateway, registry: ClientRegistry):
        self.settings = settings
        self.gateway = gateway
        self.registry = registry
        self.subscriptions = LiteSubscriptions(settings.lite_subscription_quota, settings.max_lite_subscriptions,
                                               settings.max_lite_topics)
        # (group, parent topic, lite topic) -> popped messages waiting for a member subscribed to it.
        self._held: dict[tuple[str, str, str], deque] = {}
        self._held_count = 0

    def is_lite_client(self, client_id: str) -> bool:
        client = self.registry.get(client_id)
        return client is not None and client.client_type in LITE_CONSUMER_TYPES

    # ------------------------------------------------------------ SyncLiteSubscription

    async def sync_lite_subscription(self, call: Call, request: service.SyncLiteSubscriptionRequest
                                     ) -> service.SyncLiteSubscriptionResponse:
        if not self.is_lite_client(call.client_id):
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             "SyncLiteSubscription is for LITE_PUSH_CONSUMER and LITE_SIMPLE_CONSUMER clients")
        group = validation.consumer_group(request.group.name)
        topic = validation.topic(request.topic.name)
        await self.require_lite_topic(topic)
        lite_topics = {validation.lite_topic(lite, self.settings.max_lite_topic_size)
                       for lite in request.lite_topic_set}
        self.subscriptions.sync(call.client_id, request.action, group, topic, lite_topics)
        return service.SyncLiteSubscriptionResponse(status=OK)

    async def require_lite_topic(self, topic: str) -> dict:
        route = await self.gateway.existing_route(topic)
        attributes = ((await self.gateway.topic_config(topic, route)) or {}).get("attributes") or {}
        declared = topic_attributes.declared_message_type(attributes)
        if declared != topic_attributes.LITE:
            raise ProxyError(Code.ILLEGAL_TOPIC, f"topic {topic} is not a LITE topic (its message.type is "
                                                 f"{declared or 'undeclared'})")
        return attributes

    async def refuse_plain_receive(self, topic: str, route) -> None:
        """A LITE topic is read by known Lite consumers only: another receive (a plain consumer, or a
        client whose settings the proxy no longer has) would be handed every lite topic's messages."""
        attributes = ((await self.gateway.topic_config(topic, route)) or {}).get("attributes") or {}
        if topic_attributes.declared_message_type(attributes) == topic_attributes.LITE:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             f"topic {topic} is a LITE topic: it is received by LITE_PUSH_CONSUMER and "
                             f"LITE_SIMPLE_CONSUMER clients whose settings the proxy holds (send them again)")

    def client_left(self, client_id: str) -> None:
        self.subscriptions.drop_client(client_id)

    # ------------------------------------------------------------ receiving

    def take_held(self, client_id: str, group: str, topic: str, batch: int) -> list:
        """Messages held for this client's lite topics (whose handles are still good), up to ``batch``."""
        out = []
        for lite in self.subscriptions.lite_topics_of(client_id):
            line = self._held.get((group, topic, lite))
            while line and len(out) < batch:
                item = line.popleft()
                self._held_count -= 1
                if not _expired(item.handle):
                    out.append(item)
            if line is not None and not line:
                del self._held[(group, topic, lite)]
            if len(out) >= batch:
                break
        return out

    def sort(self, client_id: str, group: str, topic: str, popped: list) -> Sorted:
        mine = self.subscriptions.lite_topics_of(client_id)
        result = Sorted()
        for item in popped:
            lite = lite_topic_of(item.record.properties)
            if lite in mine:
                result.mine.append(item)
            elif lite is not None and self._live_subscriber(group, topic, lite):
                if self._held_count >= self.settings.lite_held_max:
                    result.overflow.append(item)
                else:
                    self._held.setdefault((group, topic, lite), deque()).append(item)
                    self._held_count += 1
            else:
                result.unwanted.append(item)
        return result

    def _live_subscriber(self, group: str, topic: str, lite: str) -> bool:
        return any(self.registry.get(c) is not None for c in self.subscriptions.subscribers(group, topic, lite))

    # ------------------------------------------------------------ housekeeping

    async def expire(self) -> int:
        """Forgets idle lite topics (their parent's lite.topic.expiration), tells their subscribers,
        drops the subscriptions of clients the client table no longer has and held messages whose
        handles ran out; the lite topics forgotten."""
        idle_s: dict[str, float | None] = {}
        for topic in self.subscriptions.parent_topics():
            try:
                route = await self.gateway.existing_route(topic)
                attributes = ((await self.gateway.topic_config(topic, route)) or {}).get("attributes") or {}
                ms = topic_attributes.lite_expiration_ms(attributes)
            except ProxyError:
                ms = None   # the cluster cannot say now: keep them until it can
            idle_s[topic] = None if ms is None else ms / 1000
        for client_id in self.subscriptions.client_ids():
            if self.registry.get(client_id) is None:   # made room for in the client table: gone
                self.subscriptions.drop_client(client_id)
        gone = self.subscriptions.expire(lambda topic: idle_s.get(topic))
        for _topic, lite, clients in gone:
            for client_id in clients:
                client = self.registry.get(client_id)
                if client is not None:
                    client.push(notify_unsubscribe(lite))
        for key in list(self._held):
            line = self._held[key]
            kept = deque(item for item in line if not _expired(item.handle))
            self._held_count -= len(line) - len(kept)
            if kept:
                self._held[key] = kept
            else:
                del self._held[key]
        if gone:
            log.info("forgot %d idle lite topic(s)", len(gone))
        return len(gone)


def _expired(handle: str) -> bool:
    try:
        return receipt_handle.decode(handle).expired(int(time.time() * 1000))
    except receipt_handle.InvalidReceiptHandle:
        return True

"""Live clients seen through heartbeats: who is in each consumer group, and what they subscribe."""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketbox.cluster.filter.expressions import parse_tags, tag_hashes_of
from rocketbox.cluster.remoting_format import LANGUAGES as LANGUAGE_NAMES


@dataclass
class ConsumerMember:
    client_id: str
    last_heartbeat_ms: int
    message_model: str = "CLUSTERING"
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression
    # The transport address the heartbeat came from: where NOTIFY_CONSUMER_IDS_CHANGED goes.
    peer: bytes | None = None
    # What mqadmin consumerConnection shows: the client's host, language and version ordinals,
    # and its consume type and where a new group starts (RocketMQ's enum names).
    address: str = ""
    language: int = 0
    version: int = 0
    consume_type: str = "CONSUME_PASSIVELY"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"


@dataclass
class ProducerMember:
    last_heartbeat_ms: int
    # Where CHECK_TRANSACTION_STATE goes; what mqadmin producerConnection shows (host:port).
    peer: bytes | None = None
    language: int = 0
    version: int = 0
    address: str = ""


# The C++ client sends these enums as ordinals, Java clients as names (protocol brief §5.1).
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
CONSUME_FROM_WHERE = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                      "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                      "CONSUME_FROM_TIMESTAMP")


def enum_name(value, names: tuple[str, ...], default: str) -> str:
    """A Java enum sent as its name or its ordinal, as its name."""
    text = str(value)
    if text.isdigit():
        return names[int(text)] if int(text) < len(names) else default
    return text if text in names else default


def subscription_data(topic: str, expression: str, version: int) -> dict:
    """RocketMQ's SubscriptionData of a tag expression."""
    return {"topic": topic, "subString": expression, "expressionType": "TAG",
            "tagsSet": sorted(parse_tags(expression) or ()), "codeSet": sorted(tag_hashes_of(expression) or ()),
            "subVersion": version, "classFilterMode": False}


@dataclass(frozen=True)
class Subscription:
    """One topic's subscription of a consumer group as its heartbeats registered it (SubscriptionData)."""
    expression: str
    expression_type: str | None   # None: RocketMQ's default, TAG
    sub_version: int


class ClientRegistry:
    def __init__(self, expiry_ms: int):
        self.expiry_ms = expiry_ms
        # group -> client id -> member
        self.groups: dict[str, dict[str, ConsumerMember]] = {}
        # group -> topic -> the subscription a pull without one of its own is served with (RocketMQ's
        # ConsumerGroupInfo.subscriptionTable: the Java push consumer sends no expression in its pulls)
        self.subscriptions: dict[str, dict[str, Subscription]] = {}
        # group -> client id -> member
        self.producers: dict[str, dict[str, ProducerMember]] = {}

    def heartbeat(self, heartbeat: dict, now_ms: int, peer: bytes | None = None,
                  origin: tuple[str, int, int] = ("", 0, 0)) -> set[str]:
        """Record a HEART_BEAT body (``origin``: the sender's address, host:port where the door knows
        the port, and its language and version ordinals); the consumer groups whose membership changed."""
        client_id = str(heartbeat.get("clientID", ""))
        changed = set()
        for consumer in heartbeat.get("consumerDataSet") or []:
            group = str(consumer.get("groupName", ""))
            members = self.groups.setdefault(group, {})
            if client_id not in members:
                changed.add(group)
            subs = {str(s.get("topic")): str(s.get("subString", "*"))
                    for s in consumer.get("subscriptionDataSet") or []}
            self._register_subscriptions(group, consumer.get("subscriptionDataSet") or [])
            model = consumer.get("messageModel", "CLUSTERING")
            if model in (0, "0"):
                model = "BROADCASTING"
            elif model in (1, "1"):
                model = "CLUSTERING"
            previous = members.get(client_id)
            members[client_id] = ConsumerMember(
                client_id, now_ms, str(model), subs, peer if peer is not None else (previous.peer if previous else None),
                *origin, enum_name(consumer.get("consumeType", 1), CONSUME_TYPES, CONSUME_TYPES[1]),
                enum_name(consumer.get("consumeFromWhere", 0), CONSUME_FROM_WHERE, CONSUME_FROM_WHERE[0]))
        for producer in heartbeat.get("producerDataSet") or []:
            group = self.producers.setdefault(str(producer.get("groupName", "")), {})
            previous = group.get(client_id)
            group[client_id] = ProducerMember(now_ms, peer if peer is not None else (previous.peer if previous else None),
                                              origin[1], origin[2], origin[0])
        return changed

    def _register_subscriptions(self, group: str, subscription_data: list) -> None:
        """RocketMQ's ConsumerGroupInfo.updateSubscription: a topic new to the group is added, a known one
        replaced only by a newer subVersion, and a topic this heartbeat no longer names is dropped."""
        table = self.subscriptions.setdefault(group, {})
        named = set()
        for data in subscription_data:
            topic = str(data.get("topic"))
            named.add(topic)
            try:
                version = int(data.get("subVersion") or 0)
            except (TypeError, ValueError):
                version = 0
            old = table.get(topic)
            if old is None or version > old.sub_version:
                expression_type = data.get("expressionType")
                table[topic] = Subscription(str(data.get("subString", "*")),
                                            None if expression_type is None else str(expression_type), version)
        for topic in [t for t in table if t not in named]:
            del table[topic]

    def subscription(self, group: str, topic: str) -> Subscription | None:
        """What ``group`` registered for ``topic`` by heartbeat; None when it registered nothing."""
        return self.subscriptions.get(group, {}).get(topic)

    def unregister(self, client_id: str, consumer_group: str | None, producer_group: str | None) -> set[str]:
        """Forget a client in the groups named, and no other (None: none of that kind); the consumer
        groups it left."""
        changed = set()
        if consumer_group:
            if self.groups.get(consumer_group, {}).pop(client_id, None) is not None:
                changed.add(consumer_group)
            if consumer_group in self.groups and not self.groups[consumer_group]:
                del self.groups[consumer_group]
                self.subscriptions.pop(consumer_group, None)
        if producer_group:
            self.producers.get(producer_group, {}).pop(client_id, None)
        return changed

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Forget clients silent for ``expiry_ms``; (group, client) of consumers that left."""
        return self._remove_where(lambda last_ms, _peer: now_ms - last_ms > self.expiry_ms)

    def drop_unreachable(self, reachable) -> list[tuple[str, str]]:
        """Forget every client whose connection ``reachable(peer)`` says is gone (RocketMQ's
        broker does this when a client's channel closes); (group, client) of consumers that left."""
        verdicts: dict[bytes, bool] = {}

        def gone(_last_ms: int, peer: bytes | None) -> bool:
            if peer is None:
                return False
            if peer not in verdicts:
                verdicts[peer] = reachable(peer)
            return not verdicts[peer]

        return self._remove_where(gone)

    def _remove_where(self, gone) -> list[tuple[str, str]]:
        """Remove consumers and producers for which ``gone(last heartbeat ms, peer)``; the consumers."""
        left = []
        for group, members in list(self.groups.items()):
            for client_id, member in list(members.items()):
                if gone(member.last_heartbeat_ms, member.peer):
                    del members[client_id]
                    left.append((group, client_id))
            if not members:
                del self.groups[group]
                self.subscriptions.pop(group, None)
        for group, producers in list(self.producers.items()):
            for client_id, member in list(producers.items()):
                if gone(member.last_heartbeat_ms, member.peer):
                    del producers[client_id]
            if not producers:
                del self.producers[group]
        return left

    def peers(self, group: str) -> list[bytes]:
        return [m.peer for m in self.groups.get(group, {}).values() if m.peer is not None]

    def producer_peers(self, group: str) -> list[bytes]:
        """Where a live producer of ``group`` heartbeats from (CHECK_TRANSACTION_STATE goes there)."""
        return [m.peer for m in self.producers.get(group, {}).values() if m.peer is not None]

    def subscription_data_of(self, group: str, topic: str) -> dict | None:
        """The SubscriptionData ``group`` registered for ``topic`` (RocketMQ's findSubscriptionData, as
        mqadmin's queryCq and the offset tables show it); None if no online member subscribes it."""
        registered = self.subscription(group, topic)
        if registered is None:
            return None
        if registered.expression_type in (None, "TAG"):
            return subscription_data(topic, registered.expression, registered.sub_version)
        return {"topic": topic, "subString": registered.expression, "expressionType": registered.expression_type,
                "tagsSet": [], "codeSet": [], "subVersion": registered.sub_version, "classFilterMode": False}

    def producer_peer(self, client_id: str) -> bytes | None:
        """The connection a live producer with this client id heartbeats from, in any group (where
        PUSH_REPLY_MESSAGE_TO_CLIENT goes: RocketMQ's ProducerManager.findChannel)."""
        for producers in self.producers.values():
            entry = producers.get(client_id)
            if entry is not None and entry.peer is not None:
                return entry.peer
        return None

    def consumer_ids(self, group: str) -> list[str]:
        return sorted(self.groups.get(group, {}))

    def connection_table(self, group: str) -> dict | None:
        """RocketMQ's ConsumerConnection of ``group`` (mqadmin consumerConnection), None if no
        member is online: every member's connection, and the subscriptions of the latest heartbeat."""
        members = [self.groups[group][c] for c in sorted(self.groups.get(group, {}))]
        if not members:
            return None
        latest = max(members, key=lambda m: m.last_heartbeat_ms)
        subscriptions = {topic: subscription_data(topic, expression, latest.last_heartbeat_ms)
                         for topic, expression in sorted(latest.subscriptions.items())}
        return {"connectionSet": [{"clientId": m.client_id, "clientAddr": m.address,
                                   "language": LANGUAGE_NAMES[m.language] if m.language < len(LANGUAGE_NAMES)
                                   else "OTHER", "version": m.version} for m in members],
                "subscriptionTable": subscriptions, "consumeType": latest.consume_type,
                "messageModel": latest.message_model, "consumeFromWhere": latest.consume_from_where}

"""What a broker's request processors share: one typed object instead of a dozen positional arguments.

``BrokerService`` builds one ``BrokerContext`` and hands it to every processor, which keeps the
parts it uses as its own attributes (the hot paths read ``self.store``, not ``self.ctx.store``).
The callables stand in for the rest of the broker, so a processor never holds the service itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:   # the types only: the context is built by service.py, which imports them all
    from rocketbox.cluster.broker.clients import ClientRegistry
    from rocketbox.cluster.broker.durability import DurabilityWait
    from rocketbox.cluster.broker.offsets import ConsumerOffsetManager
    from rocketbox.cluster.broker.subscription_groups import SubscriptionGroupManager
    from rocketbox.cluster.broker.topics import TopicConfigManager
    from rocketbox.cluster.broker.waiters import PullWaiters
    from rocketbox.cluster.clock import Clock
    from rocketbox.cluster.config import BrokerConfig
    from rocketbox.cluster.shm.store import MessageStore


@dataclass(frozen=True, slots=True)
class BrokerContext:
    cfg: "BrokerConfig"
    store: "MessageStore"
    clock: "Clock"
    topics: "TopicConfigManager"
    offsets: "ConsumerOffsetManager"
    groups: "SubscriptionGroupManager"
    clients: "ClientRegistry"
    pull_waiters: "PullWaiters"
    # The one wait between a write and its answer (durability.py).
    durability: "DurabilityWait"
    # Records were appended: wakes the flush or dispatch once per loop turn.
    on_written: Callable[[], None]
    # Whether this broker may take writes now (a master whose controller lease holds).
    may_write: Callable[[], bool]
    # Create a group's retry, dead-letter or revive topic on first use; False for any other missing topic.
    ensure_system_topic: Callable[[str], bool]
    # Tell the NameServers the topic table changed.
    publish_topics: Callable[[], None]
    # notify_peer(peer, command): a one-way request to a connected client over its own connection.
    notify_peer: Callable
    # call_peer(peer, command, on_answer, timeout_s): a request to a connected client, answered.
    call_peer: Callable

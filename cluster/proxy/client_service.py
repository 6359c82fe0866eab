"""Heartbeat, Telemetry and NotifyClientTermination (RocketMQ's ClientActivity and
GrpcClientSettingsManager): who the clients are, and the settings they run with.

A client opens one Telemetry stream per endpoint and writes its Settings at once (and every
5 minutes); the proxy answers each with the effective settings, Apache's way:
- a producer: ``publishing.max_body_size`` = the brokers' message size limit and
  ``validate_message_type`` = true (the 5.1.2 client copies both verbatim; 0 would fail every
  send), a 3-attempt exponential back-off;
- a consumer: ``receive_batch_size`` 32, ``long_polling_timeout`` the proxy's maximum, ``fifo`` and
  ``backoff_policy`` (max_attempts = the group's retryMaxTimes + 1, the delay levels as its
  customized back-off) from the subscription group's config.
The stream stays open: the proxy later pushes ``recover_orphaned_transaction_command`` through it.
A Lite consumer (RocketMQ 5.5's LITE_PUSH_CONSUMER, LITE_SIMPLE_CONSUMER) is a consumer whose
settings also carry ``lite_subscription_quota`` and ``max_lite_topic_size`` (lite_service.py).
A settings command that names no publishing or subscription, or an invalid topic or group, ends
the stream with INVALID_ARGUMENT, as Apache's proxy ends it; so does one of a client type RocketBox
does not serve (PULL_CONSUMER), which Apache's proxy refuses the same way ("Client type is not
consumer"), and that client's heartbeats and receives are answered UNRECOGNIZED_CLIENT_TYPE rather
than served as another type's.
"""

from __future__ import annotations

import asyncio
import logging

from google.protobuf.duration_pb2 import Duration

from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.clients import (CONSUMER_TYPES, SERVED_CLIENT_TYPES, ClientRegistry, GrpcClient,
                                             unserved_client_type)
from rocketbox.cluster.proxy.lite_subscriptions import LITE_CONSUMER_TYPES
from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import OK, ProxyError, status

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

RETRY_MAX_TIMES_DEFAULT = 16
PRODUCER_MAX_ATTEMPTS = 3


def duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


class StreamEnd(Exception):
    """Ends a Telemetry stream with gRPC INVALID_ARGUMENT and this reason."""


class ClientService:
    def __init__(self, settings: ProxySettings, gateway: BrokerGateway, registry: ClientRegistry,
                 on_client_left=lambda client_id: None):
        self.settings = settings
        self.gateway = gateway
        self.registry = registry
        self.on_client_left = on_client_left

    # ------------------------------------------------------------ settings

    async def effective_settings(self, raw: pb.Settings) -> pb.Settings:
        settings = pb.Settings()
        settings.CopyFrom(raw)
        settings.metric.Clear()
        settings.metric.on = False
        if raw.HasField("publishing"):
            settings.backoff_policy.Clear()
            settings.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            backoff = settings.backoff_policy.exponential_backoff
            backoff.initial.CopyFrom(duration(10))
            backoff.max.CopyFrom(duration(1_000))
            backoff.multiplier = 2
            settings.publishing.max_body_size = self.settings.max_body_size
            settings.publishing.validate_message_type = True
        elif raw.HasField("subscription"):
            group = await self.gateway.group_config(raw.subscription.group.name)
            subscription = settings.subscription
            subscription.receive_batch_size = self.settings.receive_batch_max
            subscription.long_polling_timeout.CopyFrom(duration(self.settings.long_polling_max_ms))
            subscription.fifo = bool(group.get("consumeMessageOrderly"))
            if raw.client_type in LITE_CONSUMER_TYPES:
                subscription.lite_subscription_quota = self.settings.lite_subscription_quota
                subscription.max_lite_topic_size = self.settings.max_lite_topic_size
            settings.backoff_policy.Clear()
            settings.backoff_policy.max_attempts = int(group.get("retryMaxTimes", RETRY_MAX_TIMES_DEFAULT)) + 1
            settings.backoff_policy.customized_backoff.next.extend(duration(ms) for ms in self.settings.retry_delays_ms)
        return settings

    def _check(self, raw: pb.Settings) -> None:
        if raw.client_type not in SERVED_CLIENT_TYPES and raw.client_type != pb.CLIENT_TYPE_UNSPECIFIED:
            raise unserved_client_type(raw.client_type)
        if raw.HasField("publishing"):
            for topic in raw.publishing.topics:
                validation.topic(topic.name)
        elif raw.HasField("subscription"):
            validation.consumer_group(raw.subscription.group.name)
            for entry in raw.subscription.subscriptions:
                validation.topic(entry.topic.name)
        else:
            raise StreamEnd("there is no publishing or subscription data in settings")

    async def on_settings(self, client: GrpcClient, raw: pb.Settings) -> service.TelemetryCommand:
        try:
            self._check(raw)
        except ProxyError as exc:
            if exc.code == Code.UNRECOGNIZED_CLIENT_TYPE:
                client.unserved_type = raw.client_type
            raise StreamEnd(exc.message) from None
        client.settings = raw
        client.unserved_type = 0
        if raw.HasField("publishing"):
            client.topics |= {topic.name for topic in raw.publishing.topics}
        return service.TelemetryCommand(status=OK, settings=await self.effective_settings(raw))

    # ------------------------------------------------------------ telemetry

    async def telemetry(self, call: Call, requests):
        """The Telemetry stream: yields the commands to write; StreamEnd when it must be refused."""
        client = self.registry.touch(call.client_id)
        outbox: asyncio.Queue = asyncio.Queue(self.settings.telemetry_outbox)
        if client.outbox is not None:
            client.push(None)   # a reconnected client's older stream ends: commands go to the new one
        client.outbox = outbox
        reader = asyncio.ensure_future(self._read(call, client, requests, outbox))
        try:
            while True:
                item = await outbox.get()
                if item is None:
                    return
                if isinstance(item, StreamEnd):
                    raise item
                yield item
        finally:
            reader.cancel()
            if client.outbox is outbox:
                client.outbox = None
            client.last_seen = self.registry.clock()

    async def _read(self, call: Call, client: GrpcClient, requests, outbox: asyncio.Queue) -> None:
        try:
            async for command in requests:
                client.last_seen = self.registry.clock()
                if command.HasField("settings"):
                    await outbox.put(await self.on_settings(client, command.settings))
                # Thread stacks and verification results answer commands this proxy never sends.
        except StreamEnd as exc:
            _limited.warning("telemetry-refused", "telemetry of %s refused: %s", call.client_id, exc)
            await outbox.put(exc)
            return
        except ProxyError as exc:   # the cluster could not be asked (the group's config): say so, go on
            await outbox.put(service.TelemetryCommand(status=status(exc.code, exc.message)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:   # a broken stream (client gone): end it quietly
            _limited.warning("telemetry-read", "telemetry stream of %s ended: %s: %s", call.client_id,
                             type(exc).__name__, exc)
        await outbox.put(None)

    # ------------------------------------------------------------ heartbeat, termination

    def _known(self, call: Call, asked_type: int = pb.CLIENT_TYPE_UNSPECIFIED) -> GrpcClient:
        client = self.registry.get(call.client_id)
        if asked_type not in SERVED_CLIENT_TYPES and asked_type != pb.CLIENT_TYPE_UNSPECIFIED:
            raise unserved_client_type(asked_type)
        if client is not None and client.unserved_type:
            raise unserved_client_type(client.unserved_type)
        if client is None or client.settings is None:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        return client

    async def heartbeat(self, call: Call, request: service.HeartbeatRequest) -> service.HeartbeatResponse:
        client = self._known(call, request.client_type)
        if client.client_type in CONSUMER_TYPES:
            validation.consumer_group(request.group.name)
        elif client.client_type != pb.PRODUCER:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, pb.ClientType.Name(client.client_type))
        self.registry.touch(call.client_id)
        return service.HeartbeatResponse(status=OK)

    async def notify_client_termination(self, call: Call, request: service.NotifyClientTerminationRequest
                                        ) -> service.NotifyClientTerminationResponse:
        client = self._known(call)
        if client.client_type in CONSUMER_TYPES:
            validation.consumer_group(request.group.name)
        self.registry.remove(call.client_id)
        self.on_client_left(call.client_id)
        client.push(None)
        return service.NotifyClientTerminationResponse(status=OK)

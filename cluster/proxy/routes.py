"""QueryRoute and QueryAssignment (RocketMQ's RouteActivity), from the NameServers' routes.

A route lists each broker group's master only, every queue with the proxy's own address as its
endpoints (clients talk to brokers only through the proxy), and the message types the topic takes
(its ``message.type`` attribute, GET_TOPIC_CONFIG; a topic that declares none takes all four).
"""

from __future__ import annotations

from rocketbox.cluster import topic_attributes
from rocketbox.cluster.protocol import PERM_READ, PERM_WRITE
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.messages import grpc_type
from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import OK, status


def permission(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


def queue_permissions(queue_data: dict) -> list[int]:
    """Each queue id's permission, as RouteActivity.genMessageQueueFromQueueData numbers them: the
    read-only queues first, then the write-only, then those both readable and writable."""
    perm, reads, writes = queue_data["perm"], queue_data["readQueueNums"], queue_data["writeQueueNums"]
    if perm & PERM_READ and perm & PERM_WRITE:
        both = min(reads, writes)
        return [pb.READ] * (reads - both) + [pb.WRITE] * (writes - both) + [pb.READ_WRITE] * both
    if perm & PERM_WRITE:
        return [pb.WRITE] * writes
    if perm & PERM_READ:
        return [pb.READ] * reads
    return [pb.NONE] * max(1, reads, writes)


class RouteService:
    def __init__(self, settings: ProxySettings, gateway: BrokerGateway):
        self.settings = settings
        self.gateway = gateway

    def endpoints(self, asked: pb.Endpoints | None) -> pb.Endpoints:
        """Where clients reach the brokers: the address the client used for this proxy, if it
        named one (as Apache's proxy answers), else the proxy's own."""
        if asked is not None and asked.addresses:
            return asked
        return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=self.settings.host, port=self.settings.port)])

    async def accepted_types(self, topic: str, route) -> list[int]:
        config = await self.gateway.topic_config(topic, route)
        declared = topic_attributes.declared_message_type((config or {}).get("attributes") or {})
        return [grpc_type(name) for name in topic_attributes.accepted_types(declared)]

    async def query_route(self, call: Call, request: service.QueryRouteRequest) -> service.QueryRouteResponse:
        topic = validation.topic(request.topic.name)
        route = await self.gateway.existing_route(topic)
        types = await self.accepted_types(topic, route)
        endpoints = self.endpoints(request.endpoints if request.HasField("endpoints") else None)
        queues = []
        for broker_name, queue_data in self.gateway.masters(route):
            broker = pb.Broker(name=broker_name, id=0, endpoints=endpoints)
            for queue_id, perm in enumerate(queue_permissions(queue_data)):
                queues.append(pb.MessageQueue(topic=request.topic, id=queue_id, permission=perm, broker=broker,
                                              accept_message_types=types))
        return service.QueryRouteResponse(status=OK, message_queues=queues)

    async def query_assignment(self, call: Call, request: service.QueryAssignmentRequest
                               ) -> service.QueryAssignmentResponse:
        topic = validation.topic(request.topic.name)
        group = validation.consumer_group(request.group.name)
        route = await self.gateway.existing_route(topic)
        fifo = bool((await self.gateway.group_config(group)).get("consumeMessageOrderly"))
        endpoints = self.endpoints(request.endpoints if request.HasField("endpoints") else None)
        assignments = []
        for broker_name, queue_data in self.gateway.readable(route):
            if queue_data["readQueueNums"] <= 0:
                continue
            broker = pb.Broker(name=broker_name, id=0, endpoints=endpoints)
            perm = permission(queue_data["perm"])
            # A FIFO group is assigned every queue (the broker keeps each message group in order);
            # any other group one pseudo-queue per broker: a receive pops from all of its queues.
            ids = range(queue_data["readQueueNums"]) if fifo else (-1,)
            assignments += [pb.Assignment(message_queue=pb.MessageQueue(topic=request.topic, id=i, permission=perm,
                                                                        broker=broker)) for i in ids]
        if not assignments:
            return service.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return service.QueryAssignmentResponse(status=OK, assignments=assignments)

"""Transactional messages through the proxy: transaction ids, EndTransaction, and recovery.

RocketMQ 5's proxy uses the topic as the producer group of a gRPC producer's half messages (a
gRPC producer has no group). Here:

- A half's ``transaction_id`` names where it lies: ``<broker name>:<CommitLog offset>:<half queue
  offset>``. EndTransaction needs nothing else, so a commit or rollback works whichever proxy (or
  proxy process, after a restart) it reaches. Offsets can be made up: the proxy checks the
  caller's PUB on the request's topic (proxy/access.py) and names that topic to the broker, which
  ends the half only if it is of that topic, producer group (the topic), queue offset and message
  id (broker/transaction.py); else INVALID_TRANSACTION_ID. So no account's id ends another
  topic's half, and the proxy needs no look-up of its own (one round trip, as before).
- So that a broker's transaction check finds a producer, the proxy heartbeats each topic that live
  gRPC producers publish, as a producer group, to every master (``broker_heartbeat_interval_ms``,
  and at once when a new topic appears); the brokers then send it CHECK_TRANSACTION_STATE on that
  connection.
- A check becomes ``recover_orphaned_transaction_command`` on the Telemetry stream of a producer
  of the half's topic; its checker's answer comes back as EndTransaction from SOURCE_SERVER_CHECK.
  With no such producer connected the check is dropped (logged): the broker asks again later.
"""

from __future__ import annotations

import asyncio
import logging
import os

from rocketbox.cluster.config import name_problem
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import RequestCode, ResponseCode, to_json_bytes
from rocketbox.cluster.proxy import messages, validation
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.clients import ClientRegistry
from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import OK, ProxyError, broker_refusal
from rocketbox.cluster.message.ids import unpack_host
from rocketbox.cluster.message.properties import PROPERTY_PGROUP, PROPERTY_REAL_TOPIC, PROPERTY_UNIQ_KEY
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
_OUTCOMES = {pb.COMMIT: COMMIT, pb.ROLLBACK: ROLLBACK}


def transaction_id(broker_name: str, commitlog_offset: int, queue_offset: int) -> str:
    return f"{broker_name}:{commitlog_offset}:{queue_offset}"


def parse_transaction_id(text: str) -> tuple[str, int, int]:
    """(broker name, CommitLog offset, half queue offset); ProxyError INVALID_TRANSACTION_ID."""
    if not text or not text.strip():
        raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
    parts = text.split(":")
    if len(parts) != 3 or name_problem("broker", parts[0]) or not all(p.isdigit() for p in parts[1:]):
        raise ProxyError(Code.INVALID_TRANSACTION_ID, f"not a transaction id of this proxy: {text[:80]!r}")
    return parts[0], int(parts[1]), int(parts[2])


class TransactionRelay:
    def __init__(self, settings: ProxySettings, gateway: BrokerGateway, registry: ClientRegistry,
                 loop: asyncio.AbstractEventLoop):
        self.settings = settings
        self.gateway = gateway
        self.registry = registry
        self.loop = loop
        # The proxy's own client id at the brokers (one per process: a restarted proxy is a new client).
        self.broker_client_id = f"{settings.host}@proxy-{settings.port}@{os.getpid()}"
        self._heartbeated_topics: frozenset[str] = frozenset()
        self._topics_changed = asyncio.Event()
        gateway.rpc.server_request_handlers[RequestCode.CHECK_TRANSACTION_STATE] = self._on_check

    # ------------------------------------------------------------ EndTransaction

    async def end_transaction(self, call: Call, request: service.EndTransactionRequest
                              ) -> service.EndTransactionResponse:
        topic = validation.topic(request.topic.name)
        broker_name, commitlog_offset, queue_offset = parse_transaction_id(request.transaction_id)
        outcome = _OUTCOMES.get(request.resolution, UNKNOWN)
        from_check = request.source == pb.SOURCE_SERVER_CHECK
        response = await self.gateway.broker_call(broker_name, Command(RequestCode.END_TRANSACTION, {
            "producerGroup": topic, "tranStateTableOffset": str(queue_offset),
            "commitLogOffset": str(commitlog_offset), "commitOrRollback": str(outcome),
            "fromTransactionCheck": "true" if from_check else "false", "msgId": request.message_id,
            "transactionId": request.message_id, "topic": topic}))
        if response.code == ResponseCode.SUCCESS:
            return service.EndTransactionResponse(status=OK)
        if response.code == ResponseCode.SYSTEM_ERROR and (response.remark or "").startswith("no half message"):
            raise ProxyError(Code.INVALID_TRANSACTION_ID, f"transaction {request.transaction_id}: {response.remark}")
        raise broker_refusal(response, broker_name)

    # ------------------------------------------------------------ producer groups at the brokers

    def topics_changed(self) -> None:
        if self.registry.publishing_topics() - self._heartbeated_topics:
            self._topics_changed.set()

    async def heartbeat_forever(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._topics_changed.wait(), self.settings.broker_heartbeat_interval_ms / 1000)
            except asyncio.TimeoutError:
                pass
            self._topics_changed.clear()
            try:
                await self.heartbeat_once()
            except ProxyError as exc:
                _limited.warning("tx-heartbeat", "producer heartbeat to the brokers failed: %s", exc.message)

    async def heartbeat_once(self) -> None:
        topics = self.registry.publishing_topics()
        if not topics:
            return
        body = to_json_bytes({"clientID": self.broker_client_id, "consumerDataSet": [],
                              "producerDataSet": [{"groupName": t} for t in sorted(topics)]})
        table = await self.gateway.broker_table()
        for name, entry in sorted(table.items()):
            if not entry["master"]:
                continue
            try:
                response = await self.gateway.call(entry["master"], Command(RequestCode.HEART_BEAT, {}, body))
                if response.code != ResponseCode.SUCCESS:
                    _limited.warning("tx-heartbeat", "broker %s refused the producer heartbeat: %s", name,
                                     response.remark)
            except TransportError as exc:
                self.gateway.suspect(name)
                _limited.warning("tx-heartbeat", "producer heartbeat to %s failed: %s", name, exc)
        self._heartbeated_topics = frozenset(topics)

    # ------------------------------------------------------------ checks

    def _on_check(self, request: Command) -> None:
        """On the RPC client's I/O thread: hand the check to the proxy's loop (one-way, no answer)."""
        self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._relay(request)))

    async def _relay(self, request: Command) -> None:
        try:
            record = messages.records(request.body)[0]
            props = record.properties
            topic = props.get(PROPERTY_REAL_TOPIC) or props.get(PROPERTY_PGROUP) or ""
            ip, port = unpack_host(record.store_host)
            broker_name = await self.gateway.broker_name_of(f"{ip}:{port}")
            if broker_name is None:
                raise ValueError(f"no broker is known by the half's store host {ip}:{port}")
            tx = transaction_id(broker_name, int(request.fields.get("commitLogOffset", record.phys_offset)),
                                int(request.fields.get("tranStateTableOffset", record.queue_offset)))
            command = service.TelemetryCommand(recover_orphaned_transaction_command=service.RecoverOrphanedTransactionCommand(
                message=messages.incoming(record, topic=topic), transaction_id=tx))
        except (ValueError, IndexError, OSError, ProxyError) as exc:
            _limited.warning("tx-check", "a transaction check could not be relayed: %s", exc)
            return
        for producer in self.registry.producers_of(topic):
            if producer.push(command):
                return
        _limited.warning("tx-check-nobody", "transaction %s of topic %s: no producer of it is connected; the broker "
                                            "will ask again", props.get(PROPERTY_UNIQ_KEY), topic)

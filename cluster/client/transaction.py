"""TransactionProducer: half message, local transaction, commit or rollback, and check-back.

RocketMQ's TransactionMQProducer (SPEC §2, rocketmq-protocol.md §5.8):

1. ``send_message_in_transaction`` sends a half message (TRAN_MSG=true, PGROUP, sysFlag
   PREPARED): stored, invisible to consumers.
2. Only if that write came back SEND_OK does the listener's ``execute_local_transaction`` run;
   a half answered FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is rolled
   back without running it.
3. The outcome goes to the broker as a one-way END_TRANSACTION (commit 8, rollback 12,
   unknown 0). Unknown, a lost END_TRANSACTION or a crashed producer leave the half open.
4. The broker then asks a live producer of the group (CHECK_TRANSACTION_STATE, pushed on the
   connection this producer heartbeats on) and ``check_local_transaction`` answers.
"""

from __future__ import annotations

import enum
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.message import Message, MessageExt, SendResult, SendStatus, decode_messages
from rocketbox.cluster.client.producer import Producer
from rocketbox.cluster.errors import ClientError, MessageInvalid
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.message.properties import PROPERTY_DELAY, PROPERTY_PGROUP, PROPERTY_TRAN_MSG, PROPERTY_UNIQ_KEY
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_PREPARED
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = 8
    ROLLBACK_MESSAGE = 12
    UNKNOW = 0   # RocketMQ's spelling


class TransactionListener(Protocol):
    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState: ...


@dataclass
class TransactionSendResult:
    send_result: SendResult
    local_state: LocalTransactionState


class TransactionProducer(Producer):
    def __init__(self, group: str, listener: TransactionListener, namesrv=None, config=None, *,
                 check_threads: int = 2):
        super().__init__(group, namesrv, config)
        self.listener = listener
        self._checks = ThreadPoolExecutor(check_threads, thread_name_prefix=f"tx-check-{group}")
        self.rpc.server_request_handlers[RequestCode.CHECK_TRANSACTION_STATE] = \
            lambda request: self._checks.submit(self._answer_check, request)
        self._stop = threading.Event()
        self._heartbeated: set[str] = set()
        self._heartbeat_thread = threading.Thread(target=self._heartbeat_loop, name=f"tx-heartbeat-{group}",
                                                  daemon=True)
        self._heartbeat_thread.start()

    # ---------------------------------------------------------------- sending

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        if PROPERTY_DELAY in msg.properties or "TIMER_DELIVER_MS" in msg.properties:
            raise MessageInvalid("a transactional message cannot also be delayed")
        msg.properties[PROPERTY_TRAN_MSG] = "true"
        msg.properties[PROPERTY_PGROUP] = self.group
        body, props, sys_flag = self._prepare(msg)
        # Registered before the half exists, so the broker can always find us to check it.
        self._heartbeat(self.routes.publish_route(msg.topic)[0].broker_addrs)
        result = self._send_with_retries(msg.topic, body, props, sys_flag | SYSFLAG_TRANSACTION_PREPARED,
                                         msg.flag, msg.properties[PROPERTY_UNIQ_KEY], None, None,
                                         RequestCode.SEND_MESSAGE_V2, batch=False)
        if result.status != SendStatus.SEND_OK:
            state = LocalTransactionState.ROLLBACK_MESSAGE   # not durably stored: never run the transaction
        else:
            try:
                state = self.listener.execute_local_transaction(msg, arg)
            except Exception:
                log.exception("local transaction of %s raised; its outcome is left to the check", result.msg_id)
                state = LocalTransactionState.UNKNOW
        self._end(result.offset_msg_id, result.queue_offset, result.msg_id, state, from_check=False)
        return TransactionSendResult(result, state)

    def _end(self, offset_msg_id: str, queue_offset: int, msg_id: str, state: LocalTransactionState,
             from_check: bool) -> None:
        ip, port, phys = parse_offset_msg_id(offset_msg_id)
        try:
            self.rpc.oneway(self.routes.store_host_endpoint(ip, port), Command(RequestCode.END_TRANSACTION, {
                "producerGroup": self.group, "tranStateTableOffset": str(queue_offset),
                "commitLogOffset": str(phys), "commitOrRollback": str(state.value),
                "fromTransactionCheck": "true" if from_check else "false", "msgId": msg_id,
                "transactionId": msg_id}))
        except (ClientError, TransportError) as exc:   # the check-back will ask again
            log.warning("END_TRANSACTION for %s not sent: %s", msg_id, exc)

    # ---------------------------------------------------------------- check-back

    def _answer_check(self, request: Command) -> None:
        try:
            messages = decode_messages(request.body)
            if not messages:
                log.warning("CHECK_TRANSACTION_STATE without a message body ignored")
                return
            message = messages[0]
            try:
                state = self.listener.check_local_transaction(message)
            except Exception:
                log.exception("check_local_transaction raised for %s; answering unknown", message.msg_id)
                state = LocalTransactionState.UNKNOW
            self._end(request.fields.get("offsetMsgId") or message.offset_msg_id,
                      int(request.fields.get("tranStateTableOffset", "0")), message.msg_id, state, from_check=True)
        except Exception:
            log.exception("answering a transaction check failed")

    def _heartbeat(self, broker_addrs: dict | None = None) -> None:
        endpoints = self.routes.all_broker_endpoints()
        for endpoint in endpoints.values():
            if broker_addrs is not None and endpoint in self._heartbeated:
                continue
            try:
                broker_api.heartbeat(self.rpc, endpoint, self.client_id, [], [self.group])
                self._heartbeated.add(endpoint)
            except (ClientError, TransportError) as exc:
                log.info("heartbeat to %s failed: %s", endpoint, exc)

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.cfg.client_heartbeat_interval_ms / 1000):
            self._heartbeat()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._stop.set()
        self._checks.shutdown(wait=False)
        for endpoint in self.routes.all_broker_endpoints().values():
            try:
                broker_api.unregister_client(self.rpc, endpoint, self.client_id, producer_group=self.group)
            except (ClientError, TransportError):
                pass
        super().shutdown()

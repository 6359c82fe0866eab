"""mqadmin's requests about a broker's clients: who produces, and asking a consumer itself.

- GET_PRODUCER_CONNECTION_LIST (204, producerConnection): a producer group's online members
  (ProducerConnection: clientId, clientAddr host:port, language, version); RocketMQ's refusal
  "the producer group[G] not exist" when none is online.
- GET_ALL_PRODUCER_INFO (328, producer): every group's members (ProducerTableInfo; ``remoteIP`` is
  ``/host:port`` as Java's SocketAddress prints it).
- CONSUME_MESSAGE_DIRECTLY (309, queryMsgById -g -d): the broker reads the message the offset id
  names and relays the request to the consumer over its own connection, the record as body and
  ``brokerName`` added; the consumer runs its listener on it and answers ConsumeMessageDirectlyResult,
  which goes back to the admin as it came. GET_CONSUMER_RUNNING_INFO (307) relays the same way
  (``relay_to_consumer``).
"""

from __future__ import annotations

from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, field_str, to_json_bytes
from rocketbox.cluster.remoting_format import LANGUAGES
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.wire_format import Command

# How long a consumer gets to run its listener on one message: RocketMQ's broker waits 10 s
# (Broker2Client.callClient); the admin tool waits three of its 5 s time-outs.
CONSUME_DIRECTLY_TIMEOUT_S = 10.0


def record_of_msg_id(store, msg_id: str):
    """(CommitLog offset, the record there or None) of an offset message id; ProtocolError when the
    id is not one."""
    try:
        _host, _port, phys_offset = parse_offset_msg_id(msg_id)
    except ValueError as exc:
        raise ProtocolError(f"{msg_id} is not an offset message id: {exc}") from None
    return phys_offset, store.read_record(phys_offset)


def language_name(ordinal: int) -> str:
    return LANGUAGES[ordinal] if 0 <= ordinal < len(LANGUAGES) else "OTHER"


def relay_to_consumer(clients, call_peer, request: Command, reply, fields: dict[str, str], body: bytes,
                      timeout_s: float) -> None:
    """Send ``request.code`` with ``fields`` and ``body`` to the online member ``clientId`` of
    ``consumerGroup`` over its own connection, and answer ``request`` with its answer as it came
    (or why there is none). ProtocolError when the member is not online."""
    group = field_str(request, "consumerGroup")
    client_id = field_str(request, "clientId")
    member = clients.groups.get(group, {}).get(client_id)
    if member is None or member.peer is None:   # RocketMQ's wording
        raise ProtocolError(f"The Consumer <{group}> <{client_id}> not online")

    def relay(answer) -> None:
        if not isinstance(answer, Command):   # no answer in time, or the connection closed
            reply(request.response(ResponseCode.SYSTEM_ERROR,
                                   remark=f"consumer <{client_id}> did not answer within {timeout_s:g} s"))
        else:
            reply(request.response(answer.code, answer.fields, answer.body, answer.remark))

    call_peer(member.peer, Command(request.code, fields, body), relay, timeout_s)


class ClientAdmin:
    def __init__(self, broker_name: str, store, clients, call_peer):
        self.broker_name = broker_name
        self.store = store
        self.clients = clients
        # call_peer(peer, command, on_answer, timeout_s): a request to a connected client (doors.py).
        self.call_peer = call_peer

    @answers_refusals
    def on_producer_connection_list(self, request: Command, reply=None) -> Command:
        group = field_str(request, "producerGroup")
        members = self.clients.producers.get(group)
        if not members:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"the producer group[{group}] not exist")
        connections = [{"clientId": client_id, "clientAddr": m.address, "language": language_name(m.language),
                        "version": m.version} for client_id, m in sorted(members.items())]
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"connectionSet": connections}))

    def on_all_producer_info(self, request: Command, reply=None) -> Command:
        data = {group: [{"clientId": client_id, "remoteIP": f"/{m.address}", "language": language_name(m.language),
                         "version": m.version, "lastUpdateTimestamp": m.last_heartbeat_ms}
                        for client_id, m in sorted(members.items())]
                for group, members in sorted(self.clients.producers.items()) if members}
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"data": data}))

    @answers_refusals
    def on_consume_message_directly(self, request: Command, reply) -> None:
        msg_id = field_str(request, "msgId")
        phys_offset, record = record_of_msg_id(self.store, msg_id)
        if record is None:
            raise ProtocolError(f"no message at CommitLog offset {phys_offset} (offset message id {msg_id})")
        body = self.store.commitlog.read(phys_offset, record.total_size)
        fields = {**request.fields, "brokerName": self.broker_name}
        relay_to_consumer(self.clients, self.call_peer, request, reply, fields, bytes(body), CONSUME_DIRECTLY_TIMEOUT_S)
        return None

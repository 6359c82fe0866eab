"""A read's AckMessage calls as one batch (the native door with ``grpc_batch_calls``; issue 33 item 2).

The 5.x clients ack one receipt handle an AckMessage call; one ACK_MESSAGE a handle made the broker
hop (its request, its hand-off back) a part of every acked message's cost. Here the handles of all
the calls one read completed are checked each (``ConsumerService.handle_of``: a forged or expired
one is refused alone), grouped by broker, consumer group and topic, and acked by one ACK_MESSAGES a
group (``ack_batch_format.py``), whose answer carries each handle's own outcome: every call gets
its own entries and status, as ``ConsumerService.ack`` would have answered it.
"""

from __future__ import annotations

import asyncio

from rocketbox.cluster import ack_batch_format
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.protos import Code, service
from rocketbox.cluster.proxy.status import OK, ProxyError, broker_refusal, status
from rocketbox.cluster.wire_format import FLAG_RESPONSE, Command


class AckBatches:
    """``await batches.ack(calls)``: an AckMessageResponse or a ProxyError for each (Call, request)."""

    def __init__(self, consumers):
        self.consumers = consumers   # ConsumerService: its renewals and handle checks
        self.requests = 0            # ACK_MESSAGES requests sent, and the handles they carried
        self.handles = 0

    async def ack(self, calls: list[tuple[Call, service.AckMessageRequest]]) -> list:
        results: list = [None] * len(calls)
        outcomes: list[list] = [[] for _ in calls]   # each call's entries' statuses, in its order
        groups: dict[tuple, list] = {}                # (broker, group, topic) -> [(call index, entry index, handle)]
        names: dict[tuple, tuple] = {}                # a read's calls name the same group and topic: checked once
        for index, (_call, request) in enumerate(calls):
            try:
                asked = (request.group.name, request.topic.name)
                checked = names.get(asked)
                if checked is None:
                    checked = names[asked] = (validation.consumer_group(asked[0]), validation.topic(asked[1]))
                group, topic = checked
                if not request.entries:
                    raise ProxyError(Code.BAD_REQUEST, "no entry to ack")
            except ProxyError as exc:
                results[index] = exc
                continue
            outcomes[index] = [None] * len(request.entries)
            for k, entry in enumerate(request.entries):
                try:
                    text = await self.consumers.renewals.take(entry.receipt_handle)
                    handle = self.consumers.handle_of(text)
                    if "\n" in text:
                        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is invalid: it has a newline")
                except ProxyError as exc:
                    outcomes[index][k] = status(exc.code, exc.message)
                    continue
                groups.setdefault((handle.broker_name, group, topic), []).append((index, k, text))
        await asyncio.gather(*(self._ack_group(*key, members, outcomes) for key, members in groups.items()))
        for index, (_call, request) in enumerate(calls):
            if results[index] is None:
                results[index] = _response(request, outcomes[index])
        return results

    async def _ack_group(self, broker_name: str, group: str, topic: str, members: list, outcomes: list) -> None:
        """One ACK_MESSAGES for the handles of one broker, consumer group and topic."""
        self.requests += 1
        self.handles += len(members)
        try:
            response = await self.consumers.gateway.broker_call(broker_name, Command(
                RequestCode.ACK_MESSAGES, {"consumerGroup": group, "topic": topic},
                ack_batch_format.encode_handles([text for _, _, text in members])))
            if response.code != ResponseCode.SUCCESS:
                raise broker_refusal(response, broker_name)
            try:
                answered = ack_batch_format.decode_outcomes(response.body, len(members))
            except ValueError as exc:
                raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"{broker_name} answered ACK_MESSAGES with {exc}") from None
        except ProxyError as exc:
            failed = status(exc.code, exc.message)
            for index, k, _ in members:
                outcomes[index][k] = failed
            return
        for (index, k, _), (code, remark) in zip(members, answered):
            if code == ResponseCode.SUCCESS:
                outcomes[index][k] = OK
            else:   # as ACK_MESSAGE's refusal of that handle alone would be answered
                refusal = broker_refusal(Command(code, {}, b"", 0, FLAG_RESPONSE, remark), broker_name)
                outcomes[index][k] = status(refusal.code, refusal.message)


def _response(request: service.AckMessageRequest, statuses: list) -> service.AckMessageResponse:
    entries = [service.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                             status=one) for entry, one in zip(request.entries, statuses)]
    codes = {one.code for one in statuses}
    overall = status(Code.MULTIPLE_RESULTS) if len(codes) > 1 else status(codes.pop())
    return service.AckMessageResponse(status=overall, entries=entries)

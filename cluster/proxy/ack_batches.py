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
import functools

from rocketbox.cluster import ack_batch_format
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.proxy import response_wire, validation
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.protos import Code, service
from rocketbox.cluster.proxy.status import ProxyError, broker_refusal
from rocketbox.cluster.wire_format import FLAG_RESPONSE, Command


class AckBatches:
    """``await batches.ack(calls)``: an AckMessageResponse's bytes (``response_wire``) or a ProxyError for
    each (Call, request)."""

    def __init__(self, consumers):
        self.consumers = consumers   # ConsumerService: its renewals and handle checks
        self.requests = 0            # ACK_MESSAGES requests sent, and the handles they carried
        self.handles = 0

    async def ack(self, calls: list[tuple[Call, service.AckMessageRequest]]) -> list:
        results: list = [None] * len(calls)
        outcomes: list[list] = [[] for _ in calls]   # each call's entries' (code, Status bytes), in its order
        groups: dict[tuple, list] = {}                # (broker, group, topic) -> [(call index, entry index, handle)]
        names: dict[tuple, tuple] = {}                # a read's calls name the same group and topic: checked once
        renewals = self.consumers.renewals
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
                    text = entry.receipt_handle
                    if renewals.holds(text):   # the rest skip the await of a coroutine that would not wait
                        text = await renewals.take(text)
                    handle = self.consumers.handle_of(text)
                    if "\n" in text:
                        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is invalid: it has a newline")
                except ProxyError as exc:
                    outcomes[index][k] = _outcome(exc.code, exc.message)
                    continue
                groups.setdefault((handle.broker_name, group, topic), []).append((index, k, text))
        if len(groups) == 1:   # the common read: one broker, group and topic, no task for it
            (key, members), = groups.items()
            await self._ack_group(*key, members, outcomes)
        elif groups:
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
            failed = _outcome(exc.code, exc.message)
            for index, k, _ in members:
                outcomes[index][k] = failed
            return
        ok = _plain(Code.OK)
        for (index, k, _), (code, remark) in zip(members, answered):
            if code == ResponseCode.SUCCESS:
                outcomes[index][k] = ok
            else:   # as ACK_MESSAGE's refusal of that handle alone would be answered
                refusal = broker_refusal(Command(code, {}, b"", 0, FLAG_RESPONSE, remark), broker_name)
                outcomes[index][k] = _outcome(refusal.code, refusal.message)


def _outcome(code: int, message: str) -> tuple[int, bytes]:
    return code, response_wire.status(code, message)


@functools.lru_cache(maxsize=64)
def _plain(code: int) -> tuple[int, bytes]:
    """A code's outcome as ``status.status(code)`` makes its Status: the code's name as the message."""
    return _outcome(code, Code.Name(code))


def _response(request: service.AckMessageRequest, outcomes: list[tuple[int, bytes]]) -> bytes:
    """AckMessageResponse(status, entries: each entry's message id, handle and status), as ``ConsumerService.ack``
    answers it: the overall status the entries' one code, else MULTIPLE_RESULTS."""
    entries = [response_wire.ack_entry(entry.message_id, entry.receipt_handle, one)
               for entry, (_, one) in zip(request.entries, outcomes)]
    code = outcomes[0][0]
    if any(other != code for other, _ in outcomes):
        code = Code.MULTIPLE_RESULTS
    return response_wire.ack_message(_plain(code)[1], entries)

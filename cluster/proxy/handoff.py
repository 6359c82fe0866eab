"""The proxy's broker requests handed between its asyncio loop and the RpcClient's I/O thread in
batches, not one by one.

One by one, every request cost a write to the I/O thread's wake pipe (the thread empties its queue
and sleeps between two requests of the loop) and every answer a write to the loop's self-pipe
(``asyncio.wrap_future``'s ``call_soon_threadsafe``): two wake-ups and two GIL hand-offs a message at
64 sends in flight. Here the requests of one loop turn go to the I/O thread together (one wake), and
the answers the I/O thread settles while the loop has not yet run are delivered in one loop callback
(perf/RESULTS.md, "The gRPC door at full speed").
"""

from __future__ import annotations

import asyncio
import collections
from concurrent.futures import Future

from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient


class BatchedCalls:
    """``await calls.call(endpoint, request, timeout_ms)`` on one loop, through one RpcClient."""

    def __init__(self, rpc: RpcClient):
        self.rpc = rpc
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outgoing: collections.deque = collections.deque()   # (endpoint, request, timeout, waiter)
        self._send_scheduled = False
        self._answered: collections.deque = collections.deque()   # (concurrent future, waiter)
        self._delivery_scheduled = False

    def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> asyncio.Future:
        """A loop future resolved with the response Command, or a TransportError."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._outgoing.append((endpoint, request, timeout_ms, waiter))
        if not self._send_scheduled:
            self._send_scheduled = True
            loop.call_soon(self._send)
        return waiter

    def _send(self) -> None:
        """On the loop: every request of this turn to the I/O thread (its pipe written once)."""
        self._send_scheduled = False
        outgoing = self._outgoing
        while outgoing:
            endpoint, request, timeout_ms, waiter = outgoing.popleft()
            if waiter.cancelled():
                continue
            self.rpc.call_async(endpoint, request, timeout_ms,
                                on_done=lambda answer, waiter=waiter: self._answer(answer, waiter))

    def _answer(self, answer: Future, waiter: asyncio.Future) -> None:
        """On the I/O thread: queue the answer; wake the loop only when no delivery is pending.
        The loop clears the flag before it drains the queue, so an answer queued after the clear
        schedules a delivery of its own and none is stranded."""
        self._answered.append((answer, waiter))
        if not self._delivery_scheduled:
            self._delivery_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:   # the loop is closed: the proxy is stopping, nobody waits
                pass

    def _deliver(self) -> None:
        """On the loop: every queued answer to its waiter."""
        self._delivery_scheduled = False
        answered = self._answered
        while answered:
            answer, waiter = answered.popleft()
            if waiter.done():   # its caller was cancelled (a client that left)
                continue
            error = answer.exception()
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(answer.result())

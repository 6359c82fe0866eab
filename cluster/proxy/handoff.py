"""The answers to the proxy's broker requests handed from the RpcClient's I/O thread to the asyncio
loop in batches, not one by one.

One by one (``asyncio.wrap_future``), every answer cost a ``call_soon_threadsafe``: a write to the
loop's self-pipe and a wake-up of the loop, with a GIL hand-off, per message. Here the answers the
I/O thread settles while the loop has not yet run are delivered in one loop callback (2.2 answers a
wake-up in the proxy at 2 clients x 64 sends in flight; perf/RESULTS.md, "The gRPC door at full
speed").
"""

from __future__ import annotations

import asyncio
import collections

from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient


class _Outcome:
    """What the I/O thread settles for one call (``ClientTransport.call_into``): the response or the
    error goes straight into the queue of answers, no concurrent Future (whose lock, condition and
    callback list cost ~8% of the proxy's send path: perf/RESULTS.md, "The gRPC door: the floor of a
    C front end and the proxy's own cost")."""

    __slots__ = ("calls", "waiter", "settled")

    def __init__(self, calls: "BatchedCalls", waiter: asyncio.Future):
        self.calls, self.waiter, self.settled = calls, waiter, False

    def done(self) -> bool:
        return self.settled

    def set_result(self, response: Command) -> None:
        self.settled = True
        self.calls._answer(response, None, self.waiter)

    def set_exception(self, error: BaseException) -> None:
        self.settled = True
        self.calls._answer(None, error, self.waiter)


class BatchedCalls:
    """``await calls.call(endpoint, request, timeout_ms)`` on one loop, through one RpcClient."""

    def __init__(self, rpc: RpcClient):
        self.rpc = rpc
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answered: collections.deque = collections.deque()   # (response, error, waiter)
        self._delivery_scheduled = False

    def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> asyncio.Future:
        """A loop future resolved with the response Command, or a TransportError."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        # Submitted at once: the I/O thread's own wake flag already spares the pipe write while it
        # has not drained its queue (deferring to the end of the loop turn gathered 1.1 request a
        # batch in the proxy: its RPCs' handlers run in turns of their own).
        self.rpc.call_into(endpoint, request, _Outcome(self, waiter), timeout_ms)
        return waiter

    def _answer(self, response: Command | None, error: BaseException | None, waiter: asyncio.Future) -> None:
        """On the I/O thread: queue the answer; wake the loop only when no delivery is pending.
        The loop clears the flag before it drains the queue, so an answer queued after the clear
        schedules a delivery of its own and none is stranded."""
        self._answered.append((response, error, waiter))
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
            response, error, waiter = answered.popleft()
            if waiter.done():   # its caller was cancelled (a client that left)
                continue
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(response)

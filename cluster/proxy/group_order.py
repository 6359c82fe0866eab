"""One message group's sends written to its broker in the order the proxy took them.

A FIFO message (or a Lite topic's) goes to the queue its group hashes to, and the broker stores one
connection's requests in the order they come; so a group keeps its order as long as the proxy writes
its requests in the order its calls arrived. Between arrival and write a send awaits lookups (the
topic's route and config, the broker table), and those resume in no fixed order: a send that
finds a cache entry expired waits a round trip, while a later send that finds it filled again goes
on at once and is stored first (seen as a group's last in-flight send stored before six earlier
ones). So each grouped send takes a turn when its call is taken, before any await, and writes its
request only once the turn before it in its group has written its own (or given up).

A turn is released as its request is handed to the connection (``BrokerGateway.broker_call``),
not when the broker answers, so a group's sends in flight still pipeline; and always in the end,
refused or failed, so a group never waits on a send that went nowhere. What is not ordered, as in
RocketMQ: a send the proxy retries after its broker refused it, and sends through a failover.
"""

from __future__ import annotations

import asyncio


class Turn:
    """A grouped send's place in its group's line; ``None`` stands for an ungrouped send's."""

    __slots__ = ("_order", "_key", "_before", "_mine")

    def __init__(self, order: "GroupOrder", key: tuple[str, str], before: asyncio.Future | None,
                 mine: asyncio.Future):
        self._order, self._key, self._before, self._mine = order, key, before, mine

    async def wait(self) -> None:
        """Until every earlier send of the group has written its request or given up."""
        before = self._before
        if before is not None:
            if not before.done():
                await asyncio.shield(before)
            self._before = None

    def release(self) -> None:
        """This send has written its request or will not: the next of its group may go once every
        earlier one has too (idempotent)."""
        before = self._before
        if before is not None and not before.done():   # given up before its turn came: the line holds
            before.add_done_callback(lambda _before: self._finish())
        else:
            self._finish()

    def _finish(self) -> None:
        mine = self._mine
        if not mine.done():
            mine.set_result(None)
            self._order._released(self._key, mine)


class GroupOrder:
    """``order.turn(topic, group)`` when a call is taken; its ``wait()`` before the write."""

    def __init__(self):
        self._last: dict[tuple[str, str], asyncio.Future] = {}   # the group's latest turn not yet released

    def turn(self, topic: str, group: str) -> Turn | None:
        if not group:
            return None
        key = (topic, group)
        mine = asyncio.get_running_loop().create_future()
        before = self._last.get(key)
        self._last[key] = mine
        return Turn(self, key, before, mine)

    def _released(self, key: tuple[str, str], turn: asyncio.Future) -> None:
        if self._last.get(key) is turn:
            del self._last[key]

    def waiting_groups(self) -> int:
        """Groups with a send not yet written (stats, tests: 0 once the proxy is idle)."""
        return len(self._last)


async def wait_turns(turns) -> None:
    """Until every earlier send of each of ``turns``' groups has written (one request carrying several
    of a group's messages waits only for the send before its first)."""
    own = {turn._mine for turn in turns}
    for turn in turns:
        if turn._before is not None and turn._before not in own:
            await turn.wait()


def release_turns(turns) -> None:
    for turn in turns:
        turn.release()


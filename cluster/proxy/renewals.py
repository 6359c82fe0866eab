"""Keeping a PushConsumer's messages invisible while it consumes them (RocketMQ's ReceiptHandleProcessor
/ DefaultReceiptHandleManager): a receive with ``auto_renew`` hands its messages to the client for as
long as the client works on them, not for one fixed invisible time.

Each message such a receive delivered is tracked by the handle the client holds. Once a second
(``tick``; more often when ``renew_ahead_ms`` is under 4 s) every tracked message whose invisible time ends within ``renew_ahead_ms`` is renewed
(CHANGE_MESSAGE_INVISIBLETIME for another ``default_invisible_ms``; the broker answers a new
handle, which the proxy keeps). The client acks, nacks or dead-letters with the handle it was
given; ``take`` swaps in the current one (after a renewal in flight ends). Tracking stops when the
client is gone (its messages then come back after their invisible time), after ``renew_max_ms``,
or when a renewal is refused (the message was revived meanwhile). Bounded: at most ``max_tracked``
messages; beyond, a message is simply not renewed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from rocketbox.cluster.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


@dataclass(eq=False)
class Renewed:
    client_id: str
    group: str
    topic: str
    handle: str              # the current one (the broker's latest answer)
    next_visible_ms: int
    first_ms: int
    renewing: asyncio.Future | None = None


class ReceiptRenewals:
    def __init__(self, change, client_alive, *, invisible_ms: int, renew_ahead_ms: int = 10_000,
                 renew_max_ms: int = 3 * 3600 * 1000, max_tracked: int = 100_000):
        """``change(group, topic, handle, invisible_ms) -> new handle`` (raises ProxyError when the
        broker refuses); ``client_alive(client_id) -> bool``."""
        self.change = change
        self.client_alive = client_alive
        self.invisible_ms = invisible_ms
        self.renew_ahead_ms = renew_ahead_ms
        self.renew_max_ms = renew_max_ms
        self.max_tracked = max_tracked
        self._tracked: dict[str, Renewed] = {}   # the handle the client holds -> its state
        self.renewed = self.dropped = 0

    def __len__(self) -> int:
        return len(self._tracked)

    def track(self, client_id: str, group: str, topic: str, handle: str, next_visible_ms: int) -> None:
        if len(self._tracked) >= self.max_tracked:
            _limited.warning("renew-full", "%d messages are being renewed already: one more is not",
                             self.max_tracked)
            return
        now = int(time.time() * 1000)
        self._tracked[handle] = Renewed(client_id, group, topic, handle, next_visible_ms, now)

    def holds(self, handle: str) -> bool:
        """Whether ``handle`` is one being renewed (``take`` would swap it)."""
        return handle in self._tracked

    async def take(self, handle: str) -> str:
        """The handle to use for what the client holds as ``handle`` (which stops being renewed)."""
        entry = self._tracked.pop(handle, None)
        if entry is None:
            return handle
        if entry.renewing is not None:
            await asyncio.shield(entry.renewing)
        return entry.handle

    async def tick(self) -> None:
        now = int(time.time() * 1000)
        due = []
        for held, entry in list(self._tracked.items()):
            if entry.renewing is not None:
                continue
            if not self.client_alive(entry.client_id) or now - entry.first_ms > self.renew_max_ms:
                del self._tracked[held]
                self.dropped += 1
            elif entry.next_visible_ms - now <= self.renew_ahead_ms:
                due.append((held, entry))
        for held, entry in due:
            entry.renewing = asyncio.get_running_loop().create_future()
            asyncio.ensure_future(self._renew(held, entry))

    async def _renew(self, held: str, entry: Renewed) -> None:
        try:
            entry.handle = await self.change(entry.group, entry.topic, entry.handle, self.invisible_ms)
            entry.next_visible_ms = int(time.time() * 1000) + self.invisible_ms
            self.renewed += 1
        except Exception as exc:   # refused (revived meanwhile, broker away): it comes back by itself
            if self._tracked.get(held) is entry:
                del self._tracked[held]
            self.dropped += 1
            _limited.warning("renew-failed", "renewing a consumer's message failed: %s",
                             getattr(exc, "message", None) or exc)
        finally:
            entry.renewing.set_result(None)
            entry.renewing = None

    async def forever(self) -> None:
        # Looks often enough that a message due for renewal is renewed before its time is up.
        interval_s = max(0.05, min(1.0, self.renew_ahead_ms / 4000))
        while True:
            await asyncio.sleep(interval_s)
            await self.tick()

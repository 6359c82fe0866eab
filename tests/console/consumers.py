"""Native consumers the console tests check the pages' actions against."""

from __future__ import annotations

import threading

from rocketbox.cluster import ConsumeStatus, PushConsumer


class Collector:
    """A push consumer that keeps every delivery (a thread-safe list of MessageExt)."""

    def __init__(self, cfg, group: str, topic: str, *, fail: bool = False, **options):
        self.deliveries: list = []
        self._lock = threading.Lock()
        self.consumer = PushConsumer(group, config=cfg, consume_batch_max=1, **options)
        self.consumer.subscribe(topic)
        self.consumer.register_listener(self._on_messages)
        self.fail = fail

    def _on_messages(self, messages):
        with self._lock:
            self.deliveries.extend(messages)
        return ConsumeStatus.RECONSUME_LATER if self.fail else ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        with self._lock:
            return [m.body for m in self.deliveries]

    def by_msg_id(self, msg_id: str) -> list:
        with self._lock:
            return [m for m in self.deliveries if m.msg_id == msg_id]

    def __enter__(self) -> "Collector":
        self.consumer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.consumer.shutdown()

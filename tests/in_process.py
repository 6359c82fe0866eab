"""A one-process cluster: a broker service with its reput and flush workers, and a NameServer,
built without forking and driven through their handler tables on one ManualClock.

The tests that drive a broker in process (the broker service, pop, Java sends, metrics, stats,
RocketMQ keys, the handler fuzz target) and the seeded simulation (``tests/simulation/``) all
build it here, so a change to how a broker boots is made once. Test support only.
"""

from __future__ import annotations

import json

from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.clock import SYSTEM_CLOCK, ManualClock
from rocketbox.cluster.config import BrokerConfig, NamesrvConfig
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY, properties_text
from rocketbox.cluster.namesrv import NamesrvService
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.shm.flush import FlushService
from rocketbox.cluster.shm.reput import ReputService
from rocketbox.cluster.wire_format import Command
from tests.store_harness import tiny_config

def answer(handlers: dict, request: Command) -> Command | None:
    """The handler's one answer (returned or sent through ``reply``); None while it is parked."""
    replies: list[Command] = []
    returned = handlers[request.code](request, replies.append)
    if returned is not None:
        replies.append(returned)
    assert len(replies) <= 1, "a handler answered twice"
    return replies[0] if replies else None


def send_request(topic: str, body: bytes, *, queue_id: int = 0, born_ms: int = 0, queue_count: int = 4,
                 sys_flag: int = 0, uniq: str | None = None, **properties: str) -> Command:
    """SEND_MESSAGE as a producer builds it; UNIQ_KEY is the body's hex unless given."""
    props = properties_text([(PROPERTY_UNIQ_KEY, uniq or body.hex()), *properties.items()])
    return Command(RequestCode.SEND_MESSAGE, {
        "producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": str(queue_count),
        "queueId": str(queue_id), "sysFlag": str(sys_flag), "bornTimestamp": str(born_ms), "flag": "0",
        "properties": props}, body)


class InProcessBroker:
    """A booted broker service, its reput and flush workers (stepped, not running) and its clock.

    ``reboot`` runs it again over the same store after a clean shutdown, ``crash`` drops it as a
    killed process would (nothing persisted, no clean-shutdown mark)."""

    def __init__(self, store_dir=None, *, cfg: BrokerConfig | None = None, clock: ManualClock | None = None,
                 store_settings: dict | None = None, **settings):
        """Over ``cfg``, or a tiny store in ``store_dir`` (``store_settings`` for it) with ``settings``."""
        self.cfg = cfg or BrokerConfig(store=tiny_config(store_dir, **(store_settings or {})), **settings)
        self.clock = clock or ManualClock(now_ms=SYSTEM_CLOCK.now_ms())
        self.running = False
        self.start()

    def start(self) -> None:
        self.booted = boot(self.cfg)
        self.service = BrokerService(self.booted, clock=self.clock)
        self.reput = ReputService(self.cfg.store, self.booted.control)
        self.flush = FlushService(self.cfg.store, self.booted.control)
        self.running = True

    @property
    def handlers(self) -> dict:
        return self.service.handlers

    def request(self, request: Command) -> Command | None:
        return answer(self.service.handlers, request)

    def call(self, code, fields, body: bytes = b"") -> Command:
        """A request the handler answers at once (asserted)."""
        reply = self.request(Command(code, fields, body))
        assert reply is not None, f"code {code} left unanswered"
        return reply

    def send(self, topic: str, body: bytes, **kwargs) -> Command:
        return self.call_command(send_request(topic, body, born_ms=self.clock.now_ms(), **kwargs))

    def call_command(self, request: Command) -> Command:
        reply = self.request(request)
        assert reply is not None, f"code {request.code} left unanswered"
        return reply

    def dispatch(self) -> None:
        """What follows the broker's writes: their ConsumeQueue entries (as its loop turn ends), a
        flush under sync flush (consumers read flushed records only), the reput worker's IndexFile."""
        self.service.store.write_queue_entries()
        if self.service.durable_reads:
            self.flush.step()
        while self.reput.step(1000).count:
            pass

    def tick(self, seconds: float = 0.5) -> None:
        """One turn of the broker's timers, then ``seconds`` of the clock."""
        self.dispatch()
        self.service.on_tick()
        self.service.pull_waiters.expire(float("inf"))
        self.clock.advance(seconds)
        self.service.expire_clients()
        self.service.reviver.tick()
        self.service.schedule.tick()

    def _stop_workers(self) -> None:
        self.reput.close()
        self.flush.close()
        self.running = False

    def close(self) -> None:
        """A clean shutdown (state persisted, the store marked clean); one that fails (a full disk)
        leaves the broker as a crash would, and raises."""
        if not self.running:
            return
        self._stop_workers()
        try:
            self.service.shutdown()
        except BaseException:
            self._release()
            raise
        self.booted.control.close()

    def crash(self) -> None:
        """Stop as a SIGKILL would: nothing persisted, nothing marked; the page cache keeps what was
        written (a power cut is the disk's business: ``power_cut.cut`` after this)."""
        if self.running:
            self._stop_workers()
            self._release()

    def _release(self) -> None:
        service = self.service
        service.flush_waiters.fail_all()
        service.ha.close()
        service.pull_waiters.expire(float("inf"))
        service.namesrv_client.close()
        service.release_files()
        self.booted.store.close()
        self.booted.control.close()

    def reboot(self) -> None:
        self.close()
        self.start()


class InProcessNameServer:
    """A NameServer's handler table, in process."""

    def __init__(self, cfg: NamesrvConfig | None = None):
        self.service = NamesrvService(cfg or NamesrvConfig())

    @property
    def handlers(self) -> dict:
        return self.service.handlers

    def call(self, code, fields, body: bytes = b"") -> Command:
        reply = answer(self.service.handlers, Command(code, fields, body))
        assert reply is not None, f"code {code} left unanswered"
        return reply

    def register(self, broker: InProcessBroker, cluster: str = "C") -> Command:
        return self.call(RequestCode.REGISTER_BROKER, {
            "brokerName": broker.cfg.broker_name, "brokerId": str(broker.cfg.broker_id),
            "brokerAddr": broker.cfg.address, "clusterName": cluster},
            json.dumps({"topicConfigTable": broker.service.topics.table()}).encode())

"""A broker service built and driven in one process, without forking: booted over a store
directory, fed real request frames through its own handler table, its store dispatched by an
in-process reput service, and its time moved by a ManualClock (a delay-level message becomes
visible only once the clock has passed its delivery time)."""

from __future__ import annotations

from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.clock import SYSTEM_CLOCK, ManualClock
from rocketbox.cluster.config import BrokerConfig
from rocketbox.cluster.protocol import MessageQueue, RequestCode, ResponseCode
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY, properties_text
from rocketbox.cluster.shm.reput import ReputService
from rocketbox.cluster.wire_format import Command
from tests.store_harness import tiny_config

TOPIC = "InProcess"


def _call(service: BrokerService, request: Command) -> Command:
    """The handler's answer, returned or sent through ``reply`` (pulls always reply)."""
    replies: list[Command] = []
    answer = service.handlers[request.code](request, replies.append)
    assert (answer is None) != (not replies), "a handler answers exactly once"
    return answer if answer is not None else replies[0]


def _send(service: BrokerService, body: bytes, **properties: str) -> Command:
    props = properties_text([(PROPERTY_UNIQ_KEY, body.hex()), *properties.items()])
    request = Command(RequestCode.SEND_MESSAGE, {
        "producerGroup": "PG", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "1",
        "queueId": "0", "sysFlag": "0", "bornTimestamp": str(service.clock.now_ms()), "flag": "0",
        "properties": props}, body)
    return _call(service, request)


def _bodies(service: BrokerService, reput: ReputService) -> list[bytes]:
    while reput.step(1000).count:
        pass
    mq = MessageQueue(TOPIC, service.cfg.broker_name, 0)
    request = broker_api.pull_request("CG", mq, 0, 32, "*", 0)
    answer = _call(service, request)
    if answer.code != ResponseCode.SUCCESS:
        return []
    return [m.body for m in broker_api.pull_result(answer, mq, "in-process", None).messages]


def test_a_broker_service_runs_in_process_on_a_manual_clock(tmp_path):
    cfg = BrokerConfig(store=tiny_config(tmp_path / "store"))
    booted = boot(cfg)
    assert booted.recovery is not None and booted.controller is None
    clock = ManualClock(now_ms=SYSTEM_CLOCK.now_ms())
    service = BrokerService(booted, clock=clock)
    reput = ReputService(cfg.store, booted.control)
    try:
        assert _send(service, b"now").code == ResponseCode.SUCCESS
        assert _send(service, b"later", DELAY="1").code == ResponseCode.SUCCESS   # level 1: 1 s
        assert _bodies(service, reput) == [b"now"]

        service.schedule.tick()   # the clock has not moved: not due yet
        assert _bodies(service, reput) == [b"now"]

        clock.advance(1.5)
        service.schedule.tick()
        assert _bodies(service, reput) == [b"now", b"later"]
    finally:
        service.shutdown()

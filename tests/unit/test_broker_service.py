"""A broker service built and driven in one process, without forking: booted over a store
directory, fed real request frames through its own handler table, its store dispatched by an
in-process reput service, and its time moved by a ManualClock (a delay-level message becomes
visible only once the clock has passed its delivery time)."""

from __future__ import annotations

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.protocol import MessageQueue, ResponseCode
from tests.in_process import InProcessBroker

TOPIC = "InProcess"


def _bodies(broker: InProcessBroker) -> list[bytes]:
    broker.dispatch()
    mq = MessageQueue(TOPIC, broker.cfg.broker_name, 0)
    answer = broker.call_command(broker_api.pull_request("CG", mq, 0, 32, "*", 0))
    if answer.code != ResponseCode.SUCCESS:
        return []
    return [m.body for m in broker_api.pull_result(answer, mq, "in-process", None).messages]


def test_a_broker_service_runs_in_process_on_a_manual_clock(tmp_path):
    broker = InProcessBroker(tmp_path / "store")
    assert broker.booted.recovery is not None and broker.booted.controller is None
    try:
        assert broker.send(TOPIC, b"now", queue_count=1).code == ResponseCode.SUCCESS
        assert broker.send(TOPIC, b"later", queue_count=1, DELAY="1").code == ResponseCode.SUCCESS   # level 1: 1 s
        assert _bodies(broker) == [b"now"]

        broker.service.schedule.tick()   # the clock has not moved: not due yet
        assert _bodies(broker) == [b"now"]

        broker.clock.advance(1.5)
        broker.service.schedule.tick()
        assert _bodies(broker) == [b"now", b"later"]
    finally:
        broker.close()

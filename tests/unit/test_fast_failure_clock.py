"""Fast failure's "last empty" time (fast_failure.py) is read before the emptiness check: a pause
between the check and the clock (SIGSTOP, a long GC) must not make requests that arrived during
it look fresh. A fresh-clone run saw it: a broker stopped for 0.6 s answered its waiting remoting
sends SUCCESS instead of SYSTEM_BUSY, its busy poll having been stopped between a poll and the
clock read after it. And the converse: a stall that ended before a request arrived is not its wait
(a second look, the clock read first, still finds the door empty)."""

import socket

import pytest

from rocketbox.cluster import event_loop
from rocketbox.cluster.event_loop import EventLoop
from rocketbox.cluster.fast_failure import DoorBacklog, WaitBounds

BOUNDS = dict(send=200, pull=5000, ack=5000, heartbeat=5000, transaction=5000, admin=5000)


class _PausingClock:
    """time.monotonic, with every poll taking ``pause_s`` (the process stopped during it)."""

    def __init__(self, pause_s: float):
        self.now = 1000.0
        self.pause_s = pause_s

    def monotonic(self) -> float:
        return self.now

    def pause(self) -> None:
        self.now += self.pause_s


@pytest.fixture
def stalled_door(monkeypatch):
    """``watch(arrive_during_pause)``: (loop, backlog, time before) for a loop watching one door,
    each of its polls followed by a 0.6 s pause of the clock; the first pause may bring a byte to
    the door (a request arriving while the process is stopped)."""
    clock = _PausingClock(0.6)
    monkeypatch.setattr(event_loop.time, "monotonic", clock.monotonic)
    a, b = socket.socketpair()

    def watch(arrive_during_pause: bool):
        loop = EventLoop()
        loop.add_reader(a.fileno(), lambda: None)
        backlog = DoorBacklog(a.fileno(), WaitBounds(**BOUNDS), "test")
        loop.watch_backlog(backlog)
        poll = loop._poller.poll
        arrivals = [b"x"] if arrive_during_pause else []

        def pausing_poll(timeout_ms=None):
            events = poll(timeout_ms)
            clock.pause()
            if arrivals:
                b.send(arrivals.pop())
            return events
        monkeypatch.setattr(loop._poller, "poll", pausing_poll)
        return loop, backlog, clock.now
    yield watch
    a.close()
    b.close()


def test_a_request_that_arrived_during_a_stalled_poll_keeps_the_time_before_it(stalled_door):
    loop, backlog, before = stalled_door(arrive_during_pause=True)
    assert loop._poll_once(0)   # the second look finds it
    # Empty as of when the poll began, not 0.6 s later when the process ran again.
    assert backlog.drained_at == before


def test_a_stall_that_ended_before_anything_arrived_is_not_counted(stalled_door):
    loop, backlog, before = stalled_door(arrive_during_pause=False)
    assert loop._poll_once(0) == []
    # The second look, after the stall, still found nothing: empty as of then. (A fresh-clone
    # run saw a broker stalled 428 ms count the stall as the next request's wait.)
    assert backlog.drained_at == before + 0.6


def test_drained_takes_the_time_the_check_began():
    backlog = DoorBacklog(None, WaitBounds(**BOUNDS), "test")
    backlog.drained(12.5)
    assert backlog.drained_at == 12.5 and backlog.read == 0


class _Schedstat:
    """A schedstat file this test writes: the thread's run-queue delay as it chooses."""

    def __init__(self, path):
        self.path = path
        self.set(0.0)

    def set(self, run_delay_s: float) -> None:
        self.path.write_text(f"123456 {int(run_delay_s * 1e9)} 42\n")


def test_a_wait_the_broker_spent_waiting_for_a_cpu_is_not_charged(tmp_path, monkeypatch):
    """On a machine loaded by other processes a broker runnable but not running for 170 ms
    refused sends with 1 in queue, which RocketMQ (stamping a request once its own thread has read it)
    serves. Past its bound a wait is charged less the loop thread's run-queue delay over it."""
    from rocketbox.cluster import fast_failure, loop_stalls
    clock = _PausingClock(0.0)
    monkeypatch.setattr(fast_failure.time, "monotonic", clock.monotonic)
    stats = _Schedstat(tmp_path / "schedstat")
    delay = loop_stalls.RunQueueDelay(str(stats.path), clock=clock.monotonic)
    assert delay.available
    backlog = DoorBacklog(None, WaitBounds(**BOUNDS), "test door")
    backlog.run_queue_delay = delay
    from rocketbox.cluster.protocol import RequestCode
    from rocketbox.cluster.wire_format import Command

    arrived = clock.now
    clock.now += 0.05
    delay.sample()
    clock.now += 0.25   # 300 ms after arrival; 250 ms of it runnable without a CPU
    stats.set(0.25)
    assert backlog.refusal(Command(RequestCode.SEND_MESSAGE_V2), arrived) is None
    assert backlog.forgiven == 1 and backlog.shed == {}

    # The same wait with only 50 ms of it starved: the broker's own 250 ms in front of it is charged.
    arrived = clock.now
    delay.sample()
    clock.now += 0.3
    stats.set(0.30)
    refused = backlog.refusal(Command(RequestCode.SEND_MESSAGE_V2), arrived)
    assert refused is not None and ("period in queue: 249ms" in refused.remark or "period in queue: 250ms" in
                                    refused.remark), refused.remark
    assert backlog.shed == {"send": 1}


def test_without_schedstat_nothing_is_discounted(tmp_path):
    from rocketbox.cluster import fast_failure, loop_stalls
    delay = loop_stalls.RunQueueDelay(str(tmp_path / "missing"))
    assert not delay.available and delay.since(0.0) == 0.0


def test_a_starved_door_far_behind_is_still_refused(tmp_path, monkeypatch):
    """Starved and 65 requests behind: overload (a flood on the same cores starves the broker too)."""
    from rocketbox.cluster import fast_failure, loop_stalls
    from rocketbox.cluster.protocol import RequestCode
    from rocketbox.cluster.wire_format import Command
    clock = _PausingClock(0.0)
    monkeypatch.setattr(fast_failure.time, "monotonic", clock.monotonic)
    stats = _Schedstat(tmp_path / "schedstat")
    delay = loop_stalls.RunQueueDelay(str(stats.path), clock=clock.monotonic)
    backlog = DoorBacklog(None, WaitBounds(**BOUNDS), "test door")
    backlog.run_queue_delay = delay
    arrived = clock.now
    clock.now += 0.3
    stats.set(0.29)
    backlog.read = loop_stalls.RunQueueDelay.QUEUED_MAX   # the next request is the 65th read
    assert backlog.refusal(Command(RequestCode.SEND_MESSAGE_V2), arrived) is not None
    assert backlog.forgiven == 0 and backlog.shed == {"send": 1}

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

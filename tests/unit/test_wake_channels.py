"""The broker's wake channels (broker/channels.py) and the sync call's poll-then-sleep (spin_wait.py)."""

from rocketbox.cluster.broker import channels
from rocketbox.cluster.spin_wait import SpinWait


def test_a_datagram_reaches_the_bound_receiver_and_a_missing_one_is_not_an_error(tmp_path):
    address = channels.reput_wake(str(tmp_path))
    sender = channels.Sender(address)
    assert sender.send() is False            # nobody bound yet (a worker restarting)
    receiver = channels.Receiver(address)
    try:
        assert sender.send() and sender.send(channels.FLUSHED)
        assert receiver.drain() == [channels.WAKE, channels.FLUSHED]
        assert receiver.drain() == []
        # A full queue refuses without blocking: the worker keeps what it could not send.
        sent = sum(sender.send() for _ in range(10_000))
        assert 0 < sent < 10_000
    finally:
        receiver.close()
        sender.close()
    assert channels.flush_wake(str(tmp_path)) != address != channels.broker_notify(str(tmp_path))
    assert address.startswith(b"\0")   # the abstract namespace: no file to clean up


def test_a_coalesced_wake_goes_at_once_then_at_most_once_an_interval_and_urgent_ones_at_once(tmp_path):
    address = channels.flush_wake(str(tmp_path))
    receiver = channels.Receiver(address)
    sender = channels.Sender(address)
    scheduled = []
    wake = channels.CoalescedWake(sender, 60.0, lambda due, fn: scheduled.append((due, fn)))
    try:
        wake.wake()
        assert receiver.drain() == [channels.WAKE]   # the first: at once
        wake.wake()
        wake.wake()
        assert receiver.drain() == [] and len(scheduled) == 1   # within the interval: one, later
        due, when_due = scheduled[0]
        when_due()
        assert receiver.drain() == [channels.WAKE]
        wake.wake(urgent=True)                       # a parked pull waits: no coalescing
        assert receiver.drain() == [channels.WAKE]
        wake.wake()
        scheduled[-1][1]()
        assert receiver.drain() == [channels.WAKE] and len(scheduled) == 2
        assert channels.CoalescedWake(sender, 0.0, None).wake() is None and receiver.drain() == [channels.WAKE]
    finally:
        receiver.close()
        sender.close()


def test_a_sync_call_polls_about_twice_the_usual_answer_time_and_not_for_slow_brokers():
    spin = SpinWait(0.001)
    for _ in range(100):
        spin.answered(0.0002)
    assert 0.0003 < spin.budget_s() < 0.0005
    for _ in range(100):
        spin.answered(0.005)       # a far or busy broker: polling would only burn CPU
    assert spin.budget_s() == 0.0
    assert SpinWait(0.0).budget_s() == 0.0
    calls = iter([None, None, b"answer"])
    # A budget of seconds: three polls must fit in it however loaded the machine (1 ms once did not).
    assert SpinWait(10.0).poll(lambda: next(calls), deadline=float("inf")) == b"answer"

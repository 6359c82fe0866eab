"""zmq_frames' send and receive keep pyzmq's multipart semantics: parts in order, copied or as
Frames, NOBLOCK raising zmq.Again on a full queue, readiness only when a message waits."""

import pytest
import zmq

from rocketbox.cluster.zmq_frames import NOBLOCK, readable, recv_parts, send_parts


@pytest.fixture
def pair():
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    router.bind("inproc://frames")
    dealer.setsockopt(zmq.SNDHWM, 1)
    dealer.connect("inproc://frames")
    yield router, dealer
    router.close(0)
    dealer.close(0)
    ctx.term()


def test_parts_arrive_in_order_as_pyzmq_sends_them(pair):
    router, dealer = pair
    assert not readable(router)
    send_parts(dealer, [b"header", memoryview(b"body"), b""])
    assert router.poll(5000)
    assert readable(router)
    frames = recv_parts(router, 0, False)
    assert [bytes(f.bytes) for f in frames[1:]] == [b"header", b"body", b""]
    send_parts(router, [frames[0].bytes, b"answer", b"x" * 100_000], NOBLOCK, False)
    assert dealer.poll(5000)
    assert recv_parts(dealer) == [b"answer", b"x" * 100_000]
    assert not readable(dealer)


def test_a_full_queue_under_noblock_raises_again(pair):
    _router, dealer = pair
    with pytest.raises(zmq.Again):
        for _ in range(10_000):   # the high-water mark of 1 (plus the pipe's batch) fills long before
            send_parts(dealer, [b"h", b"b"], NOBLOCK)

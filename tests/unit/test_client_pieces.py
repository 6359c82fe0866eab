"""Pure client pieces: queue allocation, unique ids, group-commit waiters."""

from __future__ import annotations

import os

from rocketbox.cluster.broker.waiters import FlushWaiters
from rocketbox.cluster.client.allocation import allocate_average
from rocketbox.cluster.client.message import UniqueIdMaker
from rocketbox.cluster.message.ids import offset_msg_id, pack_host
from rocketbox.cluster.message.properties import encode_properties
from rocketbox.cluster.message.sysflags import SYSFLAG_COMPRESSED


def test_average_allocation_covers_every_queue_once():
    for n_queues in range(0, 13):
        for n_members in range(1, 6):
            members = [f"c{i}" for i in range(n_members)]
            queues = list(range(n_queues))
            shares = [allocate_average(queues, members, m) for m in members]
            flat = [q for share in shares for q in share]
            assert sorted(flat) == queues if n_queues >= n_members else len(set(flat)) == len(flat)
            sizes = [len(s) for s in shares]
            assert max(sizes) - min(sizes) <= 1


def test_average_allocation_is_rocketmq_paging():
    members = ["a", "b", "c"]
    assert [allocate_average(range(8), members, m) for m in members] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert allocate_average(range(8), members, "stranger") == []


def test_unique_ids_are_unique_and_fork_safe():
    maker = UniqueIdMaker()
    ids = {maker.next() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(len(i) == 32 for i in ids)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, maker.next().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child_id = os.read(r, 64).decode()
    assert child_id not in ids and child_id[:20] != next(iter(ids))[:20]


def test_group_commit_releases_every_flushed_waiter_and_times_out_the_rest():
    waiters = FlushWaiters()
    answered = []
    for end in (100, 200, 300):
        waiters.park(end, deadline_s=10.0, on_flushed=lambda e=end: answered.append(("ok", e)),
                     on_timeout=lambda e=end: answered.append(("timeout", e)))
    assert waiters.release(flushed_pos=250, now_s=0.0) == 2
    assert answered == [("ok", 100), ("ok", 200)]
    assert waiters.release(flushed_pos=250, now_s=11.0) == 1
    assert answered[-1] == ("timeout", 300)


def test_a_flush_wait_is_estimated_from_a_busy_disk_not_from_a_quiet_broker():
    waiters = FlushWaiters()
    nothing = lambda: None   # noqa: E731
    waiters.park(10 << 20, deadline_s=100.0, on_flushed=nothing, on_timeout=nothing)
    waiters.release(flushed_pos=0, now_s=0.0)
    waiters.release(flushed_pos=268, now_s=1.0)   # a second apart, a few bytes: idle time, not the disk
    assert waiters.flush_wait_s(write_pos=666) == 0.0
    waiters.release(flushed_pos=1 << 20, now_s=1.5)   # then a MiB in 1.5 s of the window
    assert waiters.flush_wait_s(write_pos=(1 << 20) + (9 << 20)) == 13.5   # 9 MiB behind


def test_received_messages_decode_lazily_but_completely():
    import zlib as _zlib

    from rocketbox.cluster.client.message import decode_messages
    from rocketbox.cluster.message import record_format as fmt

    def record(phys, body, props, sys_flag=0):
        return fmt.encode(queue_id=2, flag=5, queue_offset=phys // 1000, phys_offset=phys, sys_flag=sys_flag,
                          born_timestamp_ms=11, born_host=pack_host("10.0.0.1", 7), store_timestamp_ms=22,
                          store_host=pack_host("127.0.0.1", 10811), reconsume_times=3,
                          prepared_transaction_offset=0, body=body, topic=b"T", properties=props)
    props = encode_properties({"UNIQ_KEY": "ABC", "TAGS": "TagA", "KEYS": "k1 k2"})
    raw = record(0, b"plain", props) + record(1000, _zlib.compress(b"z" * 5000), props, SYSFLAG_COMPRESSED)
    first, second = decode_messages(raw, "broker-a")
    assert (first.topic, first.body, first.queue_id, first.phys_offset, first.store_timestamp_ms) == \
        ("T", b"plain", 2, 0, 22)
    assert (first.msg_id, first.tags, first.keys, first.flag, first.born_timestamp_ms, first.reconsume_times) == \
        ("ABC", "TagA", ["k1", "k2"], 5, 11, 3)
    assert first.offset_msg_id == offset_msg_id(pack_host("127.0.0.1", 10811), 0)
    assert second.body == b"z" * 5000 and second.broker_name == "broker-a"
    import pytest
    with pytest.raises(ValueError):
        decode_messages(raw[:-3])


def test_a_body_flagged_compressed_that_does_not_inflate_is_delivered_as_stored():
    from rocketbox.cluster.client.message import decode_messages
    from rocketbox.cluster.message import record_format as fmt
    raw = fmt.encode(queue_id=0, flag=0, queue_offset=0, phys_offset=0, sys_flag=SYSFLAG_COMPRESSED,
                     born_timestamp_ms=1, born_host=bytes(8), store_timestamp_ms=2, store_host=bytes(8),
                     reconsume_times=0, prepared_transaction_offset=0, body=b"not zlib", topic=b"T",
                     properties=b"")
    assert [m.body for m in decode_messages(raw)] == [b"not zlib"]


def test_a_bad_endpoint_fails_one_request_and_leaves_the_io_thread_serving():
    import threading

    import pytest

    from rocketbox.cluster.wire_format import Command
    from rocketbox.cluster.zmq_transport import EventLoop, RpcClient, RpcServer, TransportError
    loop = EventLoop()
    server = RpcServer("tcp://127.0.0.1:0", {1: lambda request, reply: request.response(0)}, name="echo")
    server.attach(loop)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    client = RpcClient(default_timeout_ms=2000)
    try:
        with pytest.raises(TransportError):
            client.call_async("tcp://127.0.0.1", Command(1)).result(5)  # no port: connect fails
        assert client.call_async(server.endpoint, Command(1)).result(5).code == 0
        with pytest.raises(TransportError):
            client.call("tcp://not an address", Command(1))
        assert client.call(server.endpoint, Command(1)).code == 0
    finally:
        client.close()
        loop.stopping = True
        thread.join(5)
        server.close()


def test_parked_pulls_are_counted_through_wake_and_expiry():
    from rocketbox.cluster.broker.waiters import PullWaiters
    waiters = PullWaiters()
    answered = []

    def parked(name, ready):
        def retry(final):
            if ready or final:
                answered.append((name, final))
                return True
            return False
        return retry
    waiters.park("T", 0, 10.0, parked("a", ready=True))
    waiters.park("T", 0, 10.0, parked("b", ready=False))
    waiters.park("T", 1, 5.0, parked("c", ready=False))
    assert len(waiters) == 3
    waiters.wake([("T", 0)])
    assert len(waiters) == 2 and answered == [("a", False)]
    waiters.expire(now_s=6.0)
    assert len(waiters) == 1 and answered[-1] == ("c", True)
    waiters.expire(now_s=11.0)
    assert len(waiters) == 0 and answered[-1] == ("b", True)


def test_client_registry_forgets_silent_clients_and_empty_groups():
    from rocketbox.cluster.broker.clients import ClientRegistry
    registry = ClientRegistry(expiry_ms=100)
    assert registry.heartbeat({"clientID": "c1", "consumerDataSet": [{"groupName": "G"}],
                               "producerDataSet": [{"groupName": "P"}]}, now_ms=0) == {"G"}
    assert registry.heartbeat({"clientID": "c1", "consumerDataSet": [{"groupName": "G"}]}, now_ms=50) == set()
    assert registry.expire(now_ms=120) == []
    assert registry.expire(now_ms=200) == [("G", "c1")]
    assert registry.groups == {} and registry.producers == {}

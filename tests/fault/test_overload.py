"""Overload: a broker offered more than it can store answers every request, with
SEND_OK or SYSTEM_BUSY and RocketMQ's reason, keeps its memory bounded and loses no acked message.

How the broker is made the bottleneck honestly on a two-core machine: the load generators must
cost less CPU than what they overload. The sync-flush broker's flush worker is put in a blkio
cgroup that throttles its writes (``perf/disk_throttle.py``: the broker on a slow disk; skipped
with the reason where cgroups cannot be written), and most of the load comes from cheap raw
senders (``perf/raw_sender.py``, open loop, RocketMQ's retry on SYSTEM_BUSY), beside real
Producers at a lower rate whose back-off and retries are checked. The loop's own queue (a request
that waited too long in front of the event loop) is checked by stopping the broker, as a long
pause would, with requests in flight on both doors.
"""

from __future__ import annotations

import signal
import threading
import time

import psutil
import pytest

from rocketbox.cluster import Admin, PullConsumer
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.protocol import RequestCode, ResponseCode, send_fields_short
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.wire_format import Command
from rocketbox.perf import disk_throttle, offered_load, raw_sender
from rocketbox.perf.harness import ChildProcess
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(300)

BUSY_TAGS = {"[TIMEOUT_CLEAN_QUEUE]", "[PC_SYNCHRONIZED]", "[OVERLOAD]"}
DISK_BYTES_PER_S = 8_000_000
# How long a request may go unanswered. Longer than a client's usual 3 s: on a slow disk the broker's
# own writes into the page cache stall too (the kernel's dirty-page throttling), and its one loop with
# them; the longest answer is reported (perf/RESULTS.md "Overload"). A bound, not a goal: on a busy
# CI machine answers that took over 10 s were seen, all of them SEND_OK or SYSTEM_BUSY in the end.
ANSWER_BOUND_S = 30.0
BODY_BYTES = 4096


def _send_request(topic: str, queue_id: int = 0, body: bytes = b"overload") -> Command:
    fields = {"producerGroup": "OverloadPG", "topic": topic, "queueId": str(queue_id), "sysFlag": "0",
              "bornTimestamp": str(int(time.time() * 1000)), "flag": "0", "properties": "",
              "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    return Command(RequestCode.SEND_MESSAGE_V2, send_fields_short(fields), body)


def _anon_bytes(pid: int) -> int:
    """What a process holds that is not a mapping of a file (the store's mappings are shared)."""
    info = psutil.Process(pid).memory_info()
    return info.rss - info.shared


class _MemoryWatch:
    """The largest anonymous memory of ``pid`` seen, sampled every 100 ms while the block runs."""

    def __init__(self, pid: int):
        self.pid = pid
        self.first = _anon_bytes(pid)
        self.peak = self.first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, _anon_bytes(self.pid))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


def _read_back(cfg, topic: str) -> set[str]:
    """Every UNIQ_KEY stored in ``topic``."""
    keys = set()
    with PullConsumer("OverloadReadBack", config=cfg) as consumer:
        for mq in consumer.queues(topic):
            offset = 0
            while True:
                result = consumer.pull(mq, offset, 1024)
                if not result.messages:
                    break
                keys.update(m.msg_id for m in result.messages)
                offset = result.next_begin_offset
    return keys


def test_a_broker_offered_twice_what_its_disk_takes_answers_every_request(start_cluster):
    why = disk_throttle.unavailable()
    if why:
        pytest.skip(f"the broker cannot be given a slow disk here: {why}")
    cluster = start_cluster(flush_mode=SYNC_FLUSH, store_overrides={"commitlog_file_size_bytes": 64 << 20})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Overload", 4)
    endpoint = cluster.topology.brokers[0].endpoint
    store_dir = cluster.topology.brokers[0].store.store_dir
    broker_pid = cluster.pid("broker-a")
    with disk_throttle.throttled(cluster.pid("broker-a-flush"), store_dir, DISK_BYTES_PER_S):
        capacity_run = raw_sender.merged(offered_load.run_children(raw_sender.senders(
            endpoint, "Overload", 1, rate=0, window=64, duration_s=4, body_bytes=BODY_BYTES, keep_keys=True,
            timeout_s=ANSWER_BOUND_S)))
        capacity = capacity_run["acked"] / 4
        assert capacity > 0, capacity_run
        rate = int(2 * capacity)
        # Two raw senders offer twice the capacity; two Producer processes add a quarter more each.
        children = raw_sender.senders(endpoint, "Overload", 2, rate=rate, duration_s=8, body_bytes=BODY_BYTES,
                                      timeout_s=ANSWER_BOUND_S)
        producer_rate = max(20, int(capacity / 4))
        children += [ChildProcess(offered_load._offer_process,
                                               (cluster.namesrv, "Overload", producer_rate, 8.0, BODY_BYTES,
                                                int(ANSWER_BOUND_S * 1000), "native"), f"overload-producer-{i}", 60)
                     for i in range(2)]
        with _MemoryWatch(broker_pid) as memory:
            results = offered_load.run_children(children)
    raw = raw_sender.merged(results[:2])
    producers = offered_load.merged(results[2:])

    # Every request was answered: SEND_OK, or SYSTEM_BUSY with one of RocketMQ's reasons.
    assert raw["request_unanswered"] == 0 and raw["request_other"] == 0, raw["examples"]
    assert raw["request_busy"] > 0, "offered twice the capacity, the broker refused nothing"
    assert set(raw["reasons"]) <= BUSY_TAGS, raw["reasons"]
    assert raw["acked"] > 0
    # The real Producers met SYSTEM_BUSY, backed off and retried; each send ended acked or busy.
    assert producers["busy_answers"] > 0
    assert producers["counts"]["unanswered"] == 0 and producers["counts"]["refused"] == 0, producers["examples"]
    assert producers["never_ended"] == 0
    assert set(producers["reasons"]) <= BUSY_TAGS, producers["reasons"]
    # The broker's memory stayed bounded (what it read ahead and holds is at most 10,000 requests).
    assert memory.peak - memory.first < 256 << 20, (memory.first, memory.peak)
    # Nothing acknowledged was lost.
    stored = _read_back(cfg, "Overload")
    acked = set(capacity_run["acked_keys"]) | set(raw["acked_keys"]) | set(producers["acked_keys"])
    missing = acked - stored
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages not read back"


SEND_QUEUE_WAIT_MS = 20


def test_a_burst_past_the_send_bound_is_answered_busy_with_the_reason_and_the_rest_stored(start_cluster):
    """20,000 sends arrive at once on the native door: far more than the broker stores in
    waitTimeMillsInSendQueue (20 ms here: with RocketMQ's 200 ms a fresh-clone run on a quicker
    machine stored the whole burst in time and answered none busy). Those that waited longer are
    answered SYSTEM_BUSY with RocketMQ's [TIMEOUT_CLEAN_QUEUE] reason and how long they may have
    waited; the others are stored; none is left unanswered; every acked one is read back."""
    cluster = start_cluster(broker_overrides={"wait_time_ms_in_send_queue": SEND_QUEUE_WAIT_MS})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Burst", 4)
    endpoint = cluster.topology.brokers[0].endpoint
    burst = raw_sender.merged(offered_load.run_children(raw_sender.senders(
        endpoint, "Burst", 1, rate=0, window=20_000, duration_s=0.5, body_bytes=100,
        # Every answer is awaited 15 s, not the 3 s send time-out: with the other xdist worker's
        # cluster on the two cores, a fresh-clone run once had 1,295 of them come later than 3 s.
        timeout_s=15.0)))
    assert burst["request_unanswered"] == 0 and burst["request_other"] == 0, burst["examples"]
    assert burst["request_busy"] > 0 and set(burst["reasons"]) == {"[TIMEOUT_CLEAN_QUEUE]"}, burst["reasons"]
    example = burst["examples"]["[TIMEOUT_CLEAN_QUEUE]"]
    assert example.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ")
    assert int(example.split("period in queue: ")[1].split("ms")[0]) >= SEND_QUEUE_WAIT_MS, example
    assert burst["acked"] > 0
    missing = set(burst["acked_keys"]) - _read_back(cfg, "Burst")
    assert not missing, f"{len(missing)} acknowledged messages not read back"


def test_remoting_requests_that_waited_past_their_bound_are_answered_busy_with_the_reason(start_cluster):
    """A broker that could not serve for a while (stopped here, as a long pause would; its remoting
    requests wait in the kernel) answers the sends that waited longer than waitTimeMillsInSendQueue
    SYSTEM_BUSY with [TIMEOUT_CLEAN_QUEUE], serves an admin request (its bound is 5 s), and serves
    sends again once the backlog is gone."""
    cluster = start_cluster(heartbeat_timeout_s=300)
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Paused", 1)
    endpoint = cluster.topology.brokers[0].remoting_address
    rpc = RemotingRpcClient()
    try:
        # Connected (the async requests' connection too) before the pause.
        assert rpc.call_async(endpoint, _send_request("Paused"), 5000).result(10).code == ResponseCode.SUCCESS
        pid = cluster.kill("broker-a", signal.SIGSTOP)
        try:
            sends = [rpc.call_async(endpoint, _send_request("Paused"), 10_000) for _ in range(20)]
            admin_request = rpc.call_async(endpoint, Command(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 10_000)
            time.sleep(0.6)   # the pause itself: the requests wait longer than the 200 ms bound
        finally:
            psutil.Process(pid).send_signal(signal.SIGCONT)
        answers = [f.result(10) for f in sends]
        assert {a.code for a in answers} == {ResponseCode.SYSTEM_BUSY}, [(a.code, a.remark) for a in answers]
        for answer in answers:
            assert answer.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                                            "period in queue: "), answer.remark
            assert int(answer.remark.split("period in queue: ")[1].split("ms")[0]) >= 200, answer.remark
        assert admin_request.result(10).code == ResponseCode.SUCCESS
        assert rpc.call(endpoint, _send_request("Paused"), 5000).code == ResponseCode.SUCCESS
    finally:
        rpc.close()

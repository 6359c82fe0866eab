"""Master/slave replication (broker/ha.py) through real processes under the supervisor.

A slave's CommitLog is byte-identical to its master's up to the replicated offset, and
so are its ConsumeQueue files (its reput builds them from the replicated bytes); it
catches up after a SIGKILL and from an empty store; a SYNC_MASTER answers SEND_OK only
once a slave holds the message, FLUSH_SLAVE_TIMEOUT when the slave does not answer, and
SLAVE_NOT_AVAILABLE when it has none.
"""

from __future__ import annotations

import json
import os
import shutil
import signal

from rocketbox.cluster import Admin, Message, Producer, SendStatus
from rocketbox.cluster.config import SYNC_MASTER
from rocketbox.cluster.message import record_format
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
from tests.conftest import client_config

TOPIC = "Replicated"


def runtime_info(address: str) -> dict:
    """A broker resumed after a stop answers SYSTEM_BUSY to what queued meanwhile until its door
    drains once (fast failure): asked again then."""
    client = RpcClient(default_timeout_ms=3000)
    try:
        def answered():
            response = client.call(f"tcp://{address}", Command(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
            return None if response.code == ResponseCode.SYSTEM_BUSY else response
        return json.loads(wait_until(answered, 10, interval_s=0.05, what=f"runtime info of {address}").body)
    finally:
        client.close()


def _send_batches(cfg, batches: int, size: int = 50, tag: str = "t") -> list:
    statuses = []
    with Producer("ReplPG", config=cfg) as producer:
        for i in range(batches):
            batch = [Message(TOPIC, f"{tag}-{i}-{j}-".encode() + bytes(100), tags=tag, keys=f"k{i}")
                     for j in range(size)]
            statuses.append(producer.send_batch(batch).status)
    return statuses


def _files(root: str) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if ".tmp" in name:
                continue   # a segment the allocator is still creating: renamed or gone any moment
            with open(os.path.join(dirpath, name), "rb") as f:
                out[os.path.relpath(os.path.join(dirpath, name), root)] = f.read()
    return out


def _await_replicated(cluster) -> int:
    master, slave = cluster.topology.brokers[0], cluster.topology.slaves[0]

    def caught_up():
        m, s = runtime_info(master.address), runtime_info(slave.address)
        # Equal ends are not enough: a slave told to cut its log back (its bytes past the master's restart
        # point were never the master's) is not replicated to until it restarts, whatever its length.
        followed = [f for f in m["ha"]["slaves"] if f["ackedPos"] == m["writePos"] and not f["diverged"]]
        return m["writePos"] == s["writePos"] == s["dispatchedPos"] and m["dispatchedPos"] == m["writePos"] \
            and followed and m["writePos"]
    wait_until(caught_up, 30, interval_s=0.05, what="slave caught up with the master")
    return runtime_info(master.address)["writePos"]


def _record_around(segment: bytes, at: int) -> str:
    """The record holding byte ``at`` of a segment, found by walking it from its start."""
    pos = 0
    while pos < len(segment):
        rec = record_format.decode_at(segment, pos, check_crc=True)
        if not isinstance(rec, record_format.Record):
            return f"{rec!r} at {pos}"
        if pos + rec.total_size > at:
            return (f"record at {pos} ({rec.total_size} B): body {rec.body[:40]!r}, queue {rec.queue_id} offset "
                    f"{rec.queue_offset}, born {rec.born_timestamp_ms}, stored {rec.store_timestamp_ms}, "
                    f"properties {rec.properties_raw[:80]!r}")
        pos += rec.total_size
    return "past the records"


def _first_difference(name: str, master: bytes, slave: bytes, end: int, master_store: str, slave_store: str) -> str:
    at = next(i for i, (m, s) in enumerate(zip(master, slave)) if m != s) if len(master) == len(slave) \
        else min(len(master), len(slave))
    return (f"segment {name} differs below the replicated end {end}, first at {int(name) + at}:\n"
            f"  master: {_record_around(master, at)}\n  slave:  {_record_around(slave, at)}\n"
            f"  stores: {master_store} {slave_store}")


def assert_identical(cluster, segments_min: int = 1) -> None:
    """CommitLog bytes up to the master's end and every ConsumeQueue file are the same on both."""
    end = _await_replicated(cluster)
    master_store, slave_store = cluster.topology.brokers[0].store.store_dir, cluster.topology.slaves[0].store.store_dir
    master_log, slave_log = _files(os.path.join(master_store, "commitlog")), _files(os.path.join(slave_store, "commitlog"))
    file_size = cluster.topology.brokers[0].store.commitlog_file_size_bytes
    # Segments only: the allocator may be ahead, and a segment it is still creating is a .tmp file.
    with_data = sorted(name for name in master_log if name.isdigit() and int(name) < end)
    assert with_data == sorted(name for name in slave_log if name.isdigit() and int(name) < end) \
        and len(with_data) >= segments_min
    for name in with_data:
        used = min(file_size, end - int(name))
        if master_log[name][:used] != slave_log[name][:used]:
            raise AssertionError(_first_difference(name, master_log[name][:used], slave_log[name][:used], end,
                                                   master_store, slave_store))
    # Entries past the replicated end may differ only in not being there yet: none here.
    master_cq = _files(os.path.join(master_store, "consumequeue"))
    slave_cq = _files(os.path.join(slave_store, "consumequeue"))
    assert master_cq.keys() == slave_cq.keys() and master_cq
    for name in master_cq:
        assert master_cq[name] == slave_cq[name], f"ConsumeQueue {name} differs"


def test_slave_files_are_byte_identical_and_catch_up_after_kill_and_from_empty(start_cluster):
    # 4 MiB segments: the load rolls segments, so end-of-file blanks are replicated too.
    cluster = start_cluster(slaves=1, store_overrides={"commitlog_file_size_bytes": 4 * 1024 * 1024,
                                                       "message_size_bytes_max": 1024 * 1024})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 4)
    routes = wait_until(lambda: (r := _route(cfg)) and len(r) == 2 and r, 10, what="slave in the route")
    assert routes == {"0": cluster.topology.brokers[0].address, "1": cluster.topology.slaves[0].address}
    assert all(s == SendStatus.SEND_OK for s in _send_batches(cfg, 400, tag="a"))
    assert_identical(cluster, segments_min=2)

    # The slave dies mid-stream; it resumes from its own CommitLog end.
    victim = cluster.kill("broker-a-s1")
    assert all(s == SendStatus.SEND_OK for s in _send_batches(cfg, 200, tag="b"))
    cluster.await_running("broker-a-s1", not_pid=victim)
    assert_identical(cluster)

    # From nothing: stop the slave's group, empty its store, let the supervisor bring it back.
    slave_store = cluster.topology.slaves[0].store.store_dir
    for name in ("broker-a-s1-flush", "broker-a-s1-reput", "broker-a-s1"):
        os.kill(cluster.pid(name), signal.SIGSTOP)
    try:
        shutil.rmtree(slave_store)
    finally:
        for name in ("broker-a-s1-flush", "broker-a-s1-reput", "broker-a-s1"):
            os.kill(cluster.pid(name), signal.SIGCONT)
    victim = cluster.kill("broker-a-s1")
    cluster.await_running("broker-a-s1", not_pid=victim)
    assert_identical(cluster)
    assert runtime_info(cluster.topology.brokers[0].address)["ha"]["inSync"]


def _route(cfg) -> dict:
    with Admin(config=cfg) as admin:
        try:
            route = admin.route(TOPIC)
        except Exception:
            return {}
    return route["brokerDatas"][0]["brokerAddrs"] if route.get("brokerDatas") else {}


def test_sync_master_waits_for_the_slave(start_cluster):
    cluster = start_cluster(slaves=1, broker_overrides={"broker_role": SYNC_MASTER,
                                                        "sync_replication_timeout_ms": 3000,
                                                        "ha_slave_expiry_ms": 60_000})
    cfg = client_config(cluster, send_retry_count=0)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 4)
    master = cluster.topology.brokers[0]
    wait_until(lambda: runtime_info(master.address)["ha"]["inSync"], 10, what="slave in sync")
    assert all(s == SendStatus.SEND_OK for s in _send_batches(cfg, 20))
    # SEND_OK means the slave held it: its offset is at least the master's end when answered.
    assert runtime_info(master.address)["confirmPos"] == runtime_info(master.address)["writePos"]

    # A slave that does not answer: each send waits its time-out, then FLUSH_SLAVE_TIMEOUT.
    names = ("broker-a-s1", "broker-a-s1-flush", "broker-a-s1-reput")
    for name in names:
        os.kill(cluster.pid(name), signal.SIGSTOP)
    try:
        assert _send_batches(cfg, 3, tag="stopped") == [SendStatus.FLUSH_SLAVE_TIMEOUT] * 3
    finally:
        for name in names:
            os.kill(cluster.pid(name), signal.SIGCONT)
    wait_until(lambda: _send_batches(cfg, 1, tag="again") == [SendStatus.SEND_OK], 20, interval_s=0.1,
               what="SEND_OK once the slave runs again")
    assert_identical(cluster)


def test_sync_master_without_slave_answers_slave_not_available(start_cluster):
    cluster = start_cluster(broker_overrides={"broker_role": SYNC_MASTER})
    cfg = client_config(cluster, send_retry_count=0)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 4)
    assert _send_batches(cfg, 2) == [SendStatus.SLAVE_NOT_AVAILABLE] * 2
    with Producer("ReplPG", config=cfg) as producer:
        assert producer.send(Message(TOPIC, b"one")).status == SendStatus.SLAVE_NOT_AVAILABLE


def test_slave_refuses_sends(start_cluster):
    cluster = start_cluster(slaves=1)
    client = RpcClient(default_timeout_ms=3000)
    try:
        response = client.call(f"tcp://{cluster.topology.slaves[0].address}", Command(
            RequestCode.SEND_MESSAGE, {"producerGroup": "g", "topic": TOPIC, "defaultTopic": "TBW102",
                                       "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                       "bornTimestamp": "0", "flag": "0", "properties": ""}, b"x"))
    finally:
        client.close()
    assert response.code == 14 and "slave" in response.remark

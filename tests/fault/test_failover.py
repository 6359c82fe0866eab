"""Automatic, epoch-fenced failover (cluster/controller/, broker/controller_client.py) with real processes.

A master that stops answering is replaced by its in-sync slave in a new epoch, the routes and
clients follow, the stale master takes no writes when it resumes and rejoins as a slave,
cutting its log back to what the new master holds; the replicas end byte-identical and no
acknowledged message is lost, through a dozen master faults under sync flush and sync
replication.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from collections import Counter

from rocketbox.cluster import ConsumeStatus, Message, Producer, PullConsumer, PushConsumer, SendStatus
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.config import SYNC_FLUSH, SYNC_MASTER
from rocketbox.cluster.fault_proxy import PartitionProxy
from rocketbox.cluster.testing import (LocalCluster, broker_runtime_info, compare_replicas, read_topic, store_host_prefix,
                             wait_until)
from rocketbox.cluster.topology import group_name
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient, TransportError
from tests.conftest import client_config
from tests.fault.test_replication import runtime_info

TOPIC = "Failover"
GROUP = "broker-a"
FAILOVER_DEADLINE_S = 30.0   # the bound; the controller's time-out is 3 s


def _cluster(start_cluster, **overrides):
    broker = {"broker_role": SYNC_MASTER, "sync_replication_timeout_ms": 1500, **overrides}
    cluster = start_cluster(slaves=1, failover=True, flush_mode=SYNC_FLUSH, broker_overrides=broker)
    Admin(config=client_config(cluster)).create_topic(TOPIC, 2)
    return cluster


def _info_or_none(address: str) -> dict | None:
    return broker_runtime_info(address, timeout_ms=3000)


def _await_healthy(cluster, admin, timeout_s: float = 60.0) -> str:
    return cluster.await_group_serving(GROUP, admin, timeout_s)


def _await_identical(cluster) -> int:
    """Until every replica has the same CommitLog end; then their bytes must be equal."""
    result = compare_replicas(cluster.data_dir, cluster.namesrv, GROUP)
    assert result["error"] is None, result["error"]
    assert result["identical"], f"replicas differ below their common end, first at {result['first_difference']}"
    return result["end"]


def _ids_read(cluster) -> list[str]:
    with PullConsumer("FailoverReader", config=client_config(cluster)) as consumer:
        return [m.msg_id for m in read_topic(consumer, TOPIC)]


def test_stopped_master_is_replaced_fenced_and_rejoins_as_slave(start_cluster):
    cluster = _cluster(start_cluster)
    admin = Admin(config=client_config(cluster))
    acked = []
    with Producer("FoPG", config=client_config(cluster, request_timeout_ms=1000, send_timeout_ms=3000)) as producer:
        for i in range(50):
            result = producer.send(Message(TOPIC, f"before-{i}".encode()))
            assert result.status == SendStatus.SEND_OK
            acked.append(result.msg_id)
        old = _await_healthy(cluster, admin)
        old_cfg = cluster.replica_configs(GROUP)[old]
        epoch_before = admin.controller_group(GROUP)["epoch"]

        stopped_at = time.monotonic()
        cluster.kill(old, signal.SIGSTOP)
        try:
            new = wait_until(lambda: (cluster.master_child(GROUP, admin) or old) != old and
                             cluster.master_child(GROUP, admin), FAILOVER_DEADLINE_S, interval_s=0.1,
                             what="a new master")
            view = admin.controller_group(GROUP)
            assert view["epoch"] > epoch_before and view["syncStateSet"] == [view["masterId"]]

            # Clients follow: a send is stored by the new master (only it is in the sync set now,
            # so it answers SEND_OK at once: tests/fault/test_sync_state_set.py).
            def stored_by_new_master():
                result = _probe_send(producer, acked)
                return result is not None and result.offset_msg_id.startswith(_offset_msg_id_prefix(cluster, new))
            wait_until(stored_by_new_master, FAILOVER_DEADLINE_S, interval_s=0.05, what="a send on the new master")
            print(f"failover: {time.monotonic() - stopped_at:.2f} s from SIGSTOP to a write on {new}")
        finally:
            cluster.kill(old, signal.SIGCONT)

        # Fenced: the resumed master's lease lapsed while it was stopped; it answers not writable
        # (or has already left to restart as a slave), and the route does not point at it.
        info = _info_or_none(old_cfg.address)
        assert info is None or info["writable"] is False, info
        route = admin.route(TOPIC)
        assert old_cfg.address not in [b["brokerAddrs"].get("0") for b in route["brokerDatas"]]

        assert _await_healthy(cluster, admin) == new
        old_info = wait_until(lambda: _info_or_none(old_cfg.address), 30, what="old master back")
        assert old_info["brokerRole"] == "SLAVE" and old_info["controller"]["masterId"] != old_cfg.broker_id + 1
        for i in range(50):
            result = producer.send(Message(TOPIC, f"after-{i}".encode()))
            assert result.status == SendStatus.SEND_OK
            acked.append(result.msg_id)
    _await_identical(cluster)
    assert set(acked) <= set(_ids_read(cluster))
    admin.shutdown()


def _probe_send(producer, acked: list):
    """One send while the group may be failing over: its result (SEND_OK ones recorded), or None."""
    try:
        result = producer.send(Message(TOPIC, b"during"))
    except Exception:
        return None
    if result.status == SendStatus.SEND_OK:
        acked.append(result.msg_id)
    return result


def _offset_msg_id_prefix(cluster, child: str) -> str:
    return store_host_prefix(cluster.replica_configs(GROUP)[child])


def test_returning_master_truncates_what_the_new_master_never_had(start_cluster):
    cluster = _cluster(start_cluster)
    admin = Admin(config=client_config(cluster))
    with Producer("FoPG2", config=client_config(cluster, send_retry_count=0)) as producer:
        for i in range(20):
            assert producer.send(Message(TOPIC, f"ok-{i}".encode())).status == SendStatus.SEND_OK
        master = _await_healthy(cluster, admin)
        slave = next(name for name in cluster.replica_configs(GROUP) if name != master)
        master_cfg = cluster.replica_configs(GROUP)[master]
        # The slave dies and stays down (its supervisor is stopped): these are stored on the
        # master only and never confirmed.
        supervisor = cluster.process.pid
        os.kill(supervisor, signal.SIGSTOP)
        try:
            cluster.kill(slave, signal.SIGKILL)
            unconfirmed = [producer.send(Message(TOPIC, f"unconfirmed-{i}".encode())) for i in range(5)]
            assert {r.status for r in unconfirmed} <= {SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE}
            diverged_end = runtime_info(master_cfg.address)["writePos"]
            # The master stops; the slave comes back (still in the sync set) and is elected without them.
            cluster.kill(master, signal.SIGSTOP)
        finally:
            os.kill(supervisor, signal.SIGCONT)
    slave_cfg = cluster.replica_configs(GROUP)[slave]
    try:
        wait_until(lambda: cluster.master_child(GROUP, admin) == slave, FAILOVER_DEADLINE_S, interval_s=0.1,
                   what="the slave elected")
        # Resumed only once the new master serves: a replica still booting may otherwise copy the
        # old master's tail (a prefix of epoch 1, harmless) before it learns it was elected.
        wait_until(lambda: (_info_or_none(slave_cfg.address) or {}).get("writable"), FAILOVER_DEADLINE_S,
                   interval_s=0.1, what="the new master writable")
    finally:
        cluster.kill(master, signal.SIGCONT)
    _await_healthy(cluster, admin)
    end = _await_identical(cluster)
    info = runtime_info(master_cfg.address)
    new_epoch_start = info["epochs"][-1][1]
    assert new_epoch_start < diverged_end and "truncated" in info["recovery"]
    assert end >= new_epoch_start
    ids = set(_ids_read(cluster))
    assert not ids & {r.msg_id for r in unconfirmed}
    admin.shutdown()


class _WritableWatch:
    """Polls every replica's runtime info; records any round in which two say they take writes."""

    def __init__(self, addresses: list[str]):
        self.addresses = addresses
        self.rounds = 0
        self.both_writable: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            writable = []
            for address in self.addresses:
                # A short time-out: a stopped replica costs little of each round.
                info = broker_runtime_info(address, timeout_ms=300) or {}
                if info.get("writable"):
                    writable.append((address, info["epoch"]))
            self.rounds += 1
            if len(writable) > 1:
                self.both_writable.append(tuple(writable))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


class _Load:
    """Senders of single messages until stopped; each message is resent (same UNIQ_KEY) until
    SEND_OK, so every message has one acknowledged send and a known number of attempts."""

    def __init__(self, cluster, threads: int = 2):
        self.cfg = client_config(cluster, request_timeout_ms=1000, send_timeout_ms=2000, send_retry_count=0)
        self.attempts: dict[str, int] = {}
        self.acked: set[str] = set()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def _run(self, index: int) -> None:
        with Producer(f"FoLoad{index}", config=self.cfg) as producer:
            seq = 0
            while not self._stop.is_set():
                msg = Message(TOPIC, f"{index}-{seq}".encode())
                seq += 1
                for _ in range(200):   # bounded: a message is abandoned (never acked) after that
                    try:
                        result = producer.send(msg)
                    except Exception:
                        result = None
                    uniq = msg.properties.get("UNIQ_KEY")
                    with self.lock:
                        self.attempts[uniq] = self.attempts.get(uniq, 0) + 1
                        if result is not None and result.status == SendStatus.SEND_OK:
                            self.acked.add(uniq)
                            break
                    if self._stop.wait(0.02):   # not a hot loop while the group has no slave in sync
                        break

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(30)


def test_twelve_master_faults_under_sync_flush_and_sync_replication_lose_nothing(start_cluster):
    cluster = _cluster(start_cluster)
    admin = Admin(config=client_config(cluster))
    _await_healthy(cluster, admin)
    addresses = [c.address for c in cluster.replica_configs(GROUP).values()]
    failovers = 0
    with _WritableWatch(addresses) as watch, _Load(cluster) as load:
        for fault in range(12):
            master = _await_healthy(cluster, admin)
            before = load.acked_count()
            wait_until(lambda: load.acked_count() > before + 20, 60, what="acknowledged sends between faults")
            epoch = admin.controller_group(GROUP)["epoch"]
            if fault % 2 == 0:
                cluster.await_running(master, not_pid=cluster.kill(master, signal.SIGKILL))
            else:   # stopped past the controller's time-out: a real failover
                cluster.kill(master, signal.SIGSTOP)
                try:
                    wait_until(lambda: admin.controller_group(GROUP)["epoch"] > epoch, FAILOVER_DEADLINE_S,
                               interval_s=0.1, what="a new epoch")
                finally:
                    cluster.kill(master, signal.SIGCONT)
            _await_healthy(cluster, admin)
            failovers += admin.controller_group(GROUP)["epoch"] > epoch
        after = load.acked_count()
        wait_until(lambda: load.acked_count() > after + 20, 60, what="sends after the last fault")
    assert failovers >= 6
    assert watch.rounds > 50 and not watch.both_writable, watch.both_writable
    _await_identical(cluster)
    ids = _ids_read(cluster)
    assert load.acked <= set(ids), f"{len(load.acked - set(ids))} acknowledged messages lost"
    duplicates = {i for i, n in Counter(ids).items() if n > 1}
    assert all(load.attempts.get(i, 0) > 1 for i in duplicates), "a duplicate without a resend"
    print(f"12 faults, {failovers} failovers, {len(load.acked)} acknowledged, {len(set(ids))} distinct stored "
          f"({len(ids)} records), {len(duplicates)} duplicated by resends, {watch.rounds} writable-master checks")
    admin.shutdown()


def test_three_controllers_survive_a_stopped_leader(start_cluster):
    """With three NameServers the controller is a Raft group of three: with its leader stopped the
    other two elect a new leader, and a master that dies then is still replaced."""
    cluster = start_cluster(namesrvs=3, slaves=1, failover=True, flush_mode=SYNC_FLUSH,
                            broker_overrides={"broker_role": SYNC_MASTER})
    admin = Admin(config=client_config(cluster))
    Admin(config=client_config(cluster)).create_topic(TOPIC, 2)
    master = _await_healthy(cluster, admin)

    def leader_node() -> str | None:
        for i, ns in enumerate(cluster.topology.namesrvs):
            try:
                if json.loads(RpcClient(default_timeout_ms=500).call(
                        ns.endpoint, Command(RequestCode.CONTROLLER_GET_METADATA_INFO, {})).body)["isLeader"]:
                    return f"namesrv-{i}"
            except TransportError:
                continue
        return None
    old_leader = wait_until(leader_node, 30, what="a controller leader")
    cluster.kill(old_leader, signal.SIGSTOP)
    try:
        wait_until(lambda: (leader_node() or old_leader) != old_leader, 30, interval_s=0.2, what="a new leader")
        epoch = admin.controller_group(GROUP)["epoch"]
        cluster.kill(master, signal.SIGSTOP)
        try:
            wait_until(lambda: admin.controller_group(GROUP)["epoch"] > epoch, FAILOVER_DEADLINE_S, interval_s=0.1,
                       what="a failover decided by the two remaining controllers")
        finally:
            cluster.kill(master, signal.SIGCONT)
        assert cluster.master_child(GROUP, admin) != master
    finally:
        cluster.kill(old_leader, signal.SIGCONT)
    _await_healthy(cluster, admin)
    with Producer("Fo3PG", config=client_config(cluster)) as producer:
        # The returned replica may still be catching up on a loaded machine: FLUSH_SLAVE_TIMEOUT
        # (stored, not yet confirmed) until it is in sync again.
        wait_until(lambda: producer.send(Message(TOPIC, b"after")).status == SendStatus.SEND_OK, 30,
                   interval_s=0.2, what="SEND_OK from the new master with its replica in sync")
    admin.shutdown()


def test_master_partitioned_from_the_controller_stops_writing_and_is_replaced(tmp_path):
    """A partition, not a stopped process: the master runs on and clients still reach it, but its
    heartbeats to the controller go through a proxy that is cut. Its lease lapses (it refuses
    sends), the slave is elected, clients move; once healed it rejoins as a slave."""
    cluster = LocalCluster(str(tmp_path / "cluster"), slaves=1, failover=True, flush_mode=SYNC_FLUSH,
                           broker_overrides={"broker_role": SYNC_MASTER, "sync_replication_timeout_ms": 1500})
    namesrv = cluster.topology.namesrvs[0]
    proxies = {}
    replicas = []
    for cfg in cluster.topology.brokers + cluster.topology.slaves:   # each replica reaches the controller by a proxy
        proxy = PartitionProxy(namesrv.host, namesrv.port).start()
        replicas.append(dataclasses.replace(cfg, namesrv_endpoints=(f"tcp://{proxy.address}",)))
        proxies[group_name(cfg)] = proxy
    cluster.topology = dataclasses.replace(cluster.topology, brokers=tuple(replicas[:1]), slaves=tuple(replicas[1:]))
    try:
        cluster.start()
        admin = Admin(config=client_config(cluster))
        admin.create_topic(TOPIC, 2)
        master = _await_healthy(cluster, admin)
        master_cfg = cluster.replica_configs(GROUP)[master]
        acked = []
        addresses = [c.address for c in cluster.replica_configs(GROUP).values()]
        with _WritableWatch(addresses) as watch, \
                Producer("FoPartPG", config=client_config(cluster, request_timeout_ms=1000)) as producer:
            for i in range(20):
                acked.append(producer.send(Message(TOPIC, f"before-{i}".encode())).msg_id)
            epoch = admin.controller_group(GROUP)["epoch"]
            proxies[master].cut()
            # Still reachable by clients, but not writable once its lease lapses (2 s) ...
            epoch_when_lapse_seen = []

            def lapsed() -> bool:
                if (_info_or_none(master_cfg.address) or {}).get("writable") is not False:
                    return False
                # Read after the lapse was seen: an unchanged epoch proves the lapse came first.
                epoch_when_lapse_seen.append(admin.controller_group(GROUP)["epoch"])
                return True
            wait_until(lapsed, 10, interval_s=0.05, what="the cut-off master refusing writes")
            # ... and only after that does the controller elect the slave (3 s of silence), so
            # two masters never both take writes.
            assert epoch_when_lapse_seen == [epoch], "the slave was elected before the old master's lease lapsed"
            wait_until(lambda: admin.controller_group(GROUP)["epoch"] > epoch, FAILOVER_DEADLINE_S,
                       interval_s=0.1, what="the slave elected")

            def sent_on_new_master():
                result = _probe_send(producer, acked)
                return result is not None and result.status in (SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE)
            wait_until(sent_on_new_master, FAILOVER_DEADLINE_S, interval_s=0.05, what="a send on the new master")
            assert (_info_or_none(master_cfg.address) or {}).get("writable") is not True
            proxies[master].heal()
            assert _await_healthy(cluster, admin) != master
            for i in range(20):
                result = producer.send(Message(TOPIC, f"after-{i}".encode()))
                assert result.status == SendStatus.SEND_OK
                acked.append(result.msg_id)
        assert not watch.both_writable, watch.both_writable
        print(f"partition: {proxies[master].connections_cut} connections cut, {watch.rounds} writability checks")
        _await_identical(cluster)
        assert set(acked) <= set(_ids_read(cluster))
        admin.shutdown()
    finally:
        cluster.stop()
        for proxy in proxies.values():
            proxy.close()


def test_a_restarted_single_controller_keeps_its_state(start_cluster):
    """One NameServer is the whole controller: its Raft journal brings the group's master, epoch and
    sync set back after a SIGKILL, and the brokers keep serving under the same epoch."""
    cluster = _cluster(start_cluster)
    admin = Admin(config=client_config(cluster))
    master = _await_healthy(cluster, admin)
    before = admin.controller_group(GROUP)
    cluster.await_running("namesrv-0", not_pid=cluster.kill("namesrv-0", signal.SIGKILL))
    after = wait_until(lambda: _view_if_leader(admin), 30, interval_s=0.1, what="the controller back as leader")
    assert (after["masterId"], after["epoch"], after["syncStateSet"]) == \
        (before["masterId"], before["epoch"], before["syncStateSet"])
    assert _await_healthy(cluster, admin) == master
    assert admin.controller_group(GROUP)["epoch"] == before["epoch"]
    admin.shutdown()


def _view_if_leader(admin) -> dict | None:
    try:
        view = admin.controller_group(GROUP)
    except Exception:
        return None
    return view if view.get("isLeader") else None


def test_consumer_offsets_reach_a_new_master_that_had_not_copied_them(start_cluster):
    """A slave copies the master's offsets only now and then (here: never after boot), so a new
    master may lack the last commits; each member commits its unchanged point again to it
    (found by the Spark checker: messages delivered again below an accepted commit)."""
    cluster = _cluster(start_cluster, slave_sync_interval_ms=600_000)
    admin = Admin(config=client_config(cluster))
    with Producer("FoOffPG", config=client_config(cluster)) as producer:
        for i in range(100):
            assert producer.send(Message(TOPIC, f"m-{i}".encode())).status == SendStatus.SEND_OK
    master = _await_healthy(cluster, admin)
    consumed = []
    consumer = PushConsumer("FoOffsets", config=client_config(cluster, request_timeout_ms=1000))
    consumer.subscribe(TOPIC)
    consumer.register_listener(lambda messages: consumed.extend(messages) or ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()
    try:
        queues = admin.queue_offsets(TOPIC, "FoOffsets")
        wait_until(lambda: _committed_total(admin, "FoOffsets") == 100, 60, what="all 100 committed on the master")
        epoch = admin.controller_group(GROUP)["epoch"]
        cluster.kill(master, signal.SIGSTOP)
        try:
            wait_until(lambda: admin.controller_group(GROUP)["epoch"] > epoch, FAILOVER_DEADLINE_S,
                       interval_s=0.1, what="the slave elected")
            # The new master had none of the group's commits; the member sends them again.
            wait_until(lambda: _committed_total(admin, "FoOffsets") == 100, 60, interval_s=0.2,
                       what="the commits on the new master")
        finally:
            cluster.kill(master, signal.SIGCONT)
    finally:
        consumer.shutdown()
    assert len(queues) == 2
    admin.shutdown()


def _committed_total(admin, group: str) -> int | None:
    """The group's committed offsets of TOPIC summed, as the route's master has them (None: no answer)."""
    try:
        return sum(q["consumerOffset"] or 0 for q in admin.queue_offsets(TOPIC, group))
    except Exception:
        return None

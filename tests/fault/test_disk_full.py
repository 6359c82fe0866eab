"""A full disk refuses writes with DISK_FULL; nothing crashes or corrupts; writes resume.

The broker's store directory is a small tmpfs mounted by the test (root only, as
in CI), so the disk really fills: a ballast file takes the free space, sends run
until the preallocated segments are used up and the broker answers DISK_FULL,
then the ballast goes and sends succeed again.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from rocketbox.cluster import Admin, BrokerError, Message, Producer, PullConsumer, SendStatus
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.testing import LocalCluster, read_topic, wait_until
from tests.conftest import client_config

TOPIC = "Full"


@pytest.fixture
def tmpfs_store(tmp_path):
    store_dir = tmp_path / "cluster" / "broker-a" / "store"
    store_dir.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(store_dir)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    yield tmp_path / "cluster", store_dir
    subprocess.run(["umount", "-l", str(store_dir)], capture_output=True)


def test_full_disk_refuses_then_resumes(tmpfs_store):
    data_dir, store_dir = tmpfs_store
    cluster = LocalCluster(str(data_dir), store_overrides={
        "commitlog_file_size_bytes": 4 * 1024 * 1024, "message_size_bytes_max": 1024 * 1024,
        "consumequeue_entries_per_file": 20_000, "index_slot_count": 5_000, "index_entry_count_max": 40_000,
        "disk_free_bytes_min": 2 * 1024 * 1024})
    with cluster:
        cfg = client_config(cluster)
        with Admin(config=cfg) as admin:
            admin.create_topic(TOPIC, 1)
        acked = {}
        with Producer("PG", config=cfg) as producer:
            producer.send(Message(TOPIC, b"first"))
            stat = os.statvfs(store_dir)
            ballast = store_dir / "ballast"
            with open(ballast, "wb") as f:
                f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - 3 * 1024 * 1024))
            refused = None
            for i in range(400):
                batch = [Message(TOPIC, os.urandom(16) + bytes(1000)) for _ in range(50)]
                try:
                    result = producer.send_batch(batch)
                except BrokerError as exc:
                    refused = exc
                    break
                assert result.status == SendStatus.SEND_OK
                for m in batch:
                    acked[m.properties["UNIQ_KEY"]] = m.body
            assert refused is not None, "the disk never filled"
            assert refused.code == ResponseCode.DISK_FULL and "full" in refused.remark
            assert cluster.child("broker-a")["restarts"] == 0
            os.unlink(ballast)
            after = [Message(TOPIC, f"after-{i}".encode()) for i in range(20)]
            wait_until(lambda: _try_send(producer, after), 20, interval_s=0.2, what="writes resumed")
            for m in after:
                acked[m.properties["UNIQ_KEY"]] = m.body
        with PullConsumer("CG", config=cfg) as consumer:
            got = {}

            def drained():
                got.update({m.msg_id: m.body for m in read_topic(consumer, TOPIC)})
                return all(k in got for k in acked)
            wait_until(drained, 30, what="every acknowledged message readable")
        assert all(got[k] == v for k, v in acked.items())
        assert all(c["restarts"] == 0 for c in cluster.state()["children"])


def _try_send(producer, batch) -> bool:
    try:
        return producer.send_batch(batch).status == SendStatus.SEND_OK
    except BrokerError:
        return False

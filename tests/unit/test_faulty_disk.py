"""The disk's twin behind a real store in one process (``tests/faulty_disk.py``): a full disk
refuses appends and whole-file writes, a slow sync moves the clock, and a power cut loses what was
written after the last sync while the synced records stay."""

from __future__ import annotations

import errno
import random

import pytest

from rocketbox.cluster.clock import ManualClock
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm import durable
from rocketbox.cluster.shm.store import PutMessageStatus
from tests.faulty_disk import FaultyDisk
from tests.store_harness import Harness, message, tiny_config


def _disk(tmp_path, seed=1):
    return FaultyDisk(str(tmp_path / "store"), str(tmp_path / "image"), random.Random(seed), ManualClock())


def test_a_full_disk_refuses_appends_and_whole_file_writes(tmp_path):
    disk = _disk(tmp_path)
    with disk.installed():
        harness = Harness(tiny_config(tmp_path / "store", disk_free_bytes_min=1))
        harness.store.commitlog.disk_check_interval_ms = 0
        assert harness.store.put_messages("T", 0, [message(b"room")]).status == PutMessageStatus.PUT_OK
        disk.full = True
        assert harness.store.put_messages("T", 0, [message(b"full")]).status != PutMessageStatus.PUT_OK
        with pytest.raises(OSError) as raised:
            durable.atomic_write(str(tmp_path / "store" / "state.json"), b"{}")
        assert raised.value.errno == errno.ENOSPC
        disk.full = False
        assert harness.store.put_messages("T", 0, [message(b"again")]).status == PutMessageStatus.PUT_OK
        harness.close()


def test_a_slow_sync_moves_the_clock(tmp_path):
    disk = _disk(tmp_path)
    with disk.installed():
        disk.sync_delay_s = 0.25
        before = disk.clock.monotonic()
        durable.atomic_write(str(tmp_path / "store" / "state.json"), b"{}")   # file and directory: two syncs
        assert disk.clock.monotonic() - before == pytest.approx(0.5)


def test_a_power_cut_keeps_what_was_synced_and_loses_the_rest(tmp_path):
    cfg = tiny_config(tmp_path / "store")
    disk = _disk(tmp_path)
    with disk.installed():
        harness = Harness(cfg)
        for i in range(5):
            harness.store.put_messages("T", 0, [message(b"synced %d" % i)])
        harness.dispatch_all()
        harness.flush.step()
        for i in range(5):
            harness.store.put_messages("T", 0, [message(b"unsynced %d" % i)])
        harness.close()
        disk.power_cut(weights=(1, 0, 0))   # every unsynced page keeps its old bytes
        harness = Harness(cfg)
        harness.dispatch_all()
        records = harness.store.get_messages("T", 0, 0, 32, 1 << 20).records
        harness.close()
    assert [r.body for r in fmt.iter_records(b"".join(records))] == [b"synced %d" % i for i in range(5)]

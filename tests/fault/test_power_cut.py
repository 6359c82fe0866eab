"""Power cuts against a broker store: SIGKILL cannot lose the page cache, so these
tests keep a durable image of every completed sync (``cluster/shm/power_cut.py``), freeze the
writer at a random moment (SIGSTOP, then SIGKILL), rewrite its files as a disk would hold them
after the power went out (unsynced pages old, new or garbage; names never synced gone), recover,
and check what the store serves.

Under sync flush every batch acknowledged is there; under async flush every batch acknowledged
before the last completed flush is (the loss is bounded by the flush interval, and reported); and
every record the store serves is whole: its body CRC and its whole-record CRC property (on by
default, ``StoreConfig.record_crc_enabled``) hold, and it carries the id the writer gave it (before
the property, a record of the unsynced tail whose properties a torn write garbled passed the body
CRC and was served without its id: ``damaged``, now refused). Half the cuts are timed at random,
half land exactly before the writer's n-th sync completes (a segment's creation, a checkpoint or
JSON rename, a directory sync after a retention delete, an msync).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY
from rocketbox.cluster.shm import power_cut
from tests.fault.power_writer import QUEUES, TOPIC, writer_config
from tests.store_harness import Harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUTS_PER_MODE = int(os.environ.get("POWER_CUTS", "100"))


def _run_writer(store_dir: str, image: str, mode: str, seed: int,
                rng: random.Random) -> tuple[list[tuple[int, str]], set[str], int]:
    """Start the writer, cut it; ((CommitLog offset, id) acknowledged in order, ids acknowledged
    before its last flush, the CommitLog offset retention deleted below)."""
    env = {**os.environ, power_cut.IMAGE_ENV: image}
    timed = seed % 2 == 0
    if not timed:
        env[power_cut.STOP_AT_ENV] = str(rng.randint(1, 300))
    child = subprocess.Popen([sys.executable, "-m", "tests.fault.power_writer", store_dir, mode, str(seed)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env, text=True)
    if timed:
        time.sleep(rng.uniform(0.3, 1.2))   # startup is ~0.3 s: the cut lands in the writing
        child.send_signal(signal.SIGSTOP)
    else:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:   # until it stopped itself at the chosen sync, or ended
            pid, status = os.waitpid(child.pid, os.WUNTRACED | os.WNOHANG)
            if pid and (os.WIFSTOPPED(status) or os.WIFEXITED(status) or os.WIFSIGNALED(status)):
                break
            time.sleep(0.005)
    child.kill()
    out, err = child.communicate(timeout=30)
    assert "Traceback" not in err, err[-3000:]
    acked, flushed, durable_before, deleted_below = [], set(), 0, 0
    for line in out.splitlines():
        if line.startswith("D "):
            deleted_below = int(line[2:])
        if line.startswith("A "):
            _, phys, ids = line.split(" ")
            acked.extend((int(phys), i) for i in ids.split(","))
        elif line == "F":
            durable_before = len(acked)
    flushed.update(i for _, i in acked[:durable_before])
    return acked, flushed, deleted_below


def _served(store_dir: str, image: str) -> tuple[set[str], int]:
    """Recover the store and read every queue through its read path: (the ids it serves, the
    CommitLog's first offset: retention deleted what was below). A record that fails its CRCs, does
    not decode or lost its id fails the test. Recovery's own syncs go to the durable image, as the
    writer's do: the next cut must see the files recovery rewrote (a ConsumeQueue file it deleted and
    made again is a new file; its old image would come back)."""
    with power_cut.imaging(image):
        return _read_everything(store_dir)


def _read_everything(store_dir: str) -> tuple[set[str], int]:
    harness = Harness(writer_config(store_dir))
    try:
        harness.dispatch_all()
        ids = set()
        for queue_id in range(QUEUES):
            offset = harness.store.min_offset(TOPIC, queue_id)
            end = harness.store.max_offset(TOPIC, queue_id)
            while offset < end:
                result = harness.store.get_messages(TOPIC, queue_id, offset, 64, 1 << 20, None, joined=True)
                if not result.message_count:
                    break
                for record in fmt.iter_records(result.payload, check_crc=True):
                    assert record.topic == TOPIC and record.queue_id == queue_id, record
                    assert fmt.stored_record_crc(record.properties_raw) is not None, record
                    assert PROPERTY_UNIQ_KEY in record.properties, record
                    ids.add(record.properties[PROPERTY_UNIQ_KEY])
                offset = result.next_begin_offset
        return ids, harness.store.commitlog_floor()
    finally:
        harness.close()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_power_cuts_lose_nothing_acknowledged_under_sync_flush_and_serve_nothing_corrupt(tmp_path, mode):
    store_dir, image = str(tmp_path / "store"), str(tmp_path / "image")
    rng = random.Random(f"power-{mode}")
    power_cut.start_image(store_dir, image)
    totals = {"acked": 0, "lost": 0, "lost_unflushed": 0, "old": 0, "new": 0, "garbage": 0, "lost_names": 0}
    for cut in range(CUTS_PER_MODE):
        acked, flushed, deleted_below = _run_writer(store_dir, image, mode, cut, rng)
        report = power_cut.cut(store_dir, image, rng)
        served, floor = _served(store_dir, image)
        # Retention may delete (and a cut may half bring back) what lies below its floor.
        floor = max(floor, deleted_below)
        lost = [i for phys, i in acked if i not in served and phys >= floor]
        must_survive = {i for _, i in acked} if mode == "sync" else flushed
        gone = [i for i in lost if i in must_survive]
        assert not gone, f"cut {cut} ({report}): {len(gone)} acknowledged messages lost, e.g. {gone[:3]}"
        for key in ("old", "new", "garbage", "lost_names"):
            totals[key] += report[key]
        totals["acked"] += len(acked)
        totals["deleted"] = totals.get("deleted", 0) + sum(1 for phys, _ in acked if phys < floor)
        totals["lost"] += len(lost)
        totals["lost_unflushed"] += len([i for i in lost if i not in flushed])
    print(f"{mode}: {CUTS_PER_MODE} cuts, {totals}")

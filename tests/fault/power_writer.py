"""The writer a power-cut test cuts: a broker store with its flush, reput and retention work in one
process, writing as fast as it can, under a durable image (``cluster/shm/power_cut.py``).

    python -m tests.fault.power_writer STORE_DIR MODE SEED      (MODE: sync | async)

Each loop: a batch of 1-4 messages to one of 4 queues; ``sync`` msyncs the CommitLog before the
batch counts as acknowledged (SYNC_FLUSH's promise), ``async`` acknowledges at once and flushes
every few batches; ``D <offset>`` when retention deleted what lies below that CommitLog offset. Along the way it dispatches (ConsumeQueue, IndexFile), flushes the logic files
and writes the checkpoint, commits and persists consumer offsets (JSON renames), rolls CommitLog
segments (64 KiB) and deletes the oldest past a cap (retention): every kind of write a cut must
survive. stdout, one line each, flushed: ``A <CommitLog offset> <ids>`` once a batch is acknowledged, ``F`` once a
flush of the CommitLog completed (every batch acknowledged before it is durable).
"""

from __future__ import annotations

import os
import random
import sys

from rocketbox.cluster.broker.offsets import ConsumerOffsetManager
from rocketbox.cluster.shm.retention import RetentionService
from tests.store_harness import Harness, message, tiny_config

TOPIC = "Power"
QUEUES = 4
BATCHES_MAX = 100_000
SEGMENTS_KEPT = 6


def writer_config(store_dir: str):
    return tiny_config(store_dir, delete_commitlog_files_interval_ms=0, clean_resource_interval_ms=0,
                       file_reserved_time_ms=3_600_000)


def main(store_dir: str, mode: str, seed: int) -> None:
    rng = random.Random(seed)
    cfg = writer_config(store_dir)
    harness = Harness(cfg)
    offsets = ConsumerOffsetManager(store_dir)
    # The disk looks full whenever more than SEGMENTS_KEPT segments are on it: the oldest go then.
    commitlog_dir = os.path.join(store_dir, "commitlog")
    retention = RetentionService(cfg, harness.control, disk_used=lambda _path: 99.0 if len(
        os.listdir(commitlog_dir)) > SEGMENTS_KEPT else 10.0)
    out = sys.stdout
    for n in range(BATCHES_MAX):
        queue_id = n % QUEUES
        ids = [f"{seed}-{n}-{j}" for j in range(rng.randint(1, 4))]
        bodies = [message(f"body of {i} ".encode() * rng.randint(1, 40), uniq=i, keys=i) for i in ids]
        result = harness.store.put_messages(TOPIC, queue_id, bodies)
        if result.status.name != "PUT_OK":
            raise SystemExit(f"put refused: {result.status.name}")
        if mode == "sync":
            harness.flush.step()
            out.write(f"A {result.phys_offset} {','.join(ids)}\n")
        else:
            out.write(f"A {result.phys_offset} {','.join(ids)}\n")
            if n % 5 == 4:
                harness.flush.step()
                out.write("F\n")
        out.flush()
        if n % 3 == 2:
            harness.reput.step(1000)
        if n % 7 == 6:
            harness.flush.step_logics()
        if n % 11 == 10:
            offsets.commit("PowerGroup", TOPIC, queue_id, harness.store.max_offset(TOPIC, queue_id))
            offsets.persist()
        if n % 13 == 12 and retention.step() is not None:
            out.write(f"D {harness.store.commitlog_floor()}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))

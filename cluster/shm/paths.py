"""Where everything of one broker's store lives under its ``store_dir`` (RocketMQ's layout).

    commitlog/<start, 20 digits>              CommitLog segments
    consumequeue/<topic>/<queue id>/<start>   ConsumeQueue files
    index/<creation time ms>                  IndexFiles
    control                                   the shared control block (cursors, heartbeats)
    checkpoint, abort, epoch                  flush checkpoint, unclean-shutdown marker, epoch file
    record_crc_from                           where every record starts carrying the whole-record CRC
    config/<name>.json                        topics, consumerOffset, delayOffset, ...
    config/<name>.slots, <name>.slotmap.json  committed offsets' mapped slots, and which queue has which

The only module that knows these names. Pure: builds paths, touches nothing.
"""

from __future__ import annotations

import os

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CONTROL_FILE = "control"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
EPOCH_FILE = "epoch"
RECORD_CRC_PROMISE_FILE = "record_crc_from"


def file_name_of_offset(start: int) -> str:
    """A CommitLog segment's or ConsumeQueue file's name: its first byte's offset, 20 digits."""
    return f"{start:020d}"


def offset_of_file_name(name: str) -> int | None:
    """The inverse of ``file_name_of_offset``; None for anything else in the directory (a .tmp file)."""
    return int(name) if len(name) == 20 and name.isdigit() else None


def commitlog_dir(store_dir: str) -> str:
    return os.path.join(store_dir, COMMITLOG_DIR)


def commitlog_segment(store_dir: str, start: int) -> str:
    return os.path.join(store_dir, COMMITLOG_DIR, file_name_of_offset(start))


def consumequeue_root(store_dir: str) -> str:
    return os.path.join(store_dir, CONSUMEQUEUE_DIR)


def consumequeue_dir(store_dir: str, topic: str, queue_id: int) -> str:
    return os.path.join(store_dir, CONSUMEQUEUE_DIR, topic, str(queue_id))


def index_dir(store_dir: str) -> str:
    return os.path.join(store_dir, INDEX_DIR)


def control_path(store_dir: str) -> str:
    return os.path.join(store_dir, CONTROL_FILE)


def checkpoint_path(store_dir: str) -> str:
    return os.path.join(store_dir, CHECKPOINT_FILE)


def abort_path(store_dir: str) -> str:
    return os.path.join(store_dir, ABORT_FILE)


def truncate_marker_path(store_dir: str) -> str:
    """A slave's note to itself, across a restart, to cut its CommitLog back to its master's end."""
    return os.path.join(store_dir, "truncate_to")


def record_crc_promise_path(store_dir: str) -> str:
    """The CommitLog offset from which every record carries the whole-record CRC property
    (``record_crc_promise.py``)."""
    return os.path.join(store_dir, RECORD_CRC_PROMISE_FILE)


def epoch_path(store_dir: str) -> str:
    return os.path.join(store_dir, EPOCH_FILE)


def config_dir(store_dir: str) -> str:
    return os.path.join(store_dir, CONFIG_DIR)


def config_path(store_dir: str, name: str) -> str:
    """``config/<name>.json``: topics, consumerOffset, delayOffset, subscriptionGroup."""
    return os.path.join(store_dir, CONFIG_DIR, f"{name}.json")


def slots_path(store_dir: str, name: str) -> str:
    """``config/<name>.slots``: the mapped array of committed offsets, one slot a queue."""
    return os.path.join(store_dir, CONFIG_DIR, f"{name}.slots")


def slotmap_path(store_dir: str, name: str) -> str:
    """``config/<name>.slotmap.json``: which control-block slot holds which queue's offset."""
    return os.path.join(store_dir, CONFIG_DIR, f"{name}.slotmap.json")

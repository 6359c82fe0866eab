import os

import pytest

from rocketbox.cluster import json_files
from rocketbox.cluster.shm import checkpoint, paths
from rocketbox.cluster.shm.control import ControlBlock


def test_cursors_are_shared_between_mappings(tmp_path):
    path = str(tmp_path / "control")
    a, b = ControlBlock(path), ControlBlock(path)
    assert a.write_pos == 0 and a.snapshot()["dispatched_pos"] == 0
    a.write_pos = 12345
    b.dispatched_pos = 99
    b.heartbeat("reput", 1_700_000_000_000)
    assert b.write_pos == 12345 and a.dispatched_pos == 99
    assert a.heartbeat_ms("reput") == a.heartbeat_reput_ms == 1_700_000_000_000
    a.set("confirm_pos", 7)
    assert b.get("confirm_pos") == 7
    a.close()
    a.close()
    b.close()
    assert os.path.getsize(path) == 4096


def test_not_a_control_block(tmp_path):
    path = tmp_path / "control"
    path.write_bytes(b"\x01" * 4096)
    with pytest.raises(ValueError):
        ControlBlock(str(path))


def test_checkpoint_round_trip_missing_and_corrupt(tmp_path):
    d = str(tmp_path)
    assert checkpoint.read(d) is None
    cp = checkpoint.Checkpoint(1000, 900, 5, 6)
    checkpoint.write(d, cp)
    assert checkpoint.read(d) == cp
    raw = bytearray((tmp_path / "checkpoint").read_bytes())
    raw[10] ^= 1
    (tmp_path / "checkpoint").write_bytes(bytes(raw))
    assert checkpoint.read(d) is None
    (tmp_path / "checkpoint").write_bytes(b"short")
    assert checkpoint.read(d) is None


def test_json_files(tmp_path):
    path = paths.config_path(str(tmp_path), "topics")
    assert json_files.read_json(path, {"none": 1}) == {"none": 1}
    json_files.write_json(path, {"T": {"queues": 4}})
    assert json_files.read_json(path) == {"T": {"queues": 4}}
    with open(path, "w") as f:
        f.write("{broken")
    assert json_files.read_json(path, []) == []
    assert sorted(os.listdir(tmp_path / "config")) == ["topics.json"]


def test_store_layout_is_rocketmqs():
    """Golden: the names under a store directory (cluster/shm/paths.py is their only home)."""
    root = "/s"
    assert paths.commitlog_segment(root, 1 << 30) == "/s/commitlog/00000000001073741824"
    assert paths.consumequeue_dir(root, "T", 3) == "/s/consumequeue/T/3"
    assert (paths.index_dir(root), paths.control_path(root), paths.checkpoint_path(root),
            paths.abort_path(root), paths.epoch_path(root)) == ("/s/index", "/s/control", "/s/checkpoint",
                                                                "/s/abort", "/s/epoch")
    assert paths.config_path(root, "consumerOffset") == "/s/config/consumerOffset.json"
    assert paths.slots_path(root, "consumerOffset") == "/s/config/consumerOffset.slots"
    assert paths.slotmap_path(root, "consumerOffset") == "/s/config/consumerOffset.slotmap.json"
    assert paths.offset_of_file_name(paths.file_name_of_offset(4096)) == 4096
    assert paths.offset_of_file_name("00000000000008388608.tmp.7484") is None

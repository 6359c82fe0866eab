"""The broadcasting consumer's local offset store (RocketMQ's LocalFileOffsetStore)."""

from __future__ import annotations

import json
import os

import pytest

from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.client.offset_store import (LocalOffsetStore, local_offset_store_path, offset_table_from_rows,
                                         offset_table_rows, store_id)
from rocketbox.cluster.errors import ClientError

Q0, Q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-b", 1)


def test_offsets_survive_a_restart_and_are_written_only_when_changed(tmp_path):
    path = local_offset_store_path(str(tmp_path), "127.0.0.1@memberA", "G")
    assert path == os.path.join(str(tmp_path), "127.0.0.1@memberA", "G", "offsets.json")
    store = LocalOffsetStore(path).open()
    assert store.read(Q0) is None
    store.update(Q0, 5)
    store.update(Q1, 9)
    store.update(Q0, 3, increase_only=True)  # ignored: would go back
    store.persist()
    assert json.load(open(path)) == {"offsetTable": [
        {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 5},
        {"topic": "T", "brokerName": "broker-b", "queueId": 1, "offset": 9}]}
    mtime = os.stat(path).st_mtime_ns
    store.persist()  # nothing changed: not rewritten
    assert os.stat(path).st_mtime_ns == mtime
    store.update(Q0, 7)
    store.close()  # persists
    again = LocalOffsetStore(path).open()
    try:
        assert again.table() == {Q0: 7, Q1: 9}
        assert not [n for n in os.listdir(os.path.dirname(path)) if n != "offsets.json"]  # no temp file left
    finally:
        again.close()


def test_one_file_per_live_consumer_in_a_process(tmp_path):
    path = local_offset_store_path(str(tmp_path), "x", "G")
    first = LocalOffsetStore(path).open()
    with pytest.raises(ClientError, match="instance_name"):
        LocalOffsetStore(path).open()
    first.close()
    LocalOffsetStore(path).open().close()


def test_an_unreadable_file_means_no_offsets(tmp_path):
    path = local_offset_store_path(str(tmp_path), "x", "G")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("{not json")
    store = LocalOffsetStore(path).open()
    assert store.table() == {}
    store.close()
    with open(path, "w") as f:
        json.dump({"offsetTable": [{"topic": "T"}]}, f)
    store = LocalOffsetStore(path).open()
    assert store.table() == {}
    store.close()


def test_store_id_is_stable_for_a_named_instance_only():
    assert store_id("10.0.0.1@4242@DEFAULT@3", "DEFAULT") == "10.0.0.1@4242@DEFAULT@3"
    assert store_id("10.0.0.1@4242@orders/1@3", "orders/1") == "10.0.0.1@orders_1"
    assert local_offset_store_path("", "s", "G").startswith(os.path.expanduser("~"))


def test_offset_table_rows_round_trip():
    table = {Q1: 4, Q0: 2}
    assert offset_table_from_rows(offset_table_rows(table)) == table
    assert offset_table_from_rows(None) == {}

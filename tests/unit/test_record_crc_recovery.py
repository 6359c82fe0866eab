"""Recovery with the whole-record CRC property (StoreConfig.record_crc_enabled, RocketMQ's
enabledAppendPropCRC): a byte a torn write changed in a record's topic, properties or header ends
the valid log there, where the body CRC alone let the record through; the store's promise
(record_crc_promise.py) catches a garbled property itself; switching the setting loses nothing."""

import os

import pytest

from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm import record_crc_promise
from rocketbox.cluster.shm.paths import record_crc_promise_path
from tests.store_harness import Harness, message, tiny_config

pytestmark = pytest.mark.timeout(60)

TOPIC = "TopicA"
BODY = b"payload-3"


def write_records(store_dir, record_crc: bool, count: int = 6, first: int = 0) -> list:
    """``count`` messages to TOPIC queue 0 (tags, keys, id), then a crash (abort stays, no clean stop)."""
    h = Harness(tiny_config(store_dir, record_crc_enabled=record_crc))
    results = [h.store.put_messages(TOPIC, 0, [message(b"payload-%d" % i, tags="TagA", keys=f"k{i}", uniq=f"U{i}")])
               for i in range(first, first + count)]
    h.dispatch_all()
    h.close()
    return results


def record_bytes(store_dir, result) -> bytes:
    with open(os.path.join(store_dir, "commitlog", f"{0:020d}"), "rb") as f:
        f.seek(result.phys_offset)
        return f.read(result.end_phys_offset - result.phys_offset)


def change_byte(store_dir, phys: int, change) -> None:
    seg = os.path.join(store_dir, "commitlog", f"{0:020d}")
    with open(seg, "r+b") as f:
        f.seek(phys)
        old = f.read(1)[0]
        f.seek(phys)
        f.write(bytes([change(old)]))


def field_offsets() -> dict[str, int]:
    """Where a byte of each field sits in a record of BODY to TOPIC (from the record's start)."""
    topic_at = fmt.HEAD_SIZE + len(BODY) + 1
    properties_at = topic_at + len(TOPIC) + 2
    return {"topic": topic_at, "tag value": properties_at + len("TAGS\x01"),
            "queue id": fmt.OFF_QUEUEID + 3, "flag": 19, "born timestamp": 47, "born host": 50,
            "store timestamp": fmt.OFF_STORETIMESTAMP + 7, "reconsume times": 75}


@pytest.mark.parametrize("field", ["topic", "tag value", "queue id", "flag", "born timestamp", "born host",
                                   "store timestamp", "reconsume times"])
def test_a_byte_changed_outside_the_body_ends_the_log_only_with_the_crc_property(tmp_path, field):
    # Without the property (RocketMQ's default): recovery keeps the damaged record and serves it.
    plain = tmp_path / "plain"
    results = write_records(plain, record_crc=False)
    victim = results[3]
    original = fmt.decode_at(record_bytes(plain, victim), 0)
    change_byte(plain, victim.phys_offset + field_offsets()[field], lambda b: b ^ 0x01)
    h = Harness(tiny_config(plain, record_crc_enabled=False))
    try:
        assert h.report.end_phys == results[-1].end_phys_offset, h.report
        served = h.store.read_record(victim.phys_offset)
        assert type(served) is fmt.Record and served.body == BODY and served != original
    finally:
        h.close()
    # With it: the same change ends the valid log at that record.
    sealed = tmp_path / "sealed"
    results = write_records(sealed, record_crc=True)
    victim = results[3]
    change_byte(sealed, victim.phys_offset + field_offsets()[field], lambda b: b ^ 0x01)
    h = Harness(tiny_config(sealed))
    try:
        assert h.report.end_phys == victim.phys_offset, h.report
        assert "record CRC mismatch" in h.report.stop_reason
        assert h.store.queue_next_offset(TOPIC, 0) == 3
        h.dispatch_all()
        got = h.store.get_messages(TOPIC, 0, 0, 10, 1 << 20)
        assert [fmt.decode_at(raw, 0, check_crc=True).body for raw in got.records] == \
            [b"payload-%d" % i for i in range(3)]
    finally:
        h.close()


@pytest.mark.parametrize("damage", ["name", "separator before it", "all garbage"])
def test_a_garbled_crc_property_ends_the_log_where_the_store_promised_one(tmp_path, damage):
    """A torn write in the property's own bytes can make a record look written without one: the
    promise says it was not (and without the promise the record would pass on its body CRC)."""
    results = write_records(tmp_path, record_crc=True)
    victim = results[3]
    property_at = victim.end_phys_offset - fmt.RECORD_CRC_SIZE
    targets = {"name": [property_at + 2], "separator before it": [property_at - 1],
               "all garbage": range(property_at, victim.end_phys_offset)}[damage]
    for at in targets:
        change_byte(tmp_path, at, lambda b: b ^ 0x5A)
    assert record_crc_promise.read(str(tmp_path)) == 0
    h = Harness(tiny_config(tmp_path))
    try:
        assert h.report.end_phys == victim.phys_offset, h.report
        assert "lacks the CRC property" in h.report.stop_reason
    finally:
        h.close()


def test_without_the_promise_a_garbled_crc_property_passes_on_the_body_crc(tmp_path):
    results = write_records(tmp_path, record_crc=True)
    victim = results[3]
    change_byte(tmp_path, victim.end_phys_offset - fmt.RECORD_CRC_SIZE + 2, lambda b: b ^ 0x5A)
    os.unlink(record_crc_promise_path(str(tmp_path)))   # what the promise prevents: the record passes
    h = Harness(tiny_config(tmp_path))
    try:
        assert h.report.end_phys == results[-1].end_phys_offset, h.report
    finally:
        h.close()


def test_switching_the_setting_loses_nothing_and_sealed_records_stay_verified(tmp_path):
    store_dir = str(tmp_path)
    unsealed = write_records(store_dir, record_crc=False, count=3)
    assert record_crc_promise.read(store_dir) is None
    # On: the records written without the property stay (the promise starts where they end).
    sealed = write_records(store_dir, record_crc=True, count=3, first=3)
    assert record_crc_promise.read(store_dir) == unsealed[-1].end_phys_offset
    h = Harness(tiny_config(store_dir))
    try:
        assert h.report.end_phys == sealed[-1].end_phys_offset and h.report.records_verified == 6
        assert [fmt.stored_record_crc(h.store.read_record(r.phys_offset).properties_raw) is not None
                for r in unsealed + sealed] == [False] * 3 + [True] * 3
    finally:
        h.close()
    # Off: the promise is withdrawn, every record stays, and a sealed one is still checked.
    h = Harness(tiny_config(store_dir, record_crc_enabled=False))
    h.close()
    assert record_crc_promise.read(store_dir) is None
    change_byte(store_dir, sealed[1].phys_offset + fmt.OFF_QUEUEID + 3, lambda b: b ^ 0x01)
    h = Harness(tiny_config(store_dir, record_crc_enabled=False))
    try:
        assert h.report.end_phys == sealed[1].phys_offset and "record CRC mismatch" in h.report.stop_reason
    finally:
        h.close()


def test_a_slave_withdraws_the_promise_before_its_masters_bytes(tmp_path):
    """A slave appends its master's records, sealed or not as the master's setting says."""
    h = Harness(tiny_config(tmp_path))
    assert record_crc_promise.read(str(tmp_path)) == 0
    unsealed = fmt.encode(queue_id=0, flag=0, queue_offset=0, phys_offset=0, sys_flag=0, born_timestamp_ms=1,
                          born_host=bytes(8), store_timestamp_ms=2, store_host=bytes(8), reconsume_times=0,
                          prepared_transaction_offset=0, body=b"from the master", topic=TOPIC.encode(),
                          properties=b"TAGS\x01A\x02")
    assert h.store.append_replicated(0, unsealed)
    assert record_crc_promise.read(str(tmp_path)) is None
    h.close()
    h = Harness(tiny_config(tmp_path))
    try:
        assert h.report.end_phys == len(unsealed), h.report
    finally:
        h.close()


def test_a_slave_makes_its_masters_promise_and_refuses_a_record_whose_property_a_torn_write_garbled(tmp_path):
    """What a power cut did to a SYNC_MASTER's slave in CI: the page holding the end of a replicated record
    came back garbage, its CRC property with it; the slave, which had withdrawn the promise, kept the
    record on its body CRC (and served its garbage properties). With the master's promise made its own
    (the HA data header carries it) the record ends the slave's log, and the master sends it again."""
    master_dir, slave_dir = tmp_path / "master", tmp_path / "slave"
    results = write_records(master_dir, record_crc=True)
    assert record_crc_promise.read(str(master_dir)) == 0
    with open(os.path.join(master_dir, "commitlog", f"{0:020d}"), "rb") as f:
        log = f.read(results[-1].end_phys_offset)
    h = Harness(tiny_config(slave_dir, record_crc_enabled=False))   # its own setting is not what counts
    try:
        assert h.store.append_replicated(0, log, record_crc_from=0)
        assert record_crc_promise.read(str(slave_dir)) == 0
    finally:
        h.close()
    victim = results[3]
    for at in range(victim.end_phys_offset - fmt.RECORD_CRC_SIZE, victim.end_phys_offset):
        change_byte(slave_dir, at, lambda b: b ^ 0x5A)
    h = Harness(tiny_config(slave_dir))
    try:
        assert h.report.end_phys == victim.phys_offset, h.report
        assert "lacks the CRC property" in h.report.stop_reason
        # A master that promises nothing: withdrawn before its bytes are appended.
        assert h.store.append_replicated(victim.phys_offset, log[victim.phys_offset:], record_crc_from=None)
        assert record_crc_promise.read(str(slave_dir)) is None
    finally:
        h.close()

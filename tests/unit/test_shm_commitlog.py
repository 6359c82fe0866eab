import errno

import pytest

from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH
from rocketbox.cluster.shm import commitlog as commitlog_module
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm import mapped_file
from rocketbox.cluster.shm.commitlog import AppendStatus, CommitLog
from rocketbox.cluster.shm.commitlog_format import BLANK_SIZE_MIN, EndOfFile
from tests.conftest import mapping_vm_flags
from tests.store_harness import STORE_HOST, tiny_config

SEG = 64 * 1024


def record(phys: int, body: bytes, queue_offset: int = 0) -> bytes:
    return fmt.encode(queue_id=0, flag=0, queue_offset=queue_offset, phys_offset=phys, sys_flag=0,
                      born_timestamp_ms=1, born_host=STORE_HOST, store_timestamp_ms=2,
                      store_host=STORE_HOST, reconsume_times=0, prepared_transaction_offset=0,
                      body=body, topic=b"T", properties=b"")


def append_record(cl: CommitLog, body: bytes):
    size = fmt.record_size(len(body), 1, 0)

    def fill(buf, pos, phys):
        buf[pos:pos + size] = record(phys, body)

    return cl.append(size, fill)


def test_append_read_and_iterate(tmp_path):
    cl = CommitLog(tiny_config(tmp_path))
    outcomes = [append_record(cl, bytes([i]) * 100) for i in range(5)]
    assert [o.status for o in outcomes] == [AppendStatus.OK] * 5
    assert [o.phys_offset for o in outcomes] == [i * 192 for i in range(5)]
    assert cl.write_pos == 5 * 192
    assert cl.read(192, 192) == record(192, bytes([1]) * 100)
    got = list(cl.iter_from(0, cl.write_pos))
    assert [p for p, _ in got] == [o.phys_offset for o in outcomes]
    assert got[3][1].body == bytes([3]) * 100
    assert cl.segment_path(SEG).endswith("/commitlog/00000000000000065536")
    cl.close()


def test_roll_over_writes_a_blank_and_iteration_crosses_it(tmp_path):
    cl = CommitLog(tiny_config(tmp_path))
    body = b"x" * 10_000
    size = fmt.record_size(len(body), 1, 0)
    outcomes = [append_record(cl, body) for _ in range(8)]
    per_file = (SEG - BLANK_SIZE_MIN) // size  # 6 fit with room for the blank
    assert outcomes[per_file].phys_offset == SEG
    blank_pos = per_file * size
    assert cl.decode_at(blank_pos) == EndOfFile(SEG - blank_pos)
    walked = list(cl.walk(0, cl.write_pos))
    assert [type(item) for _, item in walked].count(EndOfFile) == 1
    assert [p for p, _ in cl.iter_from(0, cl.write_pos)] == [o.phys_offset for o in outcomes]
    assert cl.segment_starts() == [0, SEG]
    cl.close()


def test_segments_created_elsewhere_are_found(tmp_path):
    cfg = tiny_config(tmp_path)
    writer, reader = CommitLog(cfg), CommitLog(cfg)
    assert reader.segment_for(SEG) is None
    big = b"y" * 30_000
    for _ in range(3):
        assert append_record(writer, big).status is AppendStatus.OK
    assert reader.segment_for(SEG) is not None
    assert [r.body for _, r in reader.iter_from(0, writer.write_pos)] == [big] * 3
    writer.close()
    reader.close()


def test_too_large_and_disk_full(tmp_path, monkeypatch):
    cl = CommitLog(tiny_config(tmp_path))
    assert cl.append(SEG, lambda *a: None).status is AppendStatus.MESSAGE_TOO_LARGE
    # Free space under the minimum refuses writes; more space resumes them.
    monkeypatch.setattr(commitlog_module, "disk_free_bytes", lambda path: 0)
    cl.cfg = tiny_config(tmp_path, disk_free_bytes_min=1)
    cl.disk_check_interval_ms = 0
    assert append_record(cl, b"a").status is AppendStatus.DISK_FULL
    monkeypatch.setattr(commitlog_module, "disk_free_bytes", lambda path: 1 << 40)
    assert append_record(cl, b"a").status is AppendStatus.OK
    cl.close()


def test_segment_creation_failure_is_disk_full_then_resumes(tmp_path, monkeypatch):
    cl = CommitLog(tiny_config(tmp_path))
    body = b"z" * 20_000
    while cl.write_pos + 2 * fmt.record_size(len(body), 1, 0) < SEG:
        append_record(cl, body)
    before = cl.write_pos

    def no_space(fd, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mapped_file, "fallocate", no_space)
    results = [append_record(cl, body).status for _ in range(3)]
    assert AppendStatus.DISK_FULL in results
    stuck = cl.write_pos
    assert append_record(cl, body).status is AppendStatus.DISK_FULL
    assert cl.write_pos == stuck and stuck >= before
    monkeypatch.undo()
    outcome = append_record(cl, body)
    assert outcome.status is AppendStatus.OK and outcome.phys_offset == SEG
    assert len(list(cl.iter_from(0, cl.write_pos))) == len(results) - results.count(
        AppendStatus.DISK_FULL) + (before // fmt.record_size(len(body), 1, 0)) + 1
    cl.close()


def test_truncate_after_zeroes_tail_and_deletes_later_segments(tmp_path):
    cl = CommitLog(tiny_config(tmp_path))
    body = b"q" * 30_000
    outcomes = [append_record(cl, body) for _ in range(5)]
    cut = outcomes[3].phys_offset  # the second record of the second segment
    zeroed, deleted = cl.truncate_after(cut)
    # The cut record and the end-of-file blank header after it.
    assert zeroed == fmt.record_size(len(body), 1, 0) + BLANK_SIZE_MIN
    assert deleted == 1
    assert cl.segment_starts() == [0, SEG]
    assert type(cl.decode_at(cut)) is fmt.Incomplete
    assert [p for p, _ in cl.iter_from(0)] == [o.phys_offset for o in outcomes[:3]]
    cl.close()


def _locked_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmLck:"):
                return int(line.split()[1])
    raise AssertionError("no VmLck line in /proc/self/status")


def test_mlock_pins_only_the_segment_being_written(tmp_path):
    probe = mapped_file.MappedFile.create_or_open(str(tmp_path / "probe"), SEG)
    if not probe.mlock():
        probe.close()
        pytest.skip("this process may not lock memory (RLIMIT_MEMLOCK), so pinning cannot be observed")
    probe.munlock()
    probe.close()
    before = _locked_kib()
    cl = CommitLog(tiny_config(tmp_path / "store", mlock_enabled=True))
    body = b"x" * 10_000
    for _ in range(6 * 6):   # six segments' worth: five roll-overs
        assert append_record(cl, body).status == AppendStatus.OK
    assert len(cl.segment_starts()) == 6
    locked = _locked_kib() - before
    cl.close()
    # Each roll pins the next segment and unpins the one left: one segment stays locked, not six.
    assert locked == SEG // 1024


def test_under_sync_flush_the_segment_being_appended_to_is_mapped_without_readahead(tmp_path):
    cl = CommitLog(tiny_config(tmp_path, flush_mode=SYNC_FLUSH))
    body = b"x" * 10_000
    assert append_record(cl, body).status == AppendStatus.OK
    first, second = cl.segment_path(0), cl.segment_path(SEG)
    assert ["rr" in flags for flags in mapping_vm_flags(first)] == [True]
    while cl.write_pos < SEG:   # roll into the second segment
        assert append_record(cl, body).status == AppendStatus.OK
    assert ["rr" in flags for flags in mapping_vm_flags(second)] == [True]
    assert ["rr" in flags for flags in mapping_vm_flags(first)] == [False]   # left: reads with readahead again
    written = cl.read(0, 100), cl.read(SEG, 100)
    cl.close()
    reader = CommitLog(tiny_config(tmp_path, flush_mode=SYNC_FLUSH))
    assert (reader.read(0, 100), reader.read(SEG, 100)) == written
    assert ["rr" in flags for flags in mapping_vm_flags(first) + mapping_vm_flags(second)] == [False, False]
    reader.close()


def test_under_async_flush_appends_keep_readahead(tmp_path):
    cl = CommitLog(tiny_config(tmp_path, flush_mode=ASYNC_FLUSH))
    assert append_record(cl, b"x" * 1000).status == AppendStatus.OK
    assert ["rr" in flags for flags in mapping_vm_flags(cl.segment_path(0))] == [False]
    cl.close()


def test_replicated_appends_under_sync_flush_are_mapped_without_readahead(tmp_path):
    master = CommitLog(tiny_config(tmp_path / "master"))
    assert append_record(master, b"y" * 500).status == AppendStatus.OK
    data = master.read(0, master.write_pos)
    slave = CommitLog(tiny_config(tmp_path / "slave", flush_mode=SYNC_FLUSH))
    assert slave.append_raw(0, data) == AppendStatus.OK
    assert slave.read(0, len(data)) == data
    assert ["rr" in flags for flags in mapping_vm_flags(slave.segment_path(0))] == [True]
    master.close()
    slave.close()

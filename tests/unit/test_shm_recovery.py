"""Recovery: torn tails at every byte, bit flips, lost checkpoint or ConsumeQueue files,
re-dispatch idempotence, roll-over, and a reput worker in another process."""

import multiprocessing
import os
import shutil

import pytest

from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.reput import ReputService
from rocketbox.cluster.shm.store import GetMessageStatus as G, PutMessageStatus as P
from tests.store_harness import Harness, message, tiny_config

SEG = 64 * 1024


def cq_bytes(store_dir) -> dict[str, bytes]:
    root = os.path.join(store_dir, "consumequeue")
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = open(path, "rb").read()
    return out


def zero_range(store_dir, phys: int, length: int) -> None:
    seg_path = os.path.join(store_dir, "commitlog", f"{phys - phys % SEG:020d}")
    with open(seg_path, "r+b") as f:
        f.seek(phys % SEG)
        f.write(bytes(length))


def bodies(result):
    return [fmt.decode_at(raw, 0).body for raw in result.records]


def test_torn_last_record_at_every_byte(tmp_path):
    template = tmp_path / "template"
    h = Harness(tiny_config(template))
    for i in range(3):
        h.store.put_messages("T", 0, [message(b"body-%d" % i, keys=f"k{i}", uniq=f"U{i}", tags="A")])
    last = h.store.put_messages("T", 0, [message(b"the last one", keys="k3", uniq="U3", tags="A")])
    h.dispatch_all()
    h.close()  # a crash: abort stays
    size = last.end_phys_offset - last.phys_offset
    for cut in range(size):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(template, d)
        zero_range(d, last.phys_offset + cut, size - cut)
        h = Harness(tiny_config(d))
        r = h.report
        assert not r.clean_shutdown
        assert r.end_phys == last.phys_offset, cut
        # No checkpoint of the dispatch: every entry is emptied, the 3 records left dispatched again.
        assert (r.cq_entries_truncated, r.records_redispatched) == (4, 3), cut
        assert h.store.queue_next_offset("T", 0) == 3
        assert h.store.query_by_key("T", "k3", 10, 0, 1 << 62) == []
        again = h.store.put_messages("T", 0, [message(b"new", keys="k3")])
        assert (again.status, again.phys_offset, again.queue_offset) == \
            (P.PUT_OK, last.phys_offset, 3)
        h.dispatch_all()
        got = h.store.get_messages("T", 0, 0, 10, 1 << 20)
        assert bodies(got) == [b"body-0", b"body-1", b"body-2", b"new"]
        assert [x.body for x in h.store.query_by_key("T", "k3", 10, 0, 1 << 62)] == [b"new"]
        h.close()
        shutil.rmtree(d)


def test_bit_flip_in_a_body_truncates_there(tmp_path):
    h = Harness(tiny_config(tmp_path))
    results = [h.store.put_messages("T", i % 2, [message(b"payload-%d" % i)]) for i in range(6)]
    h.dispatch_all()
    h.close()
    victim = results[3]
    body_pos = victim.phys_offset + fmt.OFF_BODY + 4 + 2
    seg = os.path.join(tmp_path, "commitlog", f"{0:020d}")
    with open(seg, "r+b") as f:
        f.seek(body_pos)
        byte = f.read(1)[0]
        f.seek(body_pos)
        f.write(bytes([byte ^ 0x10]))
    h = Harness(tiny_config(tmp_path))
    assert h.report.end_phys == victim.phys_offset
    assert "CRC" in h.report.stop_reason
    assert (h.report.cq_entries_truncated, h.report.records_redispatched) == (6, 3)
    # Records 0..2 survive: queue 0 holds 0 and 2, queue 1 holds 1.
    assert h.store.queue_next_offset("T", 0) == 2 and h.store.queue_next_offset("T", 1) == 1
    h.close()


# Found by tests/fuzz: a record whose topic byte became NUL made recovery's dispatch raise (os.path's
# "embedded null byte": the broker could never boot again), one that became "/" got its ConsumeQueue
# at /0, outside the store. The body CRC does not cover the topic: recovery cuts the log there. (A
# record with the whole-record CRC property fails that first: records written without it here.)
@pytest.mark.parametrize("topic_byte", [b"\x00", b"/", b"."])
def test_a_record_whose_topic_cannot_name_a_queue_ends_the_log(tmp_path, topic_byte):
    h = Harness(tiny_config(tmp_path, record_crc_enabled=False))
    # Properties after the topic: without them a NUL topic already ends the record in zeros (looks_torn).
    results = [h.store.put_messages("T", 0, [message(b"payload-%d" % i, tags="tag")]) for i in range(4)]
    h.close()
    victim = results[2]
    topic_pos = victim.phys_offset + fmt.HEAD_SIZE + len(b"payload-2") + 1
    seg = os.path.join(tmp_path, "commitlog", f"{0:020d}")
    with open(seg, "r+b") as f:
        f.seek(topic_pos)
        assert f.read(1) == b"T"
        f.seek(topic_pos)
        f.write(topic_byte)
    h = Harness(tiny_config(tmp_path))
    try:
        assert h.report.end_phys == victim.phys_offset
        assert "topic no broker writes" in h.report.stop_reason
        assert os.listdir(os.path.join(tmp_path, "consumequeue")) == ["T"]
        assert h.store.queue_next_offset("T", 0) == 2
    finally:
        h.close()


def build_store(store_dir, *, count=200, queues=3):
    """Many messages over several queues and CommitLog segments, dispatched and checkpointed."""
    h = Harness(tiny_config(store_dir))
    for i in range(count):
        r = h.store.put_messages("T", i % queues, [message(b"m%d" % i + b"." * 400, tags=f"t{i % 5}",
                                                           keys=f"key{i}", uniq=f"U{i}")])
        assert r.status is P.PUT_OK
    h.dispatch_all()
    h.flush.step()
    h.flush.step_logics()
    h.close(clean=True)
    return cq_bytes(store_dir)


def check_index_has_no_duplicates(h, count=200):
    for i in range(0, count, 17):
        got = h.store.query_by_key("T", f"key{i}", 10, 0, 1 << 62)
        assert [r.body[:6].rstrip(b".") for r in got] == [b"m%d" % i]


@pytest.mark.parametrize("damage", ["checkpoint", "checkpoint+cq", "cq-first", "cq-middle",
                                    "cq-last", "queue-dir-files"])
def test_lost_files_are_rebuilt_byte_identical(tmp_path, damage):
    count = 400  # queue 0 gets 134 entries: three 64-entry files
    reference = build_store(tmp_path, count=count)
    q0 = os.path.join(tmp_path, "consumequeue", "T", "0")
    files = sorted(os.listdir(q0))
    if "checkpoint" in damage:
        os.unlink(os.path.join(tmp_path, "checkpoint"))
    if damage == "checkpoint+cq":
        shutil.rmtree(os.path.join(tmp_path, "consumequeue"))
    elif damage == "cq-first":
        os.unlink(os.path.join(q0, files[0]))
    elif damage == "cq-middle":
        assert len(files) == 3
        os.unlink(os.path.join(q0, files[1]))
    elif damage == "cq-last":
        os.unlink(os.path.join(q0, files[-1]))
    elif damage == "queue-dir-files":
        for name in files:
            os.unlink(os.path.join(q0, name))
    h = Harness(tiny_config(tmp_path))
    assert cq_bytes(tmp_path) == reference
    if damage.startswith("cq") or damage == "queue-dir-files":
        assert ("T", 0) in h.report.cq_queues_rebuilt
    check_index_has_no_duplicates(h, count)
    got = h.store.get_messages("T", 0, 0, 1000, 1 << 30)
    assert len(got.records) == (count + 2) // 3
    h.close()


def test_cq_file_lost_at_exact_file_boundary(tmp_path):
    count = 3 * 64 + 3  # queue 0 gets 65 entries: one full file and one in the next
    reference = build_store(tmp_path, count=count)
    q0 = os.path.join(tmp_path, "consumequeue", "T", "0")
    os.unlink(os.path.join(q0, sorted(os.listdir(q0))[-1]))  # the last file after a full one
    h = Harness(tiny_config(tmp_path))
    assert ("T", 0) in h.report.cq_queues_rebuilt
    assert cq_bytes(tmp_path) == reference
    h.close()


def test_reput_restart_is_idempotent(tmp_path):
    h = Harness(tiny_config(tmp_path))
    for i in range(120):
        h.store.put_messages("T", i % 2, [message(b"r%d" % i, keys=f"key{i} shared", uniq=f"U{i}")])
    h.reput.step(50)
    h.reput.step(30)
    mid = h.control.dispatched_pos
    h.dispatch_all()
    reference = cq_bytes(tmp_path)
    index_files = {n: open(os.path.join(tmp_path, "index", n), "rb").read()
                   for n in os.listdir(os.path.join(tmp_path, "index"))}
    # The worker died after writing entries but before publishing its cursor.
    for rewind in (mid, 0):
        h.control.dispatched_pos = rewind
        restarted = ReputService(h.cfg, h.control)
        while restarted.step(37).count:
            pass
        restarted.close()
        assert h.control.dispatched_pos == h.control.write_pos
        assert cq_bytes(tmp_path) == reference
        assert {n: open(os.path.join(tmp_path, "index", n), "rb").read()
                for n in os.listdir(os.path.join(tmp_path, "index"))} == index_files
    assert len(h.store.query_by_key("T", "shared", 1000, 0, 1 << 62)) == 120
    assert [r.body for r in h.store.query_by_key("T", "key7", 10, 0, 1 << 62)] == [b"r7"]
    h.close()


def test_recovery_without_checkpoint_across_segments(tmp_path):
    reference = build_store(tmp_path, count=400)  # ~6 segments of 64 KiB
    assert len(os.listdir(os.path.join(tmp_path, "commitlog"))) >= 3
    os.unlink(os.path.join(tmp_path, "checkpoint"))
    h = Harness(tiny_config(tmp_path))
    assert h.report.clean_shutdown and not h.report.checkpoint_found
    assert h.report.records_verified == 400 and h.report.verify_from_phys == 0
    assert cq_bytes(tmp_path) == reference
    h.close()


def test_clean_restart_keeps_everything(tmp_path):
    reference = build_store(tmp_path, count=50)
    h = Harness(tiny_config(tmp_path))
    assert h.report.clean_shutdown and h.report.bytes_truncated == 0
    assert h.report.records_redispatched == 0
    assert cq_bytes(tmp_path) == reference
    assert os.path.exists(os.path.join(tmp_path, "abort"))
    h.close(clean=True)
    assert not os.path.exists(os.path.join(tmp_path, "abort"))


def _reput_worker(store_dir: str) -> None:
    """Another process: dispatch everything the broker published, then exit."""
    cfg = tiny_config(store_dir)
    control = ControlBlock(os.path.join(store_dir, "control"))
    service = ReputService(cfg, control)
    while control.dispatched_pos < control.queued_pos:
        service.step(100)
    service.close()
    control.close()


def test_reput_in_another_process(tmp_path):
    h = Harness(tiny_config(tmp_path))
    for i in range(150):
        h.store.put_messages("P", i % 4, [message(b"x%d" % i + b"-" * 500, keys=f"k{i}")])
    # Not indexed yet: a read has the broker write the ConsumeQueue entries; the index waits.
    assert not os.path.exists(os.path.join(tmp_path, "consumequeue", "P"))
    assert h.store.get_messages("P", 1, 0, 100, 1 << 30).status is G.FOUND
    assert h.store.query_by_key("P", "k149", 10, 0, 1 << 62) == []
    worker = multiprocessing.get_context("spawn").Process(target=_reput_worker, args=(str(tmp_path),))
    worker.start()
    worker.join(30)
    assert worker.exitcode == 0
    got = h.store.get_messages("P", 1, 0, 100, 1 << 30)
    assert got.status is G.FOUND and len(got.records) == 37 + 1
    assert [r.body[:4] for r in h.store.query_by_key("P", "k149", 10, 0, 1 << 62)] == [b"x149"]
    h.close()


def test_flushed_records_are_kept_even_when_they_look_torn(tmp_path):
    """A record below the checkpoint was msynced whole: the torn-write guess must not cut it
    (a record whose properties end in NUL once made recovery drop every later acknowledged one)."""
    h = Harness(tiny_config(tmp_path))
    h.store.put_messages("T", 0, [message(b"before")])
    # No writer of ours stores such properties any more (the put refuses a NUL); an older store's
    # records, or a master's bytes a slave copies verbatim, may still hold them.
    odd = message(b"odd")
    phys = h.control.write_pos
    h.store.append_replicated(phys, fmt.encode(
        queue_id=0, flag=0, queue_offset=1, phys_offset=phys, sys_flag=0, born_timestamp_ms=odd.born_timestamp_ms,
        born_host=odd.born_host, store_timestamp_ms=odd.born_timestamp_ms, store_host=odd.born_host,
        reconsume_times=0, prepared_transaction_offset=0, body=odd.body, topic=b"T",
        properties=b"KEYS\x01k\x02x\x01\x00"))
    h.store._next_offsets[("T", 0)] = 2
    for i in range(5):
        h.store.put_messages("T", 0, [message(b"after-%d" % i)])
    end = h.control.write_pos
    h.dispatch_all()
    h.flush.step()
    h.flush.step_logics()  # the checkpoint now covers every record
    h.close()  # a crash: abort stays
    h = Harness(tiny_config(tmp_path))
    assert not h.report.clean_shutdown and h.report.end_phys == end, h.report
    got = h.store.get_messages("T", 0, 0, 10, 1 << 20)
    assert bodies(got) == [b"before", b"odd"] + [b"after-%d" % i for i in range(5)]
    h.close()


def test_a_store_with_only_a_preallocated_segment_is_empty(tmp_path):
    """The allocate worker creates the segment after the current one before any write; a broker
    restarted then must start at 0 again, not at that segment (its slaves start at 0)."""
    from rocketbox.cluster.shm.commitlog import CommitLog
    cfg = tiny_config(tmp_path)
    Harness(cfg).close()                 # a first boot: its checkpoint says 0
    CommitLog(cfg).ensure_segment(SEG)   # what the allocate worker leaves in an empty store
    h = Harness(cfg)
    assert h.report.end_phys == 0 and h.control.write_pos == 0
    assert h.store.put_messages("T", 0, [message(b"first")]).status == P.PUT_OK
    h.close()
    h = Harness(cfg)
    assert h.report.end_phys > 0 and h.report.records_verified == 1
    h.close()

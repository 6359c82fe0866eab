import os

from rocketbox.cluster.shm.consumequeue import ConsumeQueue, ConsumeQueueSet
from rocketbox.cluster.shm.consumequeue_format import ENTRY_SIZE
from tests.store_harness import tiny_config


def fill(cq: ConsumeQueue, count: int, *, size: int = 100) -> None:
    for n in range(count):
        cq.put(n, n * size, size, n % 3)


def test_put_get_read_across_files(tmp_path):
    cq = ConsumeQueue(tiny_config(tmp_path), "T", 2)
    assert cq.max_offset() == 0 and cq.min_offset() == 0 and cq.get(0) is None
    fill(cq, 150)
    assert cq.file_starts() == [0, 64 * ENTRY_SIZE, 128 * ENTRY_SIZE]
    assert os.path.isfile(tmp_path / "consumequeue" / "T" / "2" / "00000000000000001280")
    assert cq.get(70) == (7000, 100, 1)
    got = cq.read(60, 10)
    assert [e[0] for e in got] == [n * 100 for n in range(60, 70)]
    assert len(cq.read(140, 100)) == 10  # stops at the first empty entry
    assert cq.max_offset() == 150
    cq.put(3, 300, 100, 0)  # idempotent rewrite of an identical entry
    assert cq.get(3) == (300, 100, 0)
    cq.close()


def test_max_offset_on_exactly_full_file(tmp_path):
    cq = ConsumeQueue(tiny_config(tmp_path), "T", 0)
    fill(cq, 64)
    assert cq.max_offset() == 64
    cq.close()


def test_refresh_max_counts_only_dispatched_entries(tmp_path):
    cfg = tiny_config(tmp_path)
    writer = ConsumeQueue(cfg, "T", 0)
    fill(writer, 10)
    reader = ConsumeQueue(cfg, "T", 0)
    assert reader.refresh_max(500) == 5  # entries end at 100, 200, ... ; 5 end <= 500
    assert reader.refresh_max(450) == 5  # cached, never goes back
    fill(writer, 100)
    assert reader.refresh_max(7_000) == 70  # crosses into a file created after the first look
    assert reader.refresh_max(1 << 40) == 100
    writer.close()
    reader.close()


def test_truncate_after_phys(tmp_path):
    cq = ConsumeQueue(tiny_config(tmp_path), "T", 0)
    fill(cq, 100)
    assert cq.truncate_after_phys(5_050) == 50  # entries ending past 5050: 50..99
    assert cq.max_offset() == 50
    assert cq.file_starts() == [0]  # the emptied second file is gone
    assert cq.truncate_after_phys(0) == 50
    assert cq.max_offset() == 0 and cq.file_starts() == [0]
    cq.close()


def test_truncate_after_phys_empties_what_a_power_cut_left_past_a_hole(tmp_path):
    """A power cut can keep a later page of entries while an earlier one reads as zeros, and leave
    garbage: a search for the last entry (or a walk back from it) misses what lies past the hole,
    which a reader's prefix search would later take for entries of new records."""
    cq = ConsumeQueue(tiny_config(tmp_path), "T", 0)
    fill(cq, 150)   # files of 64 entries: 0..63, 64..127, 128..149
    for n in range(40, 50):                     # a page never written back: zeros
        cq.put(n, 0, 0, 0)
    cq.put(55, 1 << 50, 77, 5)                  # garbage where an entry was written
    assert cq.max_offset() == 150               # the size search sees only the last file
    assert cq.truncate_after_phys(3_000) == 10 + 14 + 64 + 22  # 30..39, 50..63, and two files
    assert cq.file_starts() == [0]
    assert cq.max_offset() == 30 and cq.read(0, 100) == [(n * 100, 100, n % 3) for n in range(30)]
    assert all(cq.get(n) is None for n in range(30, 64))
    cq.close()


def test_truncate_after_phys_after_a_clean_stop_reads_only_up_to_the_last_entry(tmp_path):
    cq = ConsumeQueue(tiny_config(tmp_path), "T", 0)
    fill(cq, 50)
    assert cq.truncate_after_phys(4_000, scrub=False) == 10
    assert cq.max_offset() == 40
    cq.close()


def test_set_discovers_and_deletes_topics(tmp_path):
    cfg = tiny_config(tmp_path)
    writer = ConsumeQueueSet(cfg)
    for topic, qid in [("A", 0), ("A", 3), ("B", 1)]:
        writer.get(topic, qid, create=True).put(0, 0, 10, 0)
    reader = ConsumeQueueSet(cfg)
    assert reader.get("A", 3) is not None and reader.get("C", 0) is None
    assert reader.discover() == [("A", 0), ("A", 3), ("B", 1)]
    assert reader.delete_topic("A") == 2
    assert not os.path.exists(tmp_path / "consumequeue" / "A")
    assert writer.drop_vanished() == 2
    assert writer.keys() == [("B", 1)]
    writer.close()
    reader.close()


def test_refresh_max_matches_a_linear_scan_at_every_limit(tmp_path):
    """The binary search must agree with walking entry by entry, across files and partial writes."""
    cfg = tiny_config(tmp_path)
    writer = ConsumeQueue(cfg, "T", 0)
    sizes = [100 + (i * 37) % 90 for i in range(3 * cfg.consumequeue_entries_per_file + 5)]
    ends, phys = [], 0
    for i, size in enumerate(sizes):
        writer.put(i, phys, size, 0)
        phys += size + (i % 3)  # gaps: other queues' records in between
        ends.append(phys - (i % 3))
    for limit in sorted({0, 1, ends[0] - 1, ends[0], ends[-1], ends[-1] + 5} | set(ends[::7]) | {e - 1 for e in ends[::11]}):
        reader = ConsumeQueue(cfg, "T", 0)
        reader.refresh_max(0)  # starts the incremental path from the bottom
        expected = sum(1 for e in ends if e <= limit)
        assert reader.refresh_max(limit) == expected, limit
        reader.close()
    writer.close()

import os

from rocketbox.cluster.shm import indexfile_format as ixf
from rocketbox.cluster.shm.indexfile import IndexService
from tests.store_harness import tiny_config

T0 = 1_700_000_000_000


def test_put_and_lookup_newest_first(tmp_path):
    cfg = tiny_config(tmp_path)
    ix = IndexService(cfg)
    for n in range(20):
        ix.put_keys([f"T#k{n % 4}", f"T#u{n}"], phys_offset=100 * n, store_timestamp_ms=T0 + n * 1000)
    assert ix.lookup("T#k1", 100, 0, 1 << 62) == [1700, 1300, 900, 500, 100]
    assert ix.lookup("T#k1", 2, 0, 1 << 62) == [1700, 1300]
    assert ix.lookup("T#u7", 10, 0, 1 << 62) == [700]
    assert ix.lookup("T#nope", 10, 0, 1 << 62) == []
    # Time range: seconds 5..9 after T0.
    assert ix.lookup("T#k1", 100, T0 + 5000, T0 + 9000) == [900, 500]
    header = ix._rescan()[0].header()
    assert header.index_count == 41 and header.begin_phys_offset == 0
    assert header.end_phys_offset == 1900 and header.begin_timestamp_ms == T0
    ix.close()


def test_entry_layout_on_disk(tmp_path):
    ix = IndexService(tiny_config(tmp_path))
    ix.put("T#a", 4096, T0)
    ix.put("T#a", 8192, T0 + 3500)
    f = ix._rescan()[0]
    slot = ixf.key_hash("T#a") % 64
    assert f.slot_value(slot) == 2
    assert f.entry(1) == ixf.IndexEntry(ixf.key_hash("T#a"), 4096, 0, 0)
    assert f.entry(2) == ixf.IndexEntry(ixf.key_hash("T#a"), 8192, 3, 1)
    ix.close()


def test_rolls_to_new_file_and_reader_sees_it(tmp_path):
    cfg = tiny_config(tmp_path)
    writer, reader = IndexService(cfg), IndexService(cfg)
    assert reader.lookup("T#k", 10, 0, 1 << 62) == []
    for n in range(300):  # 255 entries fit in a 256-entry file (entry 0 is unused)
        writer.put("T#k", n, T0)
    assert len(writer.file_names()) == 2
    got = reader.lookup("T#k", 1000, 0, 1 << 62)
    assert got == list(range(299, -1, -1))
    writer.close()
    reader.close()


def test_reoffered_records_are_skipped(tmp_path):
    cfg = tiny_config(tmp_path)
    ix = IndexService(cfg)
    for n in range(10):
        ix.put_keys(["T#k", f"T#u{n}"], n * 10, T0)
    ix.close()
    again = IndexService(cfg)  # a restarted reput worker offers everything again
    for n in range(12):
        again.put_keys(["T#k", f"T#u{n}"], n * 10, T0)
    assert again.lookup("T#k", 100, 0, 1 << 62) == [n * 10 for n in range(11, -1, -1)]
    assert again._rescan()[0].header().index_count == 25
    again.close()


def test_writer_death_between_entry_and_header_is_repaired(tmp_path):
    cfg = tiny_config(tmp_path)
    ix = IndexService(cfg)
    ix.put("T#a", 10, T0)
    ix.put("T#a", 20, T0)
    f = ix._rescan()[0]
    committed = f.header()
    ix.put_keys(["T#a", "T#b"], 30, T0)  # then "die" before the header: restore the old one
    ixf.HEADER.pack_into(f.mm, 0, *committed)
    reader = IndexService(cfg)
    assert reader.lookup("T#a", 10, 0, 1 << 62) == [20, 10]  # uncommitted entry ignored
    ix.close()
    restarted = IndexService(cfg)
    restarted.put("T#c", 30, T0)  # reuses entry number 3
    restarted.put("T#a", 40, T0)
    assert restarted.lookup("T#a", 10, 0, 1 << 62) == [40, 20, 10]
    assert restarted.lookup("T#c", 10, 0, 1 << 62) == [30]
    assert reader.lookup("T#b", 10, 0, 1 << 62) == []
    restarted.close()
    reader.close()


def test_delete_after_phys(tmp_path):
    cfg = tiny_config(tmp_path)
    ix = IndexService(cfg)
    for n in range(300):
        ix.put("T#k", n, T0)
    assert ix.delete_after_phys(280) == 255  # the second file began at phys 255
    assert len(ix.file_names()) == 1
    assert ix.indexed_end_phys == 254
    ix.put("T#k", 255, T0)
    assert ix.lookup("T#k", 3, 0, 1 << 62) == [255, 254, 253]
    ix.close()
    assert not [n for n in os.listdir(tmp_path / "index") if ".tmp." in n]

"""The epoch file's bytes (golden) and the epoch arithmetic a returning replica truncates by."""

import zlib

import pytest

from rocketbox.cluster.shm import epoch_format as f
from rocketbox.cluster.shm.epoch_format import EpochEntry as E


def test_golden_bytes():
    body = b"1 0\n3 4096\n"
    data = f.encode([E(1, 0), E(3, 4096)])
    assert data == body + b"crc %d\n" % zlib.crc32(body)
    assert f.decode(data) == [E(1, 0), E(3, 4096)]
    assert f.encode([]) == b"crc 0\n" and f.decode(b"crc 0\n") == []


@pytest.mark.parametrize("data", [b"", b"1 0\n", b"1 0\ncrc 1\n", b"1 x\ncrc %d\n" % zlib.crc32(b"1 x\n"),
                                  b"2 0\n1 5\ncrc %d\n" % zlib.crc32(b"2 0\n1 5\n")])
def test_damaged_or_disordered_files_are_refused(data):
    with pytest.raises(f.EpochFormatError):
        f.decode(data)


def test_every_truncation_is_refused():
    data = f.encode([E(1, 0), E(2, 100), E(7, 12345)])
    for cut in range(len(data) - 1):
        with pytest.raises(f.EpochFormatError):
            f.decode(data[:cut])


def test_begin_truncated_and_epoch_at():
    entries = f.begin([], 1, 0)
    assert f.begin(entries, 1, 50) is entries           # not newer: unchanged
    entries = f.begin(entries, 3, 200)
    assert entries == [E(1, 0), E(3, 200)]
    assert f.epoch_at(entries, 199) == (1, 0, 200)
    assert f.epoch_at(entries, 200) == (3, 200, None)
    assert f.epoch_at([], 10) == (0, 0, None)
    assert f.truncated(entries, 150) == [E(1, 0)]


def test_divergence_point_keeps_the_shared_prefix():
    # A follower of epoch 1 that is ahead of where epoch 1 ended on the new master: cut there.
    assert f.divergence_point([E(1, 0)], 1000, [E(1, 0), E(2, 800)], 1500) == 800
    # Behind: nothing to cut.
    assert f.divergence_point([E(1, 0)], 500, [E(1, 0), E(2, 800)], 1500) == 500
    # An old master's epoch the new master never heard of is dropped, then the one before.
    assert f.divergence_point([E(1, 0), E(2, 800)], 1000, [E(1, 0), E(3, 800)], 1200) == 800
    assert f.divergence_point([E(1, 0), E(2, 600)], 1000, [E(1, 0), E(3, 800)], 1200) == 600
    # Same epochs throughout: the shorter end.
    assert f.divergence_point([E(1, 0), E(2, 50)], 70, [E(1, 0), E(2, 50)], 90) == 70
    # No epochs at all: nothing proven shared with a master that has some.
    assert f.divergence_point([], 300, [E(1, 0)], 400) == 0
    assert f.divergence_point([], 0, [], 0) == 0


def test_replica_keep_judges_a_replica_by_its_last_epoch():
    master = [E(1, 1000), E(2, 5000)]
    # Epoch 1 ended at 5000 in the master's log: a replica's epoch-1 bytes past it were lost there.
    assert f.replica_keep(6000, 1, 1000, master, 9000) == 5000
    assert f.replica_keep(4000, 1, 1000, master, 9000) == 4000           # a prefix: all of it kept
    assert f.replica_keep(9500, 2, 5000, master, 9000) == 9000           # the current term, ahead of the master
    assert f.replica_keep(800, 0, 0, master, 9000) == 800                # epoch 0: before the first entry
    assert f.replica_keep(1200, 0, 0, master, 9000) == 1000
    assert f.replica_keep(7000, 3, 6000, master, 9000) == 6000           # a term the master never had
    assert f.replica_keep(300, 0, 0, [], 200) == 200                     # no epochs at all: offsets alone

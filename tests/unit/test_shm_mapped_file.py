import errno
import os

import pytest

from rocketbox.cluster.shm import mapped_file
from rocketbox.cluster.shm.mapped_file import MappedFile, MappedFileCreateError, create_file
from tests.conftest import mapping_vm_flags


def test_create_preallocates_and_is_idempotent(tmp_path):
    path = str(tmp_path / "seg" / "00000000000000000000")
    assert create_file(path, 65536) is True
    st = os.stat(path)
    assert st.st_size == 65536
    assert st.st_blocks * 512 >= 65536  # blocks reserved, not sparse
    mf = MappedFile(path, 65536)
    mf.mm[0:4] = b"data"
    # A second creator (another process) must not replace the file being written.
    assert create_file(path, 65536) is False
    assert MappedFile(path, 65536).mm[0:4] == b"data"
    assert [n for n in os.listdir(tmp_path / "seg")] == ["00000000000000000000"]
    mf.close()


def test_lost_race_keeps_the_winner(tmp_path, monkeypatch):
    path = str(tmp_path / "f")
    real_fallocate = mapped_file.fallocate

    def other_process_wins(fd, length):
        real_fallocate(fd, length)
        with open(path, "wb") as f:  # the other creator publishes first
            f.write(b"W" * length)

    monkeypatch.setattr(mapped_file, "fallocate", other_process_wins)
    assert create_file(path, 4096) is False
    assert open(path, "rb").read(1) == b"W"
    assert os.listdir(tmp_path) == ["f"]  # our temp file is gone


def test_full_disk_is_a_clear_error(tmp_path, monkeypatch):
    def no_space(fd, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mapped_file, "fallocate", no_space)
    with pytest.raises(MappedFileCreateError) as info:
        create_file(str(tmp_path / "f"), 4096)
    assert info.value.disk_full
    assert os.listdir(tmp_path) == []


def test_flush_accepts_unaligned_ranges_and_close_is_safe(tmp_path):
    path = str(tmp_path / "f")
    mf = MappedFile.create_or_open(path, 3 * 4096)
    mf.mm[5000:5003] = b"abc"
    mf.flush(4999, 5003)
    mf.flush(0)
    mf.flush(9000, 100)  # empty range
    assert mf.preheat(0, 8192) == 8192
    mf.close()
    mf.close()
    assert open(path, "rb").read()[5000:5003] == b"abc"


def test_wrong_size_is_refused(tmp_path):
    path = str(tmp_path / "f")
    create_file(path, 4096)
    with pytest.raises(ValueError):
        MappedFile(path, 8192)


def _advised_random(path: str) -> bool:
    return "rr" in mapping_vm_flags(path)[0]


@pytest.mark.parametrize("without_readahead", [True, False])
def test_preheat_asks_for_no_readahead_when_told(tmp_path, without_readahead):
    path = str(tmp_path / "seg")
    mf = MappedFile.create_or_open(path, 1 << 20)
    assert mf.preheat(0, 1 << 20, without_readahead=without_readahead) == 1 << 20
    assert _advised_random(path) is without_readahead
    mf.close()

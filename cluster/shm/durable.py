"""Making store files durable, in one place: fsync of files and directories, atomic replacement,
directories whose own names survive a power cut, and the msync of a mapped range.

Each completed sync is also reported to the durable image when one is being kept (power-loss
emulation, tests only: ``power_cut.py``): a sync is the moment bytes or names become durable,
and this module is the one place that knows when that happens.

What the store asks of the disk beyond its mapped bytes (syncs, whole-file writes, free space)
goes through one :class:`Disk`, so a test can put its twin behind the store
(``tests/faulty_disk.py``: full disk, slow syncs, and through the durable image, lost unsynced
pages and torn writes at a power cut) without the store knowing.
"""

from __future__ import annotations

import contextlib
import os

from rocketbox.cluster.shm import power_cut


class Disk:
    """The real disk (the process's one instance: :func:`disk`)."""

    def fsync_fd(self, fd: int, path: str) -> None:
        os.fsync(fd)
        power_cut.file_synced(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        power_cut.dir_synced(path)

    def synced_range(self, path: str, start: int, end: int) -> None:
        power_cut.file_synced(path, start, end)

    def write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def free_bytes(self, path: str) -> int:
        """Bytes an unprivileged writer may still use under ``path``."""
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize


_disk = Disk()


def disk() -> Disk:
    return _disk


@contextlib.contextmanager
def using(replacement: Disk):
    """The store's disk is ``replacement`` meanwhile (tests: one process, one store at a time)."""
    global _disk
    saved, _disk = _disk, replacement
    try:
        yield replacement
    finally:
        _disk = saved


def fsync_dir(path: str) -> None:
    _disk.fsync_dir(path)


def fsync_fd(fd: int, path: str) -> None:
    """fsync an open file; ``path`` names it for the durable image."""
    _disk.fsync_fd(fd, path)


def makedirs(path: str) -> None:
    """``os.makedirs``, and each directory it made is fsynced into its parent: a new directory's
    name is metadata like any other, and a power cut can take it with everything under it."""
    missing = []
    probe = os.path.abspath(path)
    while not os.path.isdir(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if not missing:
        return
    os.makedirs(path, mode=0o700, exist_ok=True)
    for made in reversed(missing):
        fsync_dir(os.path.dirname(made))


def atomic_write(path: str, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` by ``data``: readers (and a crash) see the old bytes or the new, never half.

    ``durable`` also fsyncs the file before the rename and the directory after it; state that is
    rewritten every second and stale after a machine crash anyway passes False."""
    directory = os.path.dirname(path) or "."
    if durable:
        makedirs(directory)
    else:
        os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _disk.write(fd, data)
        if durable:
            fsync_fd(fd, tmp)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(directory)


def unlink(path: str) -> bool:
    """Delete ``path`` for good: the directory is fsynced, so a power cut cannot bring it back
    (retention deletes oldest first, so what a cut can leave is a prefix of the deletions). False
    when it was gone already."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(os.path.dirname(path) or ".")
    return True


def synced_range(path: str, start: int, end: int) -> None:
    """Report an msync of ``[start, end)`` of ``path`` that completed (the caller did it natively)."""
    _disk.synced_range(path, start, end)

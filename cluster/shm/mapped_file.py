"""A fixed-size file mapped with mmap, shared by several processes.

Creation is atomic and idempotent: the file is built as ``<name>.tmp.<pid>``, its
blocks reserved with ``posix_fallocate`` and fsynced, then published under the final
name. So any process (the broker on a roll-over, the allocate worker ahead of need)
may create the same file. Publishing uses ``os.link`` rather than ``os.rename``:
rename would silently replace a file another process created a moment earlier and
may already be appending to; link fails with EEXIST instead, and the loser just
drops its temp file.

Why fallocate: writing through a mapping of a sparse file on a full disk kills the
process with SIGBUS. With the blocks reserved up front, a full disk shows up here,
at creation, as ``MappedFileCreateError`` (a status the caller turns into
DISK_FULL), never as a signal in the middle of an append.

Page-cache advice: under sync flush, the writer's and the preheater's mappings of a segment
being appended to ask for no readahead (``MADV_RANDOM``, ``advise_appending``), so its pages
enter the page cache one by one as the appends reach them. Measured: 32 KB written through a
mapping of a 1 GiB fallocated file and msynced, 3,000 times 0.5 ms apart, slowed after the first
~32-64 MiB from p50 ~300 to 692-773 us (p99 ~430 -> 2,182-2,381 us) with default advice, and
stayed at 315 / 416 us with MADV_RANDOM; written by ``pwrite`` instead it never slowed, and 16 MiB
files never reached the slow part. (Likely why: fault readahead grows the page-cache folios, and
msync writes back whole folios.) In a cluster with 1 GiB segments, sync flush + sync replication,
one thread x 128: 60-67k msg/s, p99 4.2-4.9 ms before, 92-98k and 2.5-2.6 ms with the advice
without preheating; 88-94k, 2.9 ms before and 100-102k, 2.4-2.6 ms with it once preheated.

Views: ``mmap.close()`` raises BufferError while a memoryview of it is alive. This
class hands out the mmap object itself (slicing it copies, ``struct.pack_into``
and slice assignment write in place) and keeps no views, so ``close()`` is safe
unless a caller holds one of its own.
"""

from __future__ import annotations

import errno
import mmap
import os

PAGE_BYTES = mmap.ALLOCATIONGRANULARITY
PREHEAT_CHUNK_BYTES = 16 * 1024 * 1024

from rocketbox.cluster import _native as native  # required (the store and the client already need it)
from rocketbox.cluster.shm import durable


class MappedFileCreateError(Exception):
    """A file could not be created (``disk_full`` when the cause was ENOSPC/EDQUOT)."""

    def __init__(self, path: str, cause: OSError):
        super().__init__(f"cannot create {path}: {cause}")
        self.path = path
        self.cause = cause
        self.disk_full = cause.errno in (errno.ENOSPC, errno.EDQUOT)


def fallocate(fd: int, length: int) -> None:
    """Reserve the blocks of ``fd`` (a module function so tests can make it fail)."""
    os.posix_fallocate(fd, 0, length)


def create_file(path: str, size_bytes: int, *, header: bytes = b"") -> bool:
    """Create ``path`` of ``size_bytes`` with reserved blocks, unless it exists.

    ``header`` is written at offset 0 before the file becomes visible. Returns True
    when this call created it. Raises MappedFileCreateError on any OS failure.
    """
    if os.path.exists(path):
        return False
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        durable.makedirs(os.path.dirname(path))
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            fallocate(fd, size_bytes)
            if header:
                os.pwrite(fd, header, 0)
            durable.fsync_fd(fd, tmp)
        finally:
            os.close(fd)
        try:
            # link() fails when the name exists: the first creator wins and a file
            # someone may already be writing is never replaced by our empty one.
            os.link(tmp, path)
            created = True
        except FileExistsError:
            created = False
        os.unlink(tmp)
        if created:
            durable.fsync_dir(os.path.dirname(path))
        return created
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise MappedFileCreateError(path, e) from e


class MappedFile:
    """One mapped file. ``mm`` is the mmap; positions are positions in this file."""

    __slots__ = ("path", "size_bytes", "mm")

    def __init__(self, path: str, size_bytes: int | None = None):
        self.path = path
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if size_bytes is not None and actual != size_bytes:
                raise ValueError(f"{path} is {actual} bytes, expected {size_bytes}")
            self.size_bytes = actual
            self.mm = mmap.mmap(fd, actual, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)  # the mapping keeps the file open

    @classmethod
    def create_or_open(cls, path: str, size_bytes: int, *, header: bytes = b"") -> "MappedFile":
        create_file(path, size_bytes, header=header)
        return cls(path, size_bytes)

    def flush(self, start: int = 0, end: int | None = None) -> None:
        """msync ``[start, end)`` (MS_SYNC): the helper widens it to whole pages."""
        end = self.size_bytes if end is None else min(end, self.size_bytes)
        if end > start:
            native.msync_range(self.mm, start, end)
            durable.synced_range(self.path, start, end)

    def advise_appending(self, appending: bool) -> None:
        """Tell the kernel whether this mapping is where appends go: pages it faults in then come
        one by one (see the module docstring); otherwise readahead serves sequential reads."""
        try:
            self.mm.madvise(mmap.MADV_RANDOM if appending else mmap.MADV_NORMAL)
        except OSError:
            pass   # advice only: a kernel that refuses it costs speed, never a write

    def preheat(self, start: int = 0, length: int | None = None, *, without_readahead: bool = False) -> int:
        """Fault ``[start, start+length)`` into the page cache so appends do not; returns bytes.

        Reads only (one byte per page): safe while another process appends to the
        file, which writing zeros would not be. ``without_readahead``: the pages come in one
        by one, as the appends of a sync-flush writer want them (``advise_appending``).
        """
        length = self.size_bytes - start if length is None else min(length, self.size_bytes - start)
        if length <= 0:
            return 0
        if without_readahead:
            self.advise_appending(True)
        native.preheat_read(self.mm, start, length, PAGE_BYTES)
        return length

    def mlock(self) -> bool:
        """Pin the file in memory; False when the kernel refuses (RLIMIT_MEMLOCK, privileges)."""
        try:
            native.mlock(self.mm, 0, self.size_bytes)
            return True
        except OSError:
            return False

    def munlock(self) -> None:
        """Undo ``mlock`` (a no-op for pages that were not locked)."""
        if not self.mm.closed:
            native.munlock(self.mm, 0, self.size_bytes)

    def close(self) -> None:
        if not self.mm.closed:
            self.mm.close()

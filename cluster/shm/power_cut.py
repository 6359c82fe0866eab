"""Power-loss emulation, as TigerBeetle and nats-server test their storage (tests only): a
killed process cannot show what a power cut loses.

A SIGKILL leaves the page cache whole, so it cannot tell a write that was synced from one that was
not. With ``ROCKETBOX_DURABLE_IMAGE=<dir>`` in the environment of every process of a store, each
completed sync is mirrored into that *durable image* (``durable.py`` reports them):

- bytes are durable once an fsync of their file or an msync of their range completed: the range is
  copied, as the file holds it then, into the image of the file's inode (sparse: zero blocks skipped);
- a name (file or directory) is durable once its directory was fsynced after it was made, linked or
  renamed: the directory's listing (name -> inode) is recorded.

``cut`` then rewrites a data directory as a disk would hold it after the power went out, once every
process using it is frozen and killed: a name that was never durable vanishes (with everything
under it); a durable name points at the inode it had when its directory was last synced, with that
inode's durable bytes and size; and each page written since its last sync holds, at random, its old
durable bytes, its new bytes (the kernel wrote it back on its own) or garbage where it was written (a
torn write; the bytes synced before stay).

``ROCKETBOX_POWER_CUT_AT=<n>`` makes a process stop itself (SIGSTOP) just before its n-th sync
completes, so a cut can land exactly between a rename and the directory sync that makes it stick,
inside a segment's creation, or in a checkpoint write. Unset, every hook is a dictionary lookup.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

# hashlib (OpenSSL: ~4 MB resident), shutil, uuid and random are imported where the emulation uses
# them: every process of a cluster imports this module (durable.py), almost none ever images.

IMAGE_ENV = "ROCKETBOX_DURABLE_IMAGE"
STOP_AT_ENV = "ROCKETBOX_POWER_CUT_AT"
PAGE = 4096
_CHUNK = 1 << 20
_ROOT_FILE = "root"
_XATTR = "user.rocketbox.durable"
_events = 0


def _image() -> str | None:
    return os.environ.get(IMAGE_ENV) or None


def _event() -> None:
    """Count this process's syncs; stop before the one ``STOP_AT_ENV`` names completes."""
    global _events
    _events += 1
    stop_at = os.environ.get(STOP_AT_ENV)
    if stop_at and _events == int(stop_at):
        os.kill(os.getpid(), signal.SIGSTOP)


def _file_key(path: str, *, make: bool) -> str | None:
    """The name of a file's image: a token kept in the file's own extended attributes, so a file
    deleted and its inode number reused by a new one never share an image (a name whose deletion
    was never synced comes back with its own bytes). None: never synced (and ``make`` is False)."""
    try:
        return os.getxattr(path, _XATTR).decode()
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        if exc.errno != errno.ENODATA:   # no xattrs here: inode numbers (reuse goes unseen)
            st = os.stat(path)
            return f"{st.st_dev}_{st.st_ino}"
    if not make:
        return None
    try:
        import uuid
        os.setxattr(path, _XATTR, uuid.uuid4().hex.encode(), os.XATTR_CREATE)
    except FileExistsError:
        pass   # another process named it first
    return os.getxattr(path, _XATTR).decode()


def image_root() -> str | None:
    """The directory the durable image of this process's environment covers (None: no image)."""
    image = _image()
    return _root(image) if image else None


def _root(image: str) -> str | None:
    try:
        with open(os.path.join(image, _ROOT_FILE)) as f:
            return f.read()
    except FileNotFoundError:
        return None


def _inside(root: str | None, path: str) -> bool:
    return root is not None and path.startswith(root + os.sep)


def _copy_range(src_fd: int, dst_fd: int, start: int, end: int) -> None:
    position = start
    while position < end:
        chunk = os.pread(src_fd, min(_CHUNK, end - position), position)
        if not chunk:
            break
        # Zero chunks past the image's end are skipped (it stays sparse); over older bytes they land.
        if chunk.count(0) != len(chunk) or position < os.fstat(dst_fd).st_size:
            os.pwrite(dst_fd, chunk, position)
        position += len(chunk)


def file_synced(path: str, start: int = 0, end: int | None = None) -> None:
    """``path``'s bytes [start, end) (the whole file and its size when ``end`` is None) are durable."""
    image = _image()
    if image is None:
        return
    _event()
    root, path = _root(image), os.path.abspath(path)
    if not _inside(root, path):
        return
    src = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(src)
        dst = os.open(os.path.join(image, "inodes", _file_key(path, make=True)), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if end is None:
                _copy_range(src, dst, 0, st.st_size)
                os.ftruncate(dst, st.st_size)
            else:
                _copy_range(src, dst, start - start % PAGE, min(st.st_size, -(-end // PAGE) * PAGE))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def dir_synced(path: str) -> None:
    """The names in directory ``path`` now are durable (and those gone from it are gone)."""
    image = _image()
    if image is None:
        return
    _event()
    root, path = _root(image), os.path.abspath(path)
    if _inside(root, path) or path == root:
        _record_dir(image, root, path)


def _record_dir(image: str, root: str, path: str) -> None:
    # One listing and its write at a time across the store's processes: a listing read before another
    # process made and synced a name, written after that process's, would lose the name (a fresh-clone
    # run lost CommitLog segment 0 so: the broker synced it while the allocate thread synced segment 1).
    import fcntl
    lock = os.open(os.path.join(image, "dirs.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _write_listing(image, root, path)
    finally:
        os.close(lock)


def _write_listing(image: str, root: str, path: str) -> None:
    entries = {}
    with os.scandir(path) as listing:
        for entry in listing:
            try:
                if entry.is_dir(follow_symlinks=False):
                    entries[entry.name] = ["d", None]
                else:
                    entries[entry.name] = ["f", _file_key(entry.path, make=False)]
            except FileNotFoundError:
                continue
    manifest = _manifest_path(image, "" if path == root else os.path.relpath(path, root))
    tmp = f"{manifest}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(entries, f)
    os.replace(tmp, manifest)


def _manifest_path(image: str, relative: str) -> str:
    import hashlib
    return os.path.join(image, "dirs", hashlib.sha1(relative.encode()).hexdigest())


def start_image(root: str, image: str) -> None:
    """Begin a durable image of ``root``: everything in it now counts as durable."""
    import shutil
    root = os.path.abspath(root)
    shutil.rmtree(image, ignore_errors=True)
    os.makedirs(os.path.join(image, "inodes"))
    os.makedirs(os.path.join(image, "dirs"))
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(image, _ROOT_FILE), "w") as f:
        f.write(root)
    with imaging(image):
        for directory, _dirs, files in os.walk(root, topdown=False):   # a listing names synced files
            for name in files:
                file_synced(os.path.join(directory, name))
            _record_dir(image, root, directory)


@contextlib.contextmanager
def imaging(image: str):
    """This process's syncs go to ``image`` meanwhile (as those of a process started with it)."""
    saved, os.environ[IMAGE_ENV] = os.environ.get(IMAGE_ENV), image
    try:
        yield
    finally:
        if saved is None:
            del os.environ[IMAGE_ENV]
        else:
            os.environ[IMAGE_ENV] = saved


class CutReport(dict):
    """What a cut did: files kept, names lost, and how many unsynced pages went each way."""


def cut(root: str, image: str, rng: random.Random, weights=(0.4, 0.4, 0.2)) -> CutReport:
    """Rewrite ``root`` as the disk holds it after a power cut (every process using it is dead),
    then start a fresh image of the result. ``weights``: the odds of an unsynced page keeping its
    old bytes, its new bytes, or turning to garbage."""
    import shutil
    root = os.path.abspath(root)
    staging = root + ".power-cut"
    shutil.rmtree(staging, ignore_errors=True)
    report = CutReport(files=0, lost_names=0, old=0, new=0, garbage=0)
    _restore_dir(image, root, "", staging, rng, weights, report)
    shutil.rmtree(root)
    os.rename(staging, root)
    start_image(root, image)
    return report


def _restore_dir(image, root, relative, target, rng, weights, report) -> None:
    os.makedirs(target)
    live_dir = os.path.join(root, relative)
    try:
        with open(_manifest_path(image, relative)) as f:
            entries = json.load(f)
    except FileNotFoundError:
        entries = {}
    live_names = set(os.listdir(live_dir)) if os.path.isdir(live_dir) else set()
    report["lost_names"] += len(live_names - set(entries))
    for name, (kind, key) in sorted(entries.items()):
        child = os.path.join(relative, name) if relative else name
        if kind == "d":
            _restore_dir(image, root, child, os.path.join(target, name), rng, weights, report)
        else:
            _restore_file(image, os.path.join(root, child), key, os.path.join(target, name), rng, weights, report)


def _restore_file(image, live_path, key, target, rng, weights, report) -> None:
    durable = bytearray()   # named, never synced: an empty file (delayed allocation)
    if key is not None:
        try:
            with open(os.path.join(image, "inodes", key), "rb") as f:
                durable = bytearray(f.read())
        except FileNotFoundError:
            pass
    try:
        same_file = key is not None and _file_key(live_path, make=False) == key
        with open(live_path, "rb") as f:
            live = f.read(len(durable)) if same_file else b""
    except FileNotFoundError:
        live = b""
    for start in range(0, min(len(live), len(durable)), PAGE):
        old, new = bytes(durable[start:start + PAGE]), live[start:start + PAGE]
        if old == new:
            continue
        fate = rng.choices(("old", "new", "garbage"), weights)[0]
        report[fate] += 1
        if fate == "new":
            durable[start:start + len(new)] = new
        elif fate == "garbage":   # only the bytes written since the sync: synced ones stay
            noise = rng.randbytes(len(new))
            durable[start:start + len(new)] = bytes(n if o != w else o for o, w, n in zip(old, new, noise))
    with open(target, "wb") as f:
        f.write(durable)
    report["files"] += 1

"""A store's epoch file (``<store>/epoch``, bytes in ``epoch_format.py``), written atomically.

Written by the broker main process only: a master when it begins an epoch, a slave when
replicated bytes of a new epoch arrive, recovery's truncation when a returning replica
cuts its log back to what the new master holds.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.shm import epoch_format as fmt
from rocketbox.cluster.shm.durable import atomic_write
from rocketbox.cluster.shm.paths import epoch_path

log = logging.getLogger(__name__)



class EpochCache:
    def __init__(self, store_dir: str):
        self.store_dir = store_dir
        self.path = epoch_path(store_dir)
        self.entries: list[fmt.EpochEntry] = self._load()

    def _load(self) -> list[fmt.EpochEntry]:
        try:
            with open(self.path, "rb") as f:
                return fmt.decode(f.read())
        except FileNotFoundError:
            return []
        except fmt.EpochFormatError as exc:
            # Without it this replica cannot prove which of its bytes a new master shares: it
            # will be cut back to nothing and copied again (divergence_point of no epochs).
            log.error("epoch file %s unreadable (%s): treated as empty", self.path, exc)
            return []

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def begin(self, epoch: int, start_offset: int) -> bool:
        entries = fmt.begin(self.entries, epoch, start_offset)
        if entries is self.entries:
            return False
        self._save(entries)
        return True

    def truncate(self, end_offset: int) -> None:
        entries = fmt.truncated(self.entries, end_offset)
        if entries != self.entries:
            self._save(entries)

    def epoch_at(self, offset: int) -> tuple[int, int, int | None]:
        return fmt.epoch_at(self.entries, offset)

    def to_json(self) -> list[list[int]]:
        return [[e.epoch, e.start_offset] for e in self.entries]

    def _save(self, entries: list[fmt.EpochEntry]) -> None:
        atomic_write(self.path, fmt.encode(entries))
        self.entries = entries


def entries_from_json(raw) -> list[fmt.EpochEntry]:
    """A master's epoch list as GET_BROKER_EPOCH_CACHE carries it; EpochFormatError when malformed."""
    try:
        entries = [fmt.EpochEntry(int(e), int(s)) for e, s in raw]
    except (TypeError, ValueError) as exc:
        raise fmt.EpochFormatError(f"bad epoch list: {exc}") from None
    fmt.check(entries)
    return entries

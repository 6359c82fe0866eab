"""The epoch file's bytes and the arithmetic on epochs. Pure: no I/O.

A broker's ``<store>/epoch`` lists, for each epoch whose bytes its CommitLog holds, where
that epoch starts (RocketMQ 5's EpochFileCache): ASCII lines ``<epoch> <start offset>\\n``,
both decimal, epochs strictly increasing, offsets non-decreasing, and a last line
``crc <crc32 of the lines above, decimal>\\n`` so a torn write is seen. An epoch is one
master's term (``controller/state.py``); its bytes run from its start to the next
epoch's start (or the log's end).
"""

from __future__ import annotations

import zlib
from typing import NamedTuple


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class EpochFormatError(ValueError):
    pass


def encode(entries: list[EpochEntry]) -> bytes:
    check(entries)
    body = "".join(f"{e.epoch} {e.start_offset}\n" for e in entries).encode()
    return body + f"crc {zlib.crc32(body)}\n".encode()


def decode(data: bytes) -> list[EpochEntry]:
    body, sep, tail = data.rstrip(b"\n").rpartition(b"\n")
    if not sep:          # only the crc line (no entries) or a single line
        body, tail = b"", data.rstrip(b"\n")
    else:
        body += b"\n"
    if not tail.startswith(b"crc ") or not tail[4:].isdigit() or int(tail[4:]) != zlib.crc32(body):
        raise EpochFormatError("the epoch file's checksum line is missing or does not match")
    entries = []
    for line in body.decode("ascii").splitlines():
        parts = line.split(" ")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise EpochFormatError(f"bad epoch line {line[:60]!r}")
        entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    check(entries)
    return entries


def check(entries: list[EpochEntry]) -> None:
    for before, after in zip(entries, entries[1:]):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            raise EpochFormatError(f"epochs out of order: {before} then {after}")


def begin(entries: list[EpochEntry], epoch: int, start_offset: int) -> list[EpochEntry]:
    """``entries`` with ``epoch`` starting at ``start_offset`` (unchanged if it is not newer)."""
    if entries and epoch <= entries[-1].epoch:
        return entries
    return [*entries, EpochEntry(epoch, start_offset)]


def truncated(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """The entries of a log cut at ``end_offset``: epochs starting after it are gone."""
    return [e for e in entries if e.start_offset <= end_offset]


def epoch_at(entries: list[EpochEntry], offset: int) -> tuple[int, int, int | None]:
    """(epoch, its start, the next epoch's start or None) of the byte at ``offset``."""
    current, start, following = 0, 0, None
    for e in entries:
        if e.start_offset <= offset:
            current, start = e.epoch, e.start_offset
        else:
            following = e.start_offset
            break
    return current, start, following


def end_of_epoch(entries: list[EpochEntry], epoch: int, log_end: int) -> int:
    """Where ``epoch`` ends in a log that holds it."""
    later = [e.start_offset for e in entries if e.epoch > epoch]
    return later[0] if later else log_end


def divergence_point(own: list[EpochEntry], own_end: int, master: list[EpochEntry], master_end: int) -> int:
    """The longest prefix of this log that the master's log shares: truncate to it, then replicate.

    Kafka's OffsetsForLeaderEpoch, done by the follower: for its last epoch, the master's
    largest epoch at or below it; if that is the same epoch, the logs agree up to where it ends
    in both; if not, this replica's bytes of its last epoch (a term the master never heard of)
    diverge, and the epoch before it is tried. One epoch has one master, so the same epoch
    means the same bytes."""
    entries = list(own)
    end = own_end
    while entries:
        last = entries[-1]
        older = [e for e in master if e.epoch <= last.epoch]
        if older and older[-1].epoch == last.epoch:
            return min(end, end_of_epoch(master, last.epoch, master_end))
        end = min(end, last.start_offset)
        entries.pop()
    return 0 if master else end


def replica_keep(replica_end: int, replica_epoch: int, replica_epoch_start: int, master: list[EpochEntry],
                 master_end: int) -> int:
    """How much of a replica's log, whose last epoch is ``replica_epoch`` (from
    ``replica_epoch_start``), the master's log shares, judged by the master from that one epoch:
    all of it up to where the epoch ends in the master's log if the master has the epoch (one
    epoch, one master: the same bytes), else nothing of that epoch (the replica then reports the
    epoch before). A log without epoch entries is all epoch 0."""
    if replica_epoch == 0 or any(e.epoch == replica_epoch for e in master):
        return min(replica_end, end_of_epoch(master, replica_epoch, master_end), master_end)
    return min(replica_end, replica_epoch_start)

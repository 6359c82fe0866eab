"""The native helper: what Python cannot do, or cannot do fast enough, in a few small C files.

The contract is declared in ``helper.h`` (return codes, byte orders, the scan row layout; the
layouts' constants in ``layouts.h``, generated at build time from the Python format tables),
implemented in ``helper.c``, ``record_write.c`` (the one record encoder), ``send_lane.c`` and ``lane_header.c``, ``record_crc.c`` and
``crc32.c`` (each file calls only those after it) and built by cffi (``build.py``) when the
package is installed. This module wraps each C function: Python buffers
(mmap objects, bytes, bytearray, memoryview) go in, Python values come out,
and ``_check`` turns every negative return code into an exception.

| function | why it is native |
| --- | --- |
| ``msync_range`` / ``mlock`` / ``munlock`` | a byte range of an mmap, page-aligned here (``mmap.flush`` only takes whole-page offsets; ``mlock`` has no stdlib form) |
| ``preheat_read`` | touch every page of a segment before the first append or read needs it, in one call |
| ``U64Slots`` | cursors published between processes through a shared mmap need acquire/release ordering |
| ``crc32`` / ``body_crc`` | zlib-compatible CRC-32 usable inside the C loops below |
| ``measure_batch`` / ``encode_batch`` | a batch body to CommitLog records in one pass, sealed with the whole-record CRC property when asked (``record_crc.c``; twin: ``cluster.message.batch_format``) |
| ``record_size`` / ``encode_record`` | any other record the broker writes (sends, retries, delayed and transaction records, pop checkpoints and acks) straight into the mapped segment, a call a record (twin and oracle: ``record_format.encode_batch``); ``encode_record_into`` the same into a buffer ``writable`` exported once for a put's records |
| ``scan_records`` | the reput worker and recovery walk records without decoding each one in Python |
| ``DispatchBatch`` (scan, extract, index_put, cq_put) | the reput worker's whole per-record work (properties, Java key hashes, IndexFile and ConsumeQueue entries) in a few calls a batch |
| ``send_lane.LaneCodec`` (its own module) | the remoting door's read of plain sends: frames scanned, queues picked, records encoded and answers written in a few calls a read, not ~25 Python steps a send (``send_lane.c``, ``lane_header.c``; twin and oracle: the broker's Python send path) |

Every buffer is held only for the duration of a call, so ``mmap.close()``
never meets a ``BufferError`` because of this module.
"""

from __future__ import annotations

import os
from array import array
from functools import partial
from typing import NamedTuple

try:
    from rocketbox.cluster._native._rocketbox_native import ffi, lib
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "RocketBox's native helper (cluster._native._rocketbox_native) is not built: "
        "run `make install`, or `pip install -e .` from the repository root inside the venv "
        "(needs gcc). After changing helper.c/helper.h, run it again."
    ) from exc

from rocketbox.cluster.format_errors import DestinationTooSmall, MalformedBatch

__all__ = [
    "DestinationTooSmall", "DispatchBatch", "MalformedBatch", "ScanResult", "ScannedRecord",
    "U64Slots", "body_crc", "crc32", "encode_batch", "encode_record", "encode_record_into", "measure_batch", "mlock",
    "msync_range", "munlock", "record_size", "writable",
    "encode_items_shared", "offset_msg_ids", "preheat_read", "scan_records",
]

PAGE_BYTES_DEFAULT = 4096
HOST_BYTES = 8  # IPv4 4 + port 4

# The helper's own codes (helper.h enum rb_status); anything else negative is -errno.
_ERRORS = {
    lib.RB_E_RANGE: (ValueError, "range is not inside the buffer"),
    lib.RB_E_ARGUMENT: (ValueError, "invalid argument"),
    lib.RB_E_BATCH_MALFORMED: (MalformedBatch, "batch item sizes do not add up"),
    lib.RB_E_DEST_TOO_SMALL: (DestinationTooSmall, "the records do not fit in the destination"),
}


def _check(rc: int, what: str) -> int:
    """Return ``rc`` if it is a success (>= 0); raise the exception it stands for otherwise."""
    if rc >= 0:
        return rc
    if rc in _ERRORS:
        exc_type, reason = _ERRORS[rc]
        raise exc_type(f"{what}: {reason}")
    # OSError picks the subclass (PermissionError for EPERM, ...) from the errno.
    raise OSError(-rc, f"{what}: {os.strerror(-rc)}")


def _zeros(count: int) -> array:
    """An int64 array of ``count`` zeros, made by repetition (no temporary bytes object)."""
    return _ZERO * count


_ZERO = array("q", [0])


def _readable(buffer):
    """The buffer's bytes for one call; use in ``with`` so the export ends with the call."""
    return ffi.from_buffer("uint8_t[]", buffer)


def _writable(buffer):
    return ffi.from_buffer("uint8_t[]", buffer, require_writable=True)


# ---- memory ----

def msync_range(buffer, start: int, end: int, sync: bool = True) -> None:
    """Flush ``buffer[start:end]`` of an mmap to its file (MS_SYNC, or MS_ASYNC if not ``sync``)."""
    with _readable(buffer) as buf:
        _check(lib.rb_msync_range(buf, len(buf), start, end, int(bool(sync))), "msync")


def mlock(buffer, start: int, length: int) -> None:
    """Pin the pages of ``buffer[start:start+length]`` in RAM (RLIMIT_MEMLOCK applies)."""
    with _readable(buffer) as buf:
        _check(lib.rb_mlock(buf, len(buf), start, length), "mlock")


def munlock(buffer, start: int, length: int) -> None:
    """Let the pages of ``buffer[start:start+length]`` be paged out again."""
    with _readable(buffer) as buf:
        _check(lib.rb_munlock(buf, len(buf), start, length), "munlock")


def preheat_read(buffer, start: int, length: int, page_bytes: int = PAGE_BYTES_DEFAULT) -> int:
    """Read a byte of every page of ``buffer[start:start+length]``; return pages touched."""
    with _readable(buffer) as buf:
        return _check(lib.rb_preheat_read(buf, len(buf), start, length, page_bytes), "preheat_read")


# ---- cursors ----

class U64Slots:
    """Native-order u64 slots of a shared mapping, read with acquire and written with release.

    A reader that loads a cursor then sees every byte its writer stored before
    publishing it, on any CPU, not only where plain stores stay in order (x86-64).
    Alignment and bounds are checked once, here and in ``loader``/``storer``, which
    give one slot's calls already bound (a cursor read costs one C call, no checks).
    ``release()`` before closing the mapping (this holds an export of it).
    """

    def __init__(self, buffer, count: int):
        self._buffer = ffi.from_buffer("uint64_t[]", buffer, require_writable=True)
        if len(self._buffer) < count:
            self.release()
            raise ValueError(f"U64Slots: {count} slots do not fit in {len(buffer)} bytes")
        if int(ffi.cast("uintptr_t", self._buffer)) % 8:
            self.release()
            raise ValueError("U64Slots: the buffer is not 8-byte aligned in memory")
        self.count = count

    def _checked(self, index: int) -> int:
        if not 0 <= index < self.count:
            raise IndexError(f"slot {index} of {self.count}")
        return index

    def loader(self, index: int):
        """A no-argument callable: the acquire-load of slot ``index``."""
        return partial(lib.rb_slot_load, self._buffer, self._checked(index))

    def storer(self, index: int):
        """A one-argument callable: release-store its value (0..2**64-1) in slot ``index``."""
        # cffi refuses a value outside uint64_t with OverflowError before anything is written.
        return partial(lib.rb_slot_store, self._buffer, self._checked(index))

    def load(self, index: int) -> int:
        return lib.rb_slot_load(self._buffer, self._checked(index))

    def store(self, index: int, value: int) -> None:
        lib.rb_slot_store(self._buffer, self._checked(index), value)

    def release(self) -> None:
        ffi.release(self._buffer)


# ---- CRC ----

def crc32(data, value: int = 0) -> int:
    """The same as ``zlib.crc32(data, value)``."""
    with _readable(data) as buf:
        return lib.rb_crc32(value, buf, len(buf))


def body_crc(data) -> int:
    """BODYCRC as a record stores it: ``crc32(data) & 0x7FFFFFFF``."""
    return crc32(data) & 0x7FFFFFFF


# ---- batch -> records ----

def measure_batch(batch_body, topic_len: int, *, record_crc: bool = False) -> tuple[int, int]:
    """(item count, bytes its records will take, with the whole-record CRC property when
    ``record_crc``); MalformedBatch if the sizes do not add up."""
    count = ffi.new("int64_t *")
    record_bytes = ffi.new("int64_t *")
    with _readable(batch_body) as batch:
        _check(lib.rb_measure_batch(batch, len(batch), topic_len, int(bool(record_crc)), count, record_bytes),
               "measure_batch")
    return count[0], record_bytes[0]


def encode_batch(dst, dst_pos: int, batch_body, topic: bytes, queue_id: int,
                 queue_offset_first: int, phys_offset_first: int, sys_flag: int,
                 born_timestamp_ms: int, born_host: bytes, store_timestamp_ms: int,
                 store_host: bytes, *, dst_limit: int | None = None,
                 record_crc: bool = False) -> tuple[int, int, array]:
    """Write a batch body's items as CommitLog records at ``dst[dst_pos:dst_limit]``, each
    ending with the sealed whole-record CRC property when ``record_crc``.

    All or nothing: ``MalformedBatch`` or ``DestinationTooSmall`` (roll to the next
    file) before any byte is written. Returns ``(bytes_written, count, record_ends)``,
    ``record_ends[i]`` being the position in ``dst`` just after record i. The same
    contract and bytes as ``cluster.message.batch_format.encode_batch``.
    """
    for name, host in (("born_host", born_host), ("store_host", store_host)):
        if len(host) != HOST_BYTES:
            raise ValueError(f"{name} must be {HOST_BYTES} bytes (IPv4 + port), got {len(host)}")
    count, _ = measure_batch(batch_body, len(topic), record_crc=record_crc)
    record_ends = _zeros(count)
    written_count = ffi.new("int64_t *")
    fields = ffi.new("struct rb_record_fields *", {
        "queue_id": queue_id, "queue_offset_first": queue_offset_first,
        "phys_offset_first": phys_offset_first, "sys_flag": sys_flag,
        "born_timestamp_ms": born_timestamp_ms, "born_host": list(born_host),
        "store_timestamp_ms": store_timestamp_ms, "store_host": list(store_host),
        "record_crc": int(bool(record_crc)),
    })
    with _writable(dst) as out, _readable(batch_body) as batch, _readable(topic) as topic_bytes, \
            ffi.from_buffer("int64_t[]", record_ends, require_writable=True) as ends:
        limit = len(out) if dst_limit is None else dst_limit
        written = _check(lib.rb_encode_batch(out, len(out), dst_pos, limit, batch, len(batch),
                                             topic_bytes, len(topic_bytes), fields,
                                             ends, count, written_count), "encode_batch")
    return written, written_count[0], record_ends


def record_size(body_len: int, properties: bytes, topic_len: int, record_crc: bool) -> int:
    """The size of one record (its properties stored as ``record_format.stored_properties`` makes
    them); ``MalformedBatch`` for a NUL in the properties or a record too large for its fields,
    ValueError for a topic over 127 bytes. Positional arguments: a call a record the broker writes."""
    size = lib.rb_record_size(body_len, properties, len(properties), topic_len, record_crc)
    return size if size >= 0 else _check(size, "record_size")


def encode_record(dst, dst_pos: int, size: int, body: bytes, properties: bytes, topic: bytes, flag: int,
                  reconsume_times: int, queue_id: int, queue_offset: int, phys_offset: int, sys_flag: int,
                  born_timestamp_ms: int, born_host: bytes, store_timestamp_ms: int, store_host: bytes,
                  prepared_transaction_offset: int, record_crc: bool) -> None:
    """Write one record, ``size`` bytes, at ``dst[dst_pos:]``: the bytes ``record_format.encode_batch``
    makes for it (a transaction PREPARED or ROLLBACK sysFlag stores queue offset 0), in one C call.
    Every record the broker writes but a batch body's items goes through here (arguments by position
    on that path: keywords cost a tenth of the call).

    ``size`` is the record's size as the caller reserved it (``record_size``): nothing is written
    unless the record is exactly that (ValueError). Bytes args only (cffi passes them without a copy);
    ``MalformedBatch`` for a NUL in the properties or fields too large."""
    with _writable(dst) as out:
        encode_record_into(out, dst_pos, size, body, properties, topic, flag, reconsume_times, queue_id, queue_offset,
                           phys_offset, sys_flag, born_timestamp_ms, born_host, store_timestamp_ms, store_host,
                           prepared_transaction_offset, record_crc)


def writable(buffer):
    """``buffer`` exported for several ``encode_record_into`` calls: ``with writable(segment) as out``."""
    return _writable(buffer)


def encode_record_into(out, dst_pos: int, size: int, body: bytes, properties: bytes, topic: bytes, flag: int,
                       reconsume_times: int, queue_id: int, queue_offset: int, phys_offset: int, sys_flag: int,
                       born_timestamp_ms: int, born_host: bytes, store_timestamp_ms: int, store_host: bytes,
                       prepared_transaction_offset: int, record_crc: bool) -> None:
    """``encode_record`` into a buffer already exported (``writable``): the records of one put
    share one export instead of one each."""
    if len(born_host) != HOST_BYTES or len(store_host) != HOST_BYTES:
        raise ValueError(f"born_host and store_host must be {HOST_BYTES} bytes (IPv4 + port)")
    _check(lib.rb_encode_record(
        out, len(out), dst_pos, size, body, len(body), properties, len(properties), topic,
        len(topic), flag, reconsume_times, queue_id, queue_offset, phys_offset, sys_flag,
        born_timestamp_ms, born_host, store_timestamp_ms, store_host, prepared_transaction_offset,
        record_crc), "encode_record")


# ---- scanning ----

SCAN_COLUMNS = lib.RB_SCAN_COLUMNS
SCAN_END = "end"                 # reached ``end`` exactly
SCAN_LIMIT = "limit"             # ``max_rows`` records returned; scan again from next_pos
SCAN_INCOMPLETE = "incomplete"   # zeros, or a record running past ``end`` (not written yet, or torn)
SCAN_BLANK = "blank"             # an end-of-file blank at next_pos: go on in the next file
SCAN_CORRUPT = "corrupt"         # bad magic or sizes; with check_crc a BODYCRC or whole-record CRC mismatch
_STOPS = {
    lib.RB_SCAN_END: SCAN_END, lib.RB_SCAN_LIMIT: SCAN_LIMIT,
    lib.RB_SCAN_INCOMPLETE: SCAN_INCOMPLETE, lib.RB_SCAN_BLANK: SCAN_BLANK,
    lib.RB_SCAN_CORRUPT: SCAN_CORRUPT,
}


class ScannedRecord(NamedTuple):
    """One row of a scan, fields in helper.h's column order; positions are positions in the buffer."""

    pos: int
    total_size: int
    queue_id: int
    queue_offset: int
    phys_offset: int
    sys_flag: int
    store_timestamp_ms: int
    body_pos: int
    body_len: int
    topic_pos: int
    topic_len: int
    properties_pos: int
    properties_len: int


assert len(ScannedRecord._fields) == SCAN_COLUMNS


class ScanResult(NamedTuple):
    """``rows`` holds ``count`` rows of ``SCAN_COLUMNS`` int64 each, flat.

    ``memoryview(rows).cast("B").cast("q", (count, SCAN_COLUMNS))`` gives a 2-D
    view; ``row(i)`` a named tuple. ``next_pos`` is where the next scan starts and
    ``stop`` says why this one stopped (one of the ``SCAN_*`` strings).
    """

    rows: array
    count: int
    next_pos: int
    stop: str

    def row(self, i: int) -> ScannedRecord:
        if not 0 <= i < self.count:
            raise IndexError(f"row {i} of {self.count}")
        return ScannedRecord(*self.rows[i * SCAN_COLUMNS:(i + 1) * SCAN_COLUMNS])

    def records(self) -> list[ScannedRecord]:
        return [self.row(i) for i in range(self.count)]


def delivered_records(payload) -> bytes:
    """``payload``'s records (whole, back to back) as consumers get them: without the whole-record CRC
    property (``record_format.delivered_records``, the Python twin); ValueError for anything else."""
    out = bytearray(len(payload))
    with _readable(payload) as src, _writable(out) as dst:
        written = lib.rb_delivered_records(src, len(src), dst, len(dst))
    if written < 0:
        raise ValueError("not whole records back to back")
    del out[written:]
    return bytes(out)


def scan_records(buffer, start: int, end: int, *, max_rows: int = 1024,
                 check_crc: bool = False) -> ScanResult:
    """Walk the records of ``buffer[start:end]`` as ``shm/commitlog_format.decode_segment_at`` would.

    The reput worker scans without ``check_crc`` (the broker wrote the bytes);
    recovery scans with it.
    """
    if max_rows < 0:
        raise ValueError(f"max_rows must be >= 0, got {max_rows}")
    rows = _zeros(SCAN_COLUMNS * max(max_rows, 1))
    count = ffi.new("int64_t *")
    next_pos = ffi.new("int64_t *")
    with _readable(buffer) as buf, ffi.from_buffer("int64_t[]", rows, require_writable=True) as out:
        stop = _check(lib.rb_scan_records(buf, len(buf), start, end, int(bool(check_crc)),
                                          out, max_rows, count, next_pos), "scan_records")
    del rows[count[0] * SCAN_COLUMNS:]
    return ScanResult(rows, count[0], next_pos[0], _STOPS[stop])


# ---- reput dispatch ----

DISPATCH_COLUMNS = lib.RB_DISPATCH_COLUMNS
DCOL_TAG_HASH = lib.RB_DCOL_TAG_HASH
DCOL_FLAGS = lib.RB_DCOL_FLAGS
DCOL_KEY_FIRST = lib.RB_DCOL_KEY_FIRST
DCOL_KEY_COUNT = lib.RB_DCOL_KEY_COUNT
DISPATCH_PYTHON = lib.RB_DISPATCH_PYTHON  # not valid UTF-8 somewhere: dispatch the row in Python
DISPATCH_CQ = lib.RB_DISPATCH_CQ
DISPATCH_INDEX = lib.RB_DISPATCH_INDEX
INDEX_DONE = lib.RB_INDEX_DONE
INDEX_NEW_FILE = lib.RB_INDEX_NEW_FILE
INDEX_PYTHON = lib.RB_INDEX_PYTHON
# Columns of a scan row, for readers of DispatchBatch.rows.
COL_POS = lib.RB_COL_POS
COL_TOTAL_SIZE = lib.RB_COL_TOTAL_SIZE
COL_QUEUE_ID = lib.RB_COL_QUEUE_ID
COL_QUEUE_OFFSET = lib.RB_COL_QUEUE_OFFSET
COL_TOPIC_POS = lib.RB_COL_TOPIC_POS
COL_TOPIC_LEN = lib.RB_COL_TOPIC_LEN
# Enough key hashes for any single record: properties are at most 32767 bytes,
# so KEYS has at most ~16k words.
_ONE_RECORD_KEYS_MAX = 16_400


def encode_items_shared(flag: int, bodies: bytes, body_lengths, shared_properties: bytes,
                        id_prefix: bytes, counter_first: int) -> tuple[bytes, str]:
    """(batch body, comma-joined UNIQ_KEYs) for messages sharing flag and properties.

    ``bodies`` is the bodies back to back, ``body_lengths`` an ``array('q')`` of their
    lengths; each id is ``id_prefix`` + 12 upper-hex digits of ``counter_first + i``.
    The same bytes as ``batch_format.encode_items_sharing_properties``.
    """
    count = len(body_lengths)
    if count == 0:
        return b"", ""
    props_len = len(shared_properties) + 9 + len(id_prefix) + 13
    out = bytearray(count * (22 + props_len) + len(bodies))
    ids = bytearray(count * (len(id_prefix) + 13) - 1)
    with _readable(bodies) as body_buf, ffi.from_buffer("int64_t[]", body_lengths) as lengths, \
            _readable(shared_properties) as shared, _readable(id_prefix) as prefix, \
            _writable(out) as out_buf, _writable(ids) as ids_buf:
        written = lib.rb_encode_items_shared(body_buf, len(body_buf), lengths, count, flag, shared, len(shared),
                                             prefix, len(prefix), counter_first, out_buf, len(out_buf),
                                             ids_buf, len(ids_buf))
    _check(written, "encode_items_shared")
    return bytes(out), ids.decode("ascii")


def offset_msg_ids(store_host: bytes, phys_first: int, record_ends, pos0: int) -> str:
    """The comma-joined offset message ids of the records ``encode_batch`` just wrote.

    ``record_ends`` and ``pos0`` (where record 0 starts in the same buffer) place each
    record; the ids equal ``message/ids.offset_msg_id`` of each record's phys offset.
    """
    if len(store_host) != HOST_BYTES:
        raise ValueError(f"store_host must be {HOST_BYTES} bytes, got {len(store_host)}")
    count = len(record_ends)
    if count == 0:
        return ""
    out = bytearray(33 * count - 1)
    with _readable(store_host) as host, ffi.from_buffer("int64_t[]", record_ends) as ends, \
            _writable(out) as buf:
        _check(lib.rb_offset_msg_ids(host, phys_first, ends, count, pos0, buf, len(buf)), "offset_msg_ids")
    return out.decode("ascii")


class DispatchBatch:
    """The reput worker's working set for up to ``rows_max`` records, allocated once.

    ``rows`` (scan rows, helper.h ``rb_scan_column``), ``info`` (``DISPATCH_COLUMNS`` a
    row), ``key_hashes``, ``runs`` ((first row, row count, last row) triples: a queue's rows
    with consecutive offsets, wherever they lie in the batch) and ``next_in_run`` (each run
    row's next row, -1 after its last) are arrays whose C views are kept for the object's
    life, so a call costs only the buffer it is given.
    Use: ``scan`` a file's records, ``extract``, then ``index_put`` and ``cq_put``.
    """

    def __init__(self, rows_max: int = 4096, wants: int = lib.RB_DISPATCH_CQ | lib.RB_DISPATCH_INDEX):
        """``wants``: the entries the caller writes (``DISPATCH_CQ``, ``DISPATCH_INDEX``); ``extract``
        skips the other's work (the broker's queue writer hashes no keys, the reput no tags)."""
        if rows_max <= 0:
            raise ValueError(f"rows_max must be > 0, got {rows_max}")
        self.rows_max = rows_max
        self.wants = wants
        self.count = 0  # rows filled by the last scan / extract
        self.rows = _zeros(SCAN_COLUMNS * rows_max)
        self.info = _zeros(DISPATCH_COLUMNS * rows_max)
        self.key_hashes = array("I", bytes(4 * (4 * rows_max + _ONE_RECORD_KEYS_MAX)))
        assert self.key_hashes.itemsize == 4
        self.runs = _zeros(3 * rows_max)
        self.next_in_run = _zeros(rows_max)
        self._rows = ffi.from_buffer("int64_t[]", self.rows, require_writable=True)
        self._info = ffi.from_buffer("int64_t[]", self.info, require_writable=True)
        self._keys = ffi.from_buffer("uint32_t[]", self.key_hashes, require_writable=True)
        self._runs = ffi.from_buffer("int64_t[]", self.runs, require_writable=True)
        self._next_in_run = ffi.from_buffer("int64_t[]", self.next_in_run, require_writable=True)
        self._out = ffi.new("int64_t[2]")
        self._no_file = ffi.new("uint8_t[1]")

    def scan(self, buffer, start: int, end: int, max_rows: int | None = None) -> tuple[int, int, str]:
        """``scan_records`` into ``rows`` without CRC checks: (rows, next_pos, stop)."""
        n = self.rows_max if max_rows is None else min(max_rows, self.rows_max)
        out = self._out
        with _readable(buffer) as buf:
            stop = _check(lib.rb_scan_records(buf, len(buf), start, end, 0, self._rows, n,
                                              out, out + 1), "scan_records")
        self.count = out[0]
        return out[0], out[1], _STOPS[stop]

    def extract(self, buffer, count: int | None = None) -> int:
        """Fill ``info``, ``key_hashes`` and ``runs`` for the scanned rows of ``buffer``; returns
        the run count. ``count`` may come back smaller (key hashes full): rows past it are
        not extracted and must be scanned again."""
        n = self.count if count is None else count
        if not 0 <= n <= self.rows_max:
            raise ValueError(f"count {n} is not in [0, {self.rows_max}]")
        out = self._out
        with _readable(buffer) as buf:
            _check(lib.rb_dispatch_extract(buf, len(buf), self._rows, n, self.wants, self._info, self._keys,
                                           len(self.key_hashes), self._runs, self._next_in_run, out, out + 1),
                   "dispatch_extract")
        self.count = out[1]
        return out[0]

    def index_put(self, buffer, slot_count: int, entry_count_max: int, row_from: int, row_to: int,
                  phys_base: int, indexed_end_phys: int) -> tuple[int, int, int]:
        """IndexFile entries of rows [row_from, row_to) into ``buffer`` (None: no file yet).

        Returns (stop, stop_row, indexed_end_phys): stop is ``INDEX_DONE``,
        ``INDEX_NEW_FILE`` (roll to a new file, then call again from stop_row) or
        ``INDEX_PYTHON`` (dispatch row stop_row in Python, go on after it).
        """
        out = self._out
        out[0] = indexed_end_phys
        if row_to > self.count:
            raise ValueError(f"row_to {row_to} is past the {self.count} extracted rows")
        if buffer is None:
            stop = lib.rb_index_put_rows(self._no_file, 0, slot_count, entry_count_max, self._rows,
                                         self._info, self.count, self._keys, len(self.key_hashes),
                                         row_from, row_to, phys_base, out, out + 1)
        else:
            with _writable(buffer) as buf:
                stop = lib.rb_index_put_rows(buf, len(buf), slot_count, entry_count_max, self._rows,
                                             self._info, self.count, self._keys, len(self.key_hashes),
                                             row_from, row_to, phys_base, out, out + 1)
        _check(stop, "index_put_rows")
        return stop, out[1], out[0]

    def cq_put(self, buffer, pos: int, row_first: int, count: int, phys_base: int) -> int:
        """ConsumeQueue entries of ``count`` rows of a run, from ``row_first`` along
        ``next_in_run``, at ``buffer[pos:]``. Returns the run's row after them (-1: none)."""
        out = self._out
        with _writable(buffer) as buf:
            _check(lib.rb_cq_put_rows(buf, len(buf), pos, self._rows, self._info, self._next_in_run, self.count,
                                      row_first, count, phys_base, out), "cq_put_rows")
        return out[0]

    def run_rows(self, row_first: int, below: int | None = None) -> list[int]:
        """The rows of the run starting at ``row_first`` (those below ``below``), in order."""
        rows, row, nxt = [], row_first, self.next_in_run
        while row >= 0 and (below is None or row < below):
            rows.append(row)
            row = nxt[row]
        return rows

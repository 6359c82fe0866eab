"""The C side of the remoting door's send lane (``send_lane.c``; the broker's side is
``broker/send_lane.py``): one read's plain sends scanned, routed, encoded into the CommitLog and
answered in a handful of calls, whatever their number. ``LaneCodec`` keeps the working arrays
between reads (the event loop's one thread uses it) and the rules it is given once: the header
names of each send code, the property marks that send a read to the Python path, the CLUSTER pair.
"""

from __future__ import annotations

from array import array

from rocketbox.cluster._native import _check, _readable, _writable, ffi, lib

ANSWER_BYTES_MAX = lib.RB_LANE_ANSWER_BYTES_MAX
_GROUP_COLUMNS = lib.RB_LANE_GROUP_COLUMNS


def _names(names):
    """NUL-terminated names back to back, as the C reads them (kept exported for the codec's life)."""
    return _held(b"".join(name.encode() + b"\x00" for name in names))


def _held(data: bytes):
    return ffi.from_buffer("uint8_t[]", data)


class LaneCodec:
    """``scan`` a read, then (when it took every frame) ``topic``/``route``/``encoder``/``answers``
    for that read; the next ``scan`` starts another."""

    def __init__(self, v2_keys, v1_keys, marks, cluster_mark: str, size_max: int, header_max: int,
                 sys_flag_allowed: int, language: str, language_ordinal: int, version: int):
        self._v2_keys = _names(v2_keys)
        self._v1_keys = _names(v1_keys)
        self._marks = _names(marks)
        self._cluster_mark = _held(cluster_mark.encode())
        self._size_max, self._header_max, self._sys_flag_allowed = size_max, header_max, sys_flag_allowed
        self._language, self._language_ordinal, self._version = _held(language.encode()), language_ordinal, version
        self._capacity = 0
        self._scratch_capacity = 0
        self._grow(64, 1 << 16)
        self._blob = b""
        self._counts = ffi.new("int64_t[3]")
        self.v2_sends = self.v1_sends = 0   # SEND_MESSAGE_V2 and SEND_MESSAGE sends of the read scanned last
        self.count = 0

    def _grow(self, count: int, scratch_bytes: int) -> None:
        if count > self._capacity:
            self._capacity = max(count, 2 * self._capacity)
            self.sends = ffi.new("struct rb_lane_send[]", self._capacity)
            self._topic_firsts = ffi.new("int64_t[]", self._capacity)
            self._groups = ffi.new("int64_t[]", self._capacity * _GROUP_COLUMNS)
            self._answers = bytearray(self._capacity * ANSWER_BYTES_MAX)
        if scratch_bytes > self._scratch_capacity:
            self._scratch_capacity = max(scratch_bytes, 2 * self._scratch_capacity)
            self._scratch = ffi.new("uint8_t[]", self._scratch_capacity)

    def scan(self, blob: bytes, ends: array, record_crc: bool) -> int | None:
        """The frames ``blob[ends[i-1]:ends[i]]`` (payloads without their length words): the number
        of distinct topics when every frame is a plain send the lane takes, else None."""
        count = len(ends)
        self._grow(count, len(blob) + count * (1 + len(self._cluster_mark)))
        counts = self._counts
        with ffi.from_buffer("int64_t[]", ends) as c_ends, _readable(blob) as c_blob:
            taken = _check(lib.rb_lane_scan(
                c_blob, len(blob), c_ends, count, self._v2_keys, len(self._v2_keys), self._v1_keys, len(self._v1_keys),
                self._marks, len(self._marks), self._cluster_mark, len(self._cluster_mark), self._size_max,
                self._header_max, self._sys_flag_allowed, record_crc, self._scratch, self._scratch_capacity,
                self.sends, self._topic_firsts, counts), "lane_scan")
        if taken < count:
            return None
        self._blob, self.count = blob, count
        self.v2_sends, self.v1_sends = counts[1], counts[2]
        return counts[0]

    def topic(self, slot: int) -> bytes:
        """The UTF-8 name of the read's distinct topic ``slot``."""
        send = self.sends[self._topic_firsts[slot]]
        return ffi.buffer(self._scratch + send.topic_pos, send.topic_len)[:]

    def route(self, queue_counts: array, round_robin_next: int) -> tuple[int, list[tuple[int, int, int, int]]] | None:
        """(queues picked, the groups: (topic slot, queue id, sends, record bytes) in order of first
        arrival), or None when a send names a queue its topic lacks."""
        group_count = ffi.new("int64_t *")
        with ffi.from_buffer("int64_t[]", queue_counts) as counts:
            picked = lib.rb_lane_route(self.sends, self.count, counts, round_robin_next, self._groups, group_count)
        if picked == lib.RB_E_LANE_DECLINED:
            return None
        _check(picked, "lane_route")
        groups = self._groups
        return picked, [tuple(groups[g * _GROUP_COLUMNS:(g + 1) * _GROUP_COLUMNS]) for g in range(group_count[0])]

    def encoder(self, group: int, born_host: bytes, record_crc: bool):
        """What ``Store.put_encoded`` calls to write ``group``'s records."""
        def encode(buf, pos: int, phys: int, queue_offset: int, _topic: bytes, store_ts: int, store_host: bytes):
            with _writable(buf) as out, _readable(self._blob) as blob, _readable(born_host) as born, \
                    _readable(store_host) as store:
                _check(lib.rb_lane_encode(out, len(out), pos, phys, blob, len(blob), self._scratch,
                                          self._scratch_capacity, self.sends, self.count, group, queue_offset,
                                          born, store, store_ts, record_crc), "lane_encode")
        return encode

    def answers(self, store_host: bytes) -> bytes:
        """Every send's SEND_OK frame, in arrival order, once each was stored."""
        out = self._answers
        with _writable(out) as buf, _readable(store_host) as host:
            size = _check(lib.rb_lane_answers(buf, len(out), self.sends, self.count, host, self._language,
                                              len(self._language), self._language_ordinal, self._version),
                          "lane_answers")
        return bytes(out[:size])

    def places(self) -> list[tuple[int, int, int]]:
        """(queue id, phys offset, queue offset) of each send: for tests and refusals."""
        sends = self.sends
        return [(sends[i].queue_id, sends[i].phys_offset, sends[i].queue_offset) for i in range(self.count)]

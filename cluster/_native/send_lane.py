"""The C side of the remoting door's send lane (``send_lane.c``; the broker's side is
``broker/send_lane.py``): one read's plain sends scanned, routed, encoded into the CommitLog and
answered in a handful of calls, whatever their number. ``LaneCodec`` keeps the working arrays
between reads (the event loop's one thread uses it) and the rules it is given once: the header
names of each send code, the property marks that send a read to the Python path, the CLUSTER pair.
"""

from __future__ import annotations

from rocketbox.cluster._native import _check, _writable, ffi, lib

ANSWER_BYTES_MAX = lib.RB_LANE_ANSWER_BYTES_MAX
_GROUP_COLUMNS = lib.RB_LANE_GROUP_COLUMNS


def _names(names):
    """NUL-terminated names back to back, as the C reads them (kept exported for the codec's life)."""
    return _held(b"".join(name.encode() + b"\x00" for name in names))


def _held(data: bytes):
    return ffi.from_buffer("uint8_t[]", data)


class LaneCodec:
    """``scan`` a read, then (when it took every frame) ``topic``/``route``/``groups``/``place``/``answers``
    for that read; the next ``scan`` starts another. The working arrays are kept between reads and
    bytes go to the C as they are (``const char *``): a read costs few Python steps whatever it holds."""

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
        self._group_count = ffi.new("int64_t *")
        self.v2_sends = self.v1_sends = 0   # SEND_MESSAGE_V2 and SEND_MESSAGE sends of the read scanned last
        self.count = 0

    def _grow(self, count: int, scratch_bytes: int) -> None:
        if count > self._capacity:
            self._capacity = max(count, 2 * self._capacity)
            self.sends = ffi.new("struct rb_lane_send[]", self._capacity)
            self._ends = ffi.new("int64_t[]", self._capacity)
            self._topic_firsts = ffi.new("int64_t[]", self._capacity)
            # Filled by the caller before ``route``: each topic slot's write queues.
            self.queue_counts = ffi.new("int64_t[]", self._capacity)
            self._queue_offsets = ffi.new("int64_t[]", self._capacity)
            self._groups = ffi.new("int64_t[]", self._capacity * _GROUP_COLUMNS)
            self._answers_size = self._capacity * ANSWER_BYTES_MAX
            self._answers = ffi.new("uint8_t[]", self._answers_size)
        if scratch_bytes > self._scratch_capacity:
            self._scratch_capacity = max(scratch_bytes, 2 * self._scratch_capacity)
            self._scratch = ffi.new("uint8_t[]", self._scratch_capacity)

    def scan(self, payloads: list, record_crc: bool) -> int | None:
        """The frames ``payloads`` (bytes, without their length words) of one read: the number of
        distinct topics when every frame is a plain send the lane takes, else None."""
        count = len(payloads)
        if count == 1:
            blob = payloads[0]
            self._grow(1, len(blob) + 1 + len(self._cluster_mark))
            self._ends[0] = len(blob)
        else:
            blob = b"".join(payloads)
            self._grow(count, len(blob) + count * (1 + len(self._cluster_mark)))
            ends, at = self._ends, 0
            for i, payload in enumerate(payloads):
                at += len(payload)
                ends[i] = at
        counts = self._counts
        taken = lib.rb_lane_scan(
            blob, len(blob), self._ends, count, self._v2_keys, len(self._v2_keys), self._v1_keys, len(self._v1_keys),
            self._marks, len(self._marks), self._cluster_mark, len(self._cluster_mark), self._size_max,
            self._header_max, self._sys_flag_allowed, record_crc, self._scratch, self._scratch_capacity,
            self.sends, self._topic_firsts, counts)
        if taken < count:
            _check(taken, "lane_scan")
            return None
        self._blob, self.count = blob, count
        self.v2_sends, self.v1_sends = counts[1], counts[2]
        return counts[0]

    def topic(self, slot: int) -> bytes:
        """The UTF-8 name of the read's distinct topic ``slot``."""
        send = self.sends[self._topic_firsts[slot]]
        return ffi.buffer(self._scratch + send.topic_pos, send.topic_len)[:]

    def route(self, round_robin_next: int) -> int | None:
        """Each send's queue and group (``queue_counts`` filled for every topic slot): the queues
        picked, or None when a send names a queue its topic lacks."""
        picked = lib.rb_lane_route(self.sends, self.count, self.queue_counts, round_robin_next, self._groups,
                                   self._group_count)
        if picked == lib.RB_E_LANE_DECLINED:
            return None
        return _check(picked, "lane_route")

    def groups(self) -> list[tuple[int, int, int, int]]:
        """The routed read's groups: (topic slot, queue id, sends, record bytes) in order of first arrival."""
        groups = self._groups
        return [tuple(groups[g * _GROUP_COLUMNS:(g + 1) * _GROUP_COLUMNS]) for g in range(self._group_count[0])]

    def placer(self, group_first: int, born_host: bytes, record_crc: bool):
        """What ``Store.put_encoded`` calls to write the records of the groups from ``group_first`` on
        (as many as it is given queue offsets for), back to back."""
        def place(buf, pos: int, phys: int, queue_offsets: list, store_ts: int, store_host: bytes):
            offsets = self._queue_offsets
            for i, offset in enumerate(queue_offsets):
                offsets[i] = offset
            with _writable(buf) as out:
                _check(lib.rb_lane_place(out, len(out), pos, phys, self._blob, len(self._blob), self._scratch,
                                         self._scratch_capacity, self.sends, self.count, group_first,
                                         group_first + len(queue_offsets), offsets, born_host, store_host,
                                         store_ts, record_crc), "lane_place")
        return place

    def answers(self, store_host: bytes) -> bytes:
        """Every send's SEND_OK frame, in arrival order, once each was stored."""
        size = _check(lib.rb_lane_answers(self._answers, self._answers_size, self.sends, self.count, store_host,
                                          self._language, len(self._language), self._language_ordinal,
                                          self._version), "lane_answers")
        return ffi.buffer(self._answers, size)[:]

    def places(self) -> list[tuple[int, int, int]]:
        """(queue id, phys offset, queue offset) of each send: for tests and refusals."""
        sends = self.sends
        return [(sends[i].queue_id, sends[i].phys_offset, sends[i].queue_offset) for i in range(self.count)]

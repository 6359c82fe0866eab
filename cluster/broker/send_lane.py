"""The send handler's fast path for a read of plain sends (issue 33 item 1): the remoting door hands
``serve_read`` the frames of one read; when every one is a plain single send (``send._parse_plain``'s,
its header as RocketMQ's clients write one) to a topic this broker takes writes for, they are read,
stored (one append a queue, as ``SendProcessor._store_deferred`` stores a read's sends) and answered
in a few native calls (``_native/send_lane.py``) and a few Python steps per topic and per queue, not
per send. Either header serialization (JSON, ROCKETMQ's binary); the answers in the request's.
Anything else, a refusal of any kind included, leaves the whole read to the Python path
(``None``, nothing done), which answers each request as before.

Taken only where the Python path would do exactly this: no access control (the door is given the
lane only then), no durability wait (async flush, no sync replication), no send waiting for the
flush, a writable master. The broker's send counters (``messages_stored``, ``traffic_in``), the
request timing (``rocketmq_rpc_latency``: each send from the read's start to its answer) and
``on_written`` are kept as the Python path keeps them. ``tests/unit/test_send_lane.py`` holds it to
the Python path byte for byte.
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster._native.send_lane import LaneCodec
from rocketbox.cluster.config import NAME_LENGTH_MAX
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import PERM_WRITE, RETRY_TOPIC_PREFIX, SEND_V2_LONG_NAMES, RequestCode, ResponseCode
from rocketbox.cluster.broker import send
from rocketbox.cluster.remoting_format import LANGUAGES, encode_frame
from rocketbox.cluster.shm.commitlog_format import BLANK_SIZE_MIN
from rocketbox.cluster.shm.store import PutMessageStatus as PutStatus
from rocketbox.cluster.wire_format import DOOR_REMOTING, HEADER_BYTES_MAX, Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# The header fields the lane reads, in send_lane.c's order.
_LANE_FIELDS = ("topic", "queueId", "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "batch",
                "maxReconsumeTimes")
# What sends a read to the Python path when a send's properties hold it: a half, delayed, timed, priority
# or FIFO (sharding key: counted as "fifo") message.
_LANE_MARKS = (send._HALF_MARK, send._DELAY_MARK, send._TIMER_MARKS_PREFIX, send._PRIORITY_MARK,
               send._SHARDING_KEY_MARK)
_ANSWER = Command(0, {}, b"").response(ResponseCode.SUCCESS)   # the language and version every SEND_OK carries
_UNKNOWN = object()
_TOPIC_NAMES_MAX = 4096   # remembered topic names (a client naming ever new topics only empties it now and then)


class SendLane:
    def __init__(self, sender: send.SendProcessor, rpc_latency=None):
        self.sender = sender
        self.store = sender.store
        self.rpc_latency = rpc_latency
        self.codec = LaneCodec(
            (SEND_V2_LONG_NAMES[name] for name in _LANE_FIELDS), _LANE_FIELDS, _LANE_MARKS,
            sender.cluster_mark, sender.cfg.store.message_size_bytes_max, HEADER_BYTES_MAX,
            send.SEND_SYSFLAG_ALLOWED, LANGUAGES[_ANSWER.language], _ANSWER.language, _ANSWER.version)
        self.reads_taken = 0
        self._topic_names: dict[bytes, str | None] = {}
        # The largest append a segment takes (commitlog.append refuses more, whatever the disk).
        self._group_bytes_max = self.store.commitlog.file_size_bytes - BLANK_SIZE_MIN

    def serve_read(self, payloads: list, peer_address: str, peer_port: int) -> bytes | None:
        """The answers (frames back to back) to the read ``payloads`` (frames without their length
        words), every send stored; None when the lane does not take the read (nothing was done)."""
        sender = self.sender
        if sender.durability.waits or len(sender.flush_waiters) or sender.cfg.is_slave or not sender.may_write():
            return None
        started = time.perf_counter()
        codec = self.codec
        record_crc = self.store.writer.record_crc
        topic_count = codec.scan(payloads, record_crc)
        if topic_count is None:
            return None
        topics, topic_configs, queue_counts = [], sender.topics, codec.queue_counts
        for slot in range(topic_count):
            topic = self._lane_topic(codec.topic(slot))
            config = topic_configs.get(topic) if topic is not None else None
            if config is None or not config.perm & PERM_WRITE:
                return None
            topics.append(topic)
            queue_counts[slot] = config.writeQueueNums
        picked = codec.route(sender.round_robin_next)
        if picked is None:
            return None
        groups = codec.groups()
        if max(group[3] for group in groups) > self._group_bytes_max:
            return None   # the Python path stores such a queue's sends one by one (its put is refused whole)
        sender.round_robin_next += picked
        self.reads_taken += 1
        try:
            answers = self._store_and_answer(topics, groups, send._born_host(peer_address, peer_port), record_crc)
        except Exception as exc:   # some may be stored: every send gets an answer, as _store_deferred gives one
            _limited.error("send-lane", "storing the sends of a read failed", exc_info=True)
            sends = self.codec.sends
            return b"".join(encode_frame(Command(0, {}, b"", opaque=sends[i].opaque).response(
                ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}"), sends[i].serialize_type)
                for i in range(self.codec.count))
        if self.rpc_latency is not None:   # each send timed as the handler table times it, to its answer
            elapsed_s = time.perf_counter() - started
            for code, count in ((RequestCode.SEND_MESSAGE_V2, codec.v2_sends),
                                (RequestCode.SEND_MESSAGE, codec.v1_sends)):
                if count:
                    self.rpc_latency.record(DOOR_REMOTING, code, ResponseCode.SUCCESS, False, elapsed_s, count)
        return answers

    def _lane_topic(self, name: bytes) -> str | None:
        """The topic ``name`` names when the lane may take its sends by name (a plain, non-retry topic
        name of at most NAME_LENGTH_MAX characters), else None; remembered, names being few."""
        known = self._topic_names.get(name, _UNKNOWN)
        if known is not _UNKNOWN:
            return known
        topic = name.decode()
        if len(topic) > NAME_LENGTH_MAX or not send._plain_topic(topic) or topic.startswith(RETRY_TOPIC_PREFIX):
            topic = None
        if len(self._topic_names) >= _TOPIC_NAMES_MAX:
            self._topic_names.clear()
        self._topic_names[name] = topic
        return topic

    def _store_and_answer(self, topics: list, groups: list, born_host: bytes, record_crc: bool) -> bytes:
        """One append for the read (a run of queues per append: one a queue when they would not fit
        in the segment together, as the Python path's one put a queue rolls), then every send's answer."""
        codec, store, sender = self.codec, self.store, self.sender
        if sum(group[3] for group in groups) <= store.commitlog.room_in_segment():
            runs = [(0, groups)]
        else:
            runs = [(index, [group]) for index, group in enumerate(groups)]
        refused = None
        for first, run in runs:
            result = store.put_encoded([(topics[slot], queue_id, count) for slot, queue_id, count, _size in run],
                                       sum(group[3] for group in run), codec.placer(first, born_host, record_crc))
            if result.status != PutStatus.PUT_OK:
                refused = refused or {}
                for group in range(first, first + len(run)):
                    refused[group] = result.status
                continue
            sender.messages_stored += result.count
            for slot, _queue_id, count, size in run:
                sender.traffic_in.add(topics[slot], "normal", count, size)
        if refused is None or len(refused) < len(groups):
            sender.on_written()
        answers = codec.answers(store.store_host)
        return answers if refused is None else self._with_refusals(answers, topics, groups, refused)

    def _with_refusals(self, answers: bytes, topics: list, groups: list, refused: dict) -> bytes:
        """The read's answers with each send of a group the store refused answered as the Python path
        answers it (``SendProcessor._refused``). Rare (a full disk): per send here."""
        frames, at = [], 0
        sends = self.codec.sends
        for i in range(self.codec.count):
            end = at + 4 + int.from_bytes(answers[at:at + 4], "big")
            status = refused.get(sends[i].group)
            if status is None:
                frames.append(answers[at:end])
            else:
                request = Command(RequestCode.SEND_MESSAGE_V2, {}, b"", opaque=sends[i].opaque)
                topic = topics[groups[sends[i].group][0]]
                frames.append(encode_frame(self.sender._refused(request, topic, status), sends[i].serialize_type))
            at = end
        return b"".join(frames)


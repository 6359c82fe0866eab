"""The send lane (broker/send_lane.py, _native/send_lane.c) against the Python path it stands in for:
two brokers in process, each its own handler table and store behind a real remoting door, one with
the lane and one without, are sent the same reads over real sockets from the same client port (a
record stores its sender's port). Reads mix plain sends (SEND_MESSAGE_V2 and SEND_MESSAGE, JSON
headers as the Java client and orjson write them, with spaces, escapes and keys reordered, and
binary (ROCKETMQ) headers; properties with WAIT first, in the middle, last or absent, unicode, empty values, odd
texts) with what the lane must leave to the Python path (batches, half, delayed, timed, priority and
FIFO messages, retry and unknown topics, bad names and fields, oversized bodies, queues a topic
lacks, other request codes, a broken header). Every answer frame and every CommitLog byte must be
the same; the counters too. The store's clock is held still so that both stores stamp the same."""

from __future__ import annotations

import json
import random
import socket
import struct

import orjson
import pytest

from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.clock import Clock
from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH, BrokerConfig
from rocketbox.cluster.message.batch_format import encode_items
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.protocol import SEND_V2_LONG_NAMES, RequestCode
from rocketbox.cluster.remoting_format import SERIALIZE_ROCKETMQ, FrameDecoder, encode_frame
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.shm import record_writer
from rocketbox.cluster.wire_format import Command
from tests.store_harness import tiny_config
from tests.unit.test_remoting_arrival_stamps import DEADLINE_S, _serve_until

TOPICS = {"LaneA": 4, "LaneB": 2, "Lane_C-3": 1}
READS = 160


def _props(rng: random.Random, uniq: str, odd_texts: bool) -> str:
    pairs = [("UNIQ_KEY", uniq)]
    if rng.random() < 0.5:
        pairs.append(("TAGS", rng.choice(["t", "tag-ü", "漢字", ""])))
    if rng.random() < 0.3:
        pairs.append(("KEYS", "k1 k2"))
    if rng.random() < 0.3:
        pairs.append(("EMPTY", ""))
    if rng.random() < 0.3:
        pairs.append(("uni", "é漢🙂\u2028\"\\/\t\n\r\b\f"))
    wait = rng.random()
    if wait < 0.75:   # the Java client's WAIT=true, anywhere; sometimes false
        pairs.insert(rng.randrange(len(pairs) + 1), ("WAIT", "false" if wait < 0.1 else "true"))
    text = properties_text(pairs)
    odd = rng.random() if odd_texts else 1
    if odd < 0.1:
        text = text[:-1]                       # no closing \x02
    elif odd < 0.14:
        text += "TAGS\x01again\x02"            # a name twice
    elif odd < 0.17:
        text += "XWAIT\x01v\x02"               # WAIT inside another name
    elif odd < 0.19:
        text += "\x02"                         # an empty pair
    elif odd < 0.21:
        text += "nameless\x02"                 # a pair without \x01
    elif odd < 0.23:
        text = ""
    return text


def _plain_fields(rng: random.Random, opaque: int, topic: str, queues: int, odd_texts: bool = True) -> dict:
    return {"topic": topic, "queueId": str(rng.choice([-1, -1, *range(queues)])), "sysFlag": rng.choice(["0", "2"]),
            "bornTimestamp": str(1_700_000_000_000 + opaque), "flag": rng.choice(["0", "7", "-3"]),
            "properties": _props(rng, f"U{opaque:08X}", odd_texts), "reconsumeTimes": "0", "producerGroup": "PG",
            "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "unitMode": "false", "batch": "false",
            "maxReconsumeTimes": rng.choice(["16", ""])}


def _header(code: int, fields: dict, opaque: int, style: str) -> bytes:
    header = {"code": code, "extFields": fields, "flag": 0, "language": "JAVA", "opaque": opaque,
              "serializeTypeCurrentRPC": "JSON", "version": 395}
    if style == "remark":
        header["remark"] = None
    elif style == "reordered":
        header = {"language": "CPP", "version": 1, "opaque": opaque, "flag": 0, "extFields": fields, "code": code}
    elif style == "spaces":
        return json.dumps(header, ensure_ascii=False, indent=1).encode()
    elif style == "ascii":
        return json.dumps(header).encode()   # every character past ASCII as \\uXXXX
    elif style == "cpp":   # as the C++ client (PyPI rocketmq 0.4.4) writes one: numbers, ACL fields, remark ""
        numbers = {name: int(fields[name]) for name in ("queueId", "sysFlag", "flag", "defaultTopicQueueNums",
                                                         "e", "f", "h", "d") if fields.get(name, "").lstrip("-").isdigit()}
        header = {"code": code, "extFields": {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "c2ln",
                                              **fields, **numbers, "unitMode": False},
                  "flag": 0, "language": "CPP", "opaque": opaque, "remark": "", "version": 63}
        return orjson.dumps(header) + b"\n"
    elif style == "escapes":
        return orjson.dumps(header).replace(b"LaneA", b"L\\u0061neA").replace(b"UNIQ", b"\\u0055NIQ").replace(
            b"/", b"\\/")
    return orjson.dumps(header)


def _frame(header: bytes, body: bytes, serialize_type: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), serialize_type << 24 | len(header)) + header + body


def _plain(rng: random.Random, opaque: int, clean: bool) -> bytes:
    """A plain send; ``clean``: one the lane takes (no odd properties text, no escape past ASCII)."""
    topic = rng.choice(list(TOPICS))
    fields = _plain_fields(rng, opaque, topic, TOPICS[topic], not clean)
    body = rng.randbytes(rng.choice([0, 1, 100, 100, 100, 700, 3000]))
    if rng.random() < 0.3:   # SEND_MESSAGE: the long names
        code = RequestCode.SEND_MESSAGE
    else:
        code = RequestCode.SEND_MESSAGE_V2
        fields = {SEND_V2_LONG_NAMES[name]: value for name, value in fields.items()}
    style = rng.choice(["java", "java", "java", "remark", "reordered", "spaces", "escapes", "binary", "cpp"]
                       + ([] if clean else ["ascii"]))
    if style == "binary":   # ROCKETMQ's binary header, a remark sometimes
        return encode_frame(Command(code, fields, body, opaque=opaque, remark=rng.choice(["", "r", "é"])),
                            SERIALIZE_ROCKETMQ)
    return _frame(_header(code, fields, opaque, style), body)


def _not_plain(rng: random.Random, opaque: int) -> bytes:
    """A request the lane must leave to the Python path (its whole read with it)."""
    fields = _plain_fields(rng, opaque, "LaneA", 4)
    kind = rng.randrange(17)
    body = b"x" * 100
    if kind == 0:
        body = encode_items([(0, b"item1", b"UNIQ_KEY\x01b1\x02"), (0, b"item2", b"")])
        fields["batch"] = "true"
    elif kind == 1:
        fields["properties"] += "DELAY\x012\x02"
    elif kind == 2:
        fields["properties"] = "TRAN_MSG\x01true\x02PGROUP\x01PG\x02"
        fields["sysFlag"] = "4"
    elif kind == 3:
        fields["properties"] += "TIMER_DELAY_SEC\x015\x02"
    elif kind == 4:
        fields["properties"] += "_SYS_MSG_PRIORITY_\x011\x02"
    elif kind == 5:
        fields["properties"] += "__SHARDINGKEY\x01s\x02"
    elif kind == 6:
        fields["topic"] = "%RETRY%G1"
    elif kind == 7:
        fields["topic"] = "NoSuchTopic"
    elif kind == 8:
        fields["topic"] = "bad topic!"
    elif kind == 9:
        fields["queueId"] = "9"
    elif kind == 10:
        fields["sysFlag"] = "16"
    elif kind == 11:
        body = b"y" * (40 * 1024)    # over the 32 KiB limit
    elif kind == 12:
        fields["flag"] = "1e3"
    elif kind == 13:   # a binary (ROCKETMQ) header whose topic is not UTF-8
        frame = encode_frame(Command(RequestCode.SEND_MESSAGE, fields, body, opaque=opaque), SERIALIZE_ROCKETMQ)
        return frame.replace(b"LaneA", b"Lane\xff")
    elif kind == 14:   # numbers the reader turns into texts other than their JSON's, a null, a remark not a text
        odd = rng.choice([{"queueId": 1.0}, {"flag": -0}, {"sysFlag": None}, {"unitMode": 1.5}, {"x": None},
                          {"x": [1]}, {"queueId": 1e0}])
        header = {"code": 10, "extFields": {**fields, **odd}, "flag": 0, "language": "CPP", "opaque": opaque,
                  "remark": rng.choice(["", None]), "version": 1}
        if rng.random() < 0.2:
            header["remark"] = 5
        text = orjson.dumps(header)
        if odd == {"flag": -0}:
            text = text.replace(b'"flag":0,"properties"', b'"flag":-0,"properties"')
        return _frame(text, body)
    elif kind == 15:
        return _frame(b'{"code":9999,"opaque":%d,"flag":0,"language":"JAVA","version":1,"extFields":{}}' % opaque, b"")
    else:
        return _frame(b'{"code":310,"opaque":%d,' % opaque, body)   # a broken header
    return _frame(_header(RequestCode.SEND_MESSAGE, fields, opaque, "java"), body)


def _reads(seed: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    reads, opaque = [], 0
    for _ in range(READS):
        frames = []
        kind = rng.random()   # a read of sends the lane takes, of any plain sends, or mixed with others
        for _ in range(rng.randrange(1, 18)):
            opaque += 1
            frames.append(_not_plain(rng, opaque) if kind < 0.3 and rng.random() < 0.3 else
                          _plain(rng, opaque, clean=kind > 0.6))
        reads.append(frames)
    return reads


class _Side:
    def __init__(self, tmp_path, name: str, lane: bool, client_port: int, **store):
        self.service = BrokerService(boot(BrokerConfig(store=tiny_config(tmp_path / name, **store))))
        for topic, queues in TOPICS.items():
            self.service.topics.create_on_send(topic, queues)
        self.lane = self.service.send_lane
        self.server = RemotingServer("127.0.0.1", 0, self.service.handlers, name="door",
                                     read_lane=self.lane.serve_read if lane else None)
        host, port = self.server.address.split(":")
        self.client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.client.bind(("127.0.0.1", client_port))
        self.client.settimeout(DEADLINE_S)
        self.client.connect((host, int(port)))
        _serve_until(self.server, lambda: self.server._connections)

    def serve(self, frames: list[bytes]) -> bytes:
        """The answers to ``frames`` sent in one write, as the bytes that came back."""
        self.client.sendall(b"".join(frames))
        decoder, got, answers = FrameDecoder(1 << 24), [], bytearray()

        def answered():
            self.server.on_events()
            try:
                data = self.client.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False
            answers.extend(data)
            got.extend(decoder.feed(data))
            return len(got) >= len(frames)
        _serve_until(self.server, answered)
        return bytes(answers)

    def connection(self):
        return next(iter(self.server._connections.values()))

    def commitlog(self) -> bytes:
        store = self.service.store
        end, size = store.control.write_pos, store.commitlog.file_size_bytes
        return b"".join(bytes(store.commitlog.segment_for(start).mm[:min(size, end - start)])
                        for start in range(0, end, size))

    def close(self) -> None:
        self.client.close()
        self.server.close()
        self.service.shutdown()


@pytest.fixture
def sides(tmp_path, monkeypatch, request):
    # Both stores stamp every record with the same store time, and both brokers read the same wall
    # time (a timed message's recall handle names its due time: a second boundary between the two
    # sides' reads made them differ): the only fields the two could not share.
    monkeypatch.setattr(record_writer, "_now_ms", lambda: 1_760_000_000_000)
    monkeypatch.setattr(Clock, "now_ms", lambda _self: 1_760_000_000_000)
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    store = getattr(request, "param", {})
    made = [_Side(tmp_path, "python", False, port, **store), _Side(tmp_path, "lane", True, port, **store)]
    probe.close()
    yield made
    for side in made:
        side.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_lane_stores_and_answers_every_read_as_the_python_path(sides, seed):
    python, lane = sides
    for number, frames in enumerate(_reads(seed)):
        expected = python.serve(frames)
        got = lane.serve(frames)
        assert got == expected, f"read {number} answered differently"
        # What the broker's own requests to the client are written in: the last request's serialize type.
        assert lane.connection().serialize_type == python.connection().serialize_type
    assert lane.commitlog() == python.commitlog()
    assert lane.service.sender.messages_stored == python.service.sender.messages_stored
    assert lane.service.sender.traffic_in.snapshot() == python.service.sender.traffic_in.snapshot()
    assert lane.service.sender.round_robin_next == python.service.sender.round_robin_next
    counts = {(row["requestCode"], row["responseCode"]): row["count"]
              for row in python.service.metrics.rpc_latency.snapshot()}
    assert {(row["requestCode"], row["responseCode"]): row["count"]
            for row in lane.service.metrics.rpc_latency.snapshot()} == counts
    # Not by default: the lane took most reads, and left the rest.
    assert READS * 0.35 < lane.lane.reads_taken < READS * 0.9, lane.lane.reads_taken
    assert python.lane.reads_taken == 0


# A send as the C++ client (PyPI rocketmq 0.4.4) wrote it to a broker (captured): numbers where the
# Java client writes texts, its ACL fields empty, a remark "" and a newline after the JSON.
CPP_CLIENT_HEADER = (b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"Fb9DtHYz5FwgjXGF3rP7gNeamVI=",'
                     b'"batch":"0","bornTimestamp":"1795866227929","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
                     b'"flag":0,"producerGroup":"PID_BENCH_6078","properties":"UNIQ_KEY\\u00010100007F0000F15300005957'
                     b'ED920100\\u0002WAIT\\u0001true\\u0002","queueId":%d,"reconsumeTimes":"0","sysFlag":0,'
                     b'"topic":"LaneA","unitMode":"0"},"flag":0,"language":"CPP","opaque":%d,"remark":"","version":63}\n')


def test_the_cpp_client_s_sends_take_the_lane(sides):
    python, lane = sides
    for opaque in range(1, 5):
        frame = _frame(CPP_CLIENT_HEADER % (opaque % 4, opaque), b"x" * 100)
        assert lane.serve([frame]) == python.serve([frame])
    assert lane.lane.reads_taken == 4
    assert lane.commitlog() == python.commitlog()


def test_a_read_of_one_send_a_sync_sender_s_takes_the_lane(sides):
    python, lane = sides
    rng = random.Random(7)
    for opaque in range(1, 6):
        frame = _plain(rng, opaque, clean=True)
        assert lane.serve([frame]) == python.serve([frame])
    assert lane.lane.reads_taken == 5
    assert lane.commitlog() == python.commitlog()


@pytest.mark.parametrize("sides", [{"disk_free_bytes_min": 1 << 62}], indirect=True)
def test_a_full_disk_refuses_the_lane_s_sends_as_it_refuses_the_python_path_s(sides):
    """Every append refused (DISK_FULL): each send answered as ``SendProcessor._refused`` answers it."""
    python, lane = sides
    for frames in _reads(4)[:40]:
        assert lane.serve(frames) == python.serve(frames)
    assert lane.lane.reads_taken > 5
    assert lane.service.sender.messages_stored == python.service.sender.messages_stored == 0


def test_a_broker_that_waits_for_durability_leaves_every_read_to_the_python_path(tmp_path):
    """Under sync flush each send's answer waits for the flush (durability.py): the lane takes nothing;
    the same read to a broker under async flush, it takes."""
    rng = random.Random(3)
    frames = FrameDecoder(1 << 24).feed(b"".join(_plain(rng, opaque, clean=True) for opaque in range(8)))
    for flush_mode, taken in ((SYNC_FLUSH, False), (ASYNC_FLUSH, True)):
        service = BrokerService(boot(BrokerConfig(store=tiny_config(tmp_path / flush_mode, flush_mode=flush_mode))))
        try:
            for topic, queues in TOPICS.items():
                service.topics.create_on_send(topic, queues)
            assert (service.send_lane.serve_read(frames, "127.0.0.1", 4000) is not None) == taken
            assert service.sender.messages_stored == (8 if taken else 0)
        finally:
            service.shutdown()


def test_the_lane_s_answer_frames_are_remoting_format_s(tmp_path):
    """Golden: every SEND_OK the C writes equals ``encode_frame`` of the Python path's response, at
    the ends of each field's range."""
    service = BrokerService(boot(BrokerConfig(store=tiny_config(tmp_path / "golden"))))
    try:
        codec, store_host = service.send_lane.codec, service.store.store_host
        cases = [(opaque, queue_id, phys, offset) for opaque in (0, 1, -1, 2**31 - 1, -2**31)
                 for queue_id in (0, 7, 2**31 - 1) for phys in (0, 0x1F, 2**63 - 1) for offset in (0, 9, 2**62)]
        codec.count = len(cases)
        codec._grow(len(cases), 0)
        for send, (opaque, queue_id, phys, offset) in zip(codec.sends, cases):
            send.opaque, send.queue_id, send.phys_offset, send.queue_offset = opaque, queue_id, phys, offset
        expected = b"".join(encode_frame(Command(RequestCode.SEND_MESSAGE_V2, {}, b"", opaque=opaque).response(
            0, {"msgId": (store_host + phys.to_bytes(8, "big")).hex().upper(), "queueId": str(queue_id),
                "queueOffset": str(offset)})) for opaque, queue_id, phys, offset in cases)
        assert codec.answers(store_host) == expected
    finally:
        service.shutdown()

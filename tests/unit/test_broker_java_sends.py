"""What the broker stores for a send as Apache's Java client 4.9.8 makes it, byte for byte: a body the
client compressed (sysFlag 0x301: COMPRESSED and ZLIB in bits 8-10) kept with its flag, CLUSTER added,
WAIT left out, the born host with the sender's port, the whole-record CRC property at the end; and what a
pull delivers of it (the same record without that property). Driven in process through the handler table
(tests/unit/test_broker_service.py's way)."""

from __future__ import annotations

import zlib

from rocketbox.cluster.clock import ManualClock
from rocketbox.cluster.protocol import PULL_FLAG_SUBSCRIPTION, RequestCode, ResponseCode
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.wire_format import Command
from tests.in_process import InProcessBroker

NOW_MS = 1_700_000_000_000
# zlib.compress(b"golden body " * 20, 5): what the Java client would send for a longer body.
COMPRESSED_BODY = bytes.fromhex("785e4bcfcf4949cd5348ca4fa954481f016c00936b580d")


def test_a_compressed_java_send_is_stored_golden_and_delivered_without_the_crc_property(tmp_path):
    """The store's own fields (its clock's store time, its address) are read from it; the rest is golden."""
    broker = InProcessBroker(tmp_path / "store", clock=ManualClock(now_ms=NOW_MS))
    service = broker.service
    try:
        send = Command(RequestCode.SEND_MESSAGE_V2, {
            "a": "JavaPG", "b": "Golden", "c": "TBW102", "d": "4", "e": "0", "f": "769", "g": str(NOW_MS - 5),
            "h": "0", "i": "KEYS\x01k1\x02WAIT\x01true\x02UNIQ_KEY\x01U1\x02", "j": "0", "k": "false", "m": "false"},
            COMPRESSED_BODY, peer_address="127.0.0.1", peer_port=54321)
        answer = broker.call_command(send)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        _, _, phys = parse_offset_msg_id(answer.fields["msgId"])
        record = service.store.read_record(phys)
        stored = service.store.commitlog.read(phys, record.total_size)
        head = bytes.fromhex(
            "000000b7" "daa320a7" "09557db5" "00000000" "00000000" "0000000000000000" "0000000000000000"
            "00000301"                       # COMPRESSED | ZLIB << 8, as sent
            "0000018bcfe567fb" "7f0000010000d431"   # born: the send's timestamp, 127.0.0.1:54321
            ) + record.store_timestamp_ms.to_bytes(8, "big") + service.store.store_host + bytes.fromhex(
            "00000000" "0000000000000000" "00000017") + COMPRESSED_BODY + b"\x06Golden"
        properties = b"KEYS\x01k1\x02UNIQ_KEY\x01U1\x02CLUSTER\x01DefaultCluster\x02"
        crc = str(zlib.crc32(stored[:-fmt.RECORD_CRC_SIZE]) & 0x7FFFFFFF).zfill(10)[::-1].encode()
        assert stored == head + bytes.fromhex("003f") + properties + b"__CRC32#\x01" + crc + b"\x02"

        broker.dispatch()
        pull = broker.call(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "JavaCG", "topic": "Golden", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": str(PULL_FLAG_SUBSCRIPTION), "subscription": "*", "suspendTimeoutMillis": "0"})
        assert pull.code == ResponseCode.SUCCESS
        assert pull.body == bytes.fromhex("000000a3") + head[4:] + bytes.fromhex("002b") + properties
    finally:
        broker.close()

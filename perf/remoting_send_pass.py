"""The broker's CPU a send when many arrive in one read (issue 33 item 1): a ``BrokerService`` in
process (its own handler table, store and send handler) behind a ``RemotingServer``; a client socket
writes 64 SEND_MESSAGE_V2 frames of 100 B at a time, as the Java client's async sends with 64 in
flight, and reads their 64 answers. Counted: the process CPU of the door's passes (frame decode,
handler, store, answer encode and write), no workers and no client. One JSON line.

    python -m rocketbox.perf.remoting_send_pass [ROUNDS] [--no-lane]

Run it with another checkout's ``cluster/`` first on ``PYTHONPATH`` to compare two versions.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import tempfile
import time

from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.config import BrokerConfig, StoreConfig
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.remoting_format import FrameDecoder, encode_frame
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.wire_format import Command

IN_FLIGHT = 64
WAIT_S = 5.0


def _send_frame(opaque: int) -> bytes:
    """What the Java client 4.9.8 sends (its properties: UNIQ_KEY and WAIT=true; the broker picks no queue)."""
    return encode_frame(Command(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG", "b": "Bench", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": str(int(time.time() * 1000)),
        "h": "0", "i": properties_text([("UNIQ_KEY", "%032X" % opaque), ("WAIT", "true")]), "j": "0", "k": "false",
        "l": "0", "m": "false"}, b"x" * 100, opaque=opaque))


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--no-lane"]
    no_lane = "--no-lane" in sys.argv[1:]
    rounds = int(args[0]) if args else 300
    with tempfile.TemporaryDirectory(prefix="send-pass-") as tmp:
        store = StoreConfig(store_dir=f"{tmp}/store", commitlog_file_size_bytes=256 << 20, preheat_enabled=False,
                            disk_free_bytes_min=0)
        service = BrokerService(boot(BrokerConfig(store=store)))
        service.topics.create_on_send("Bench", 4)
        # The send lane as the broker's door gets it (issue 33 item 1); a checkout without it, or
        # ``--no-lane``, serves every send through the handler table.
        lane = getattr(service, "send_lane", None)
        server = RemotingServer("127.0.0.1", 0, service.handlers, name="send-pass",
                                **({"read_lane": lane.serve_read} if lane is not None and not no_lane else {}))
        host, port = server.address.split(":")
        client = socket.create_connection((host, int(port)))
        client.setblocking(False)
        try:
            cpu_s, sent = _run(server, client, rounds)
            print(json.dumps({"sends": sent, "stored": service.sender.messages_stored,
                              "lane_reads": lane.reads_taken if lane is not None else None,
                              "server_cpu_us_a_send": round(cpu_s / sent * 1e6, 1)}))
        finally:
            client.close()
            server.close()
            service.shutdown()


def _run(server: RemotingServer, client: socket.socket, rounds: int) -> tuple[float, int]:
    deadline = time.monotonic() + WAIT_S
    while not server._connections:
        assert time.monotonic() < deadline, "the door did not accept"
        server.on_events()
    cpu_s, sent = 0.0, 0
    for _ in range(rounds):
        data = memoryview(b"".join(_send_frame(sent + i) for i in range(IN_FLIGHT)))
        sent += IN_FLIGHT
        deadline = time.monotonic() + WAIT_S
        while data:
            select.select([], [client], [], WAIT_S)
            data = data[client.send(data):]
        decoder, answered = FrameDecoder(1 << 24), 0
        while answered < IN_FLIGHT:
            assert time.monotonic() < deadline, f"{IN_FLIGHT - answered} sends unanswered"
            select.select([client, server._epoll.fileno()], [], [], WAIT_S)
            started = time.process_time()
            server.on_events()
            cpu_s += time.process_time() - started
            try:
                answered += len(decoder.feed(client.recv(1 << 20)))
            except BlockingIOError:
                pass
    return cpu_s, sent


if __name__ == "__main__":
    main()

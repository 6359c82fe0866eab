"""One Producer shared by threads, and used again in a forked child: every message arrives once."""

from __future__ import annotations

import os
import threading

from rocketbox.cluster import Admin, Message, Producer, PullConsumer, SendStatus
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config


def test_a_producer_survives_fork_and_serves_many_threads(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Shared", 4)
    producer = Producer("PG", config=cfg)
    ids = set()
    lock = threading.Lock()
    assert producer.send(Message("Shared", b"parent-before-fork")).status == SendStatus.SEND_OK

    def sender(n):
        for i in range(100):
            result = producer.send(Message("Shared", f"thread-{n}-{i}".encode()))
            with lock:
                ids.add(result.msg_id)
    threads = [threading.Thread(target=sender, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(ids) == 400

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the inherited producer must build its own sockets and ids
        try:
            result = producer.send(Message("Shared", b"from-the-child"), timeout_ms=5000)
            os.write(write_end, result.msg_id.encode())
            os._exit(0 if result.status == SendStatus.SEND_OK else 1)
        except BaseException:
            os._exit(2)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    child_id = os.read(read_end, 64).decode()
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    after = producer.send(Message("Shared", b"parent-after-fork"))
    producer.shutdown()
    assert child_id and child_id not in ids and child_id != after.msg_id
    with PullConsumer("CG", config=cfg) as consumer:
        wanted = ids | {child_id, after.msg_id}
        got = wait_until(lambda: (lambda ms: ms if wanted <= {m.msg_id for m in ms} else None)(
            read_topic(consumer, "Shared")), 20, what="every message readable")
    bodies = [m.body for m in got]
    assert len(bodies) == len(set(bodies)) == 403
    assert b"from-the-child" in bodies

"""A real client's sends to a broker that is refusing them: the overload tests' common run.

The broker is overloaded honestly: sync flush on a disk throttled to 1 MB/s (a blkio cgroup on its
flush worker, ``perf/disk_throttle.py``) while a raw sender that never holds back offers ten
times what that disk takes. The client is started first and waits at its gate; it is let go only
once the broker refuses a probe send, and the load runs until the client is done: on a loaded
machine a client started after a load of fixed length once finished its sends before the load
began, and one sending from the load's start once finished them before the backlog built up."""

from __future__ import annotations

from rocketbox.perf import disk_throttle, raw_sender

# The busy gate under test is osPageCacheBusyTimeOutMills: sends refused once the flush is this far
# behind. At the default 1,000 ms a fresh-clone run never tripped it: the throttled flush stayed
# ~1.1 s behind for 60 s (52 probes answered SEND_OK after ~1.15 s each), as the kernel's own
# writeback, which the flush worker's blkio limit does not hold, kept pace on a busy machine.
# 200 ms is far below any lag a 1 MB/s disk under a 10x load leaves, and the same code path.
BROKER_OVERRIDES = {"os_page_cache_busy_timeout_ms": 200}
LOAD_S_MAX = 150   # the load is stopped once the client is done
START_S = 60
FINISH_S = 120


def sends_under_overload(cluster, topic: str, client) -> list:
    """The lines of ``client`` (a DriverProcess with a gate step), let go once broker-a refuses."""
    broker = cluster.topology.brokers[0]
    try:
        client.wait_for(lambda lines: any("gate" in line for line in lines), START_S, "start")
        with disk_throttle.throttled(cluster.pid("broker-a-flush"), broker.store.store_dir, 1 << 20):
            load = raw_sender.senders(broker.endpoint, topic, 1, rate=2500, duration_s=LOAD_S_MAX,
                                      body_bytes=4096, keep_keys=False, flow_control=False)[0]
            load.start()
            try:
                load.go()
                raw_sender.await_refusal(broker.endpoint, topic)
                client.say("go")
                client.close_stdin()
                return client.finish(FINISH_S)
            finally:
                load.stop()
    finally:
        client.kill()

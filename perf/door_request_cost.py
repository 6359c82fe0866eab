"""``python -m rocketbox.perf.door_request_cost``: what one sync request costs the broker behind its
native door, in measures a loaded machine disturbs little, beside the client's round trip.

A ``LocalCluster`` with its defaults (no metrics), a topic of one queue; from this process, ``--count``
sync requests of each kind, after 100 untimed: an unsupported request code (the door and dispatch
only), a SEND_MESSAGE_V2 through the bare ``RpcClient`` (direct ZMTP), and a default ``Producer.send``.
For each: the round trip's p50/p99, and over the timed requests the broker process's CPU (schedstat,
every thread; it includes the loop's busy poll after each request, ``busy_poll_us``) and its context
switches (voluntary and not, every thread) a request: a thread wake-up costs a switch each, which is
what serving the door from the loop removes (perf/RESULTS.md, "The native door served by the
broker's loop"). Run it with another checkout first on ``PYTHONPATH`` to compare two versions.

    python -m rocketbox.perf.door_request_cost --count 2000
"""

from __future__ import annotations

import argparse
import glob
import tempfile
import time

from rocketbox.cluster import ClientConfig, Message, Producer
from rocketbox.cluster.config import namesrv_endpoints
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
from rocketbox.perf.harness import create_topic
from rocketbox.perf.report import percentile

UNSUPPORTED_CODE = 99_999
WARM_UP = 100


def process_cpu_ns_and_switches(pid: int) -> tuple[int, int]:
    """CPU time (ns) and context switches of every live thread of ``pid``."""
    cpu = switches = 0
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(f"{task}/schedstat") as schedstat:
                cpu += int(schedstat.read().split()[0])
            with open(f"{task}/status") as status:
                switches += sum(int(line.split()[1]) for line in status if "ctxt_switches:" in line)
        except OSError:
            pass   # the thread ended meanwhile
    return cpu, switches


def measure(count: int, spin_us: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as data_dir, LocalCluster(data_dir, metrics=False) as cluster:
        cfg = ClientConfig(namesrv_endpoints=namesrv_endpoints(cluster.namesrv))
        create_topic(cfg, "DoorCost", 1)
        pid, broker = cluster.pid("broker-a"), "tcp://" + cluster.topology.brokers[0].address
        producer = Producer("DoorCostPG", config=cfg)
        rpc = RpcClient(direct_sync=True, spin_max_s=spin_us / 1e6)
        body = b"x" * 100
        fields = {"a": "DoorCostPG", "b": "DoorCost", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                  "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}
        kinds = (("unsupported code", lambda: rpc.call(broker, Command(UNSUPPORTED_CODE, {}, b""), 3000)),
                 ("rpc send", lambda: rpc.call(broker, Command(RequestCode.SEND_MESSAGE_V2, dict(fields), body), 3000)),
                 ("producer.send", lambda: producer.send(Message("DoorCost", body))))
        rows = []
        try:
            for name, request in kinds:
                for _ in range(WARM_UP):
                    request()
                took = []
                cpu0, switches0 = process_cpu_ns_and_switches(pid)
                for _ in range(count):
                    started = time.perf_counter()
                    request()
                    took.append((time.perf_counter() - started) * 1e6)
                cpu1, switches1 = process_cpu_ns_and_switches(pid)
                rows.append({"kind": name, "p50_us": percentile(took, 0.5), "p99_us": percentile(took, 0.99),
                             "broker_cpu_us": (cpu1 - cpu0) / count / 1000,
                             "broker_switches": (switches1 - switches0) / count})
        finally:
            producer.shutdown()
            rpc.close()
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--spin-us", type=int, default=1000, help="the client's sync_call_spin_us")
    args = parser.parse_args()
    for row in measure(args.count, args.spin_us):
        print(f"{row['kind']:17s} p50 {row['p50_us']:6.0f} us  p99 {row['p99_us']:6.0f} us  broker CPU "
              f"{row['broker_cpu_us']:6.1f} us/req  broker switches {row['broker_switches']:5.2f}/req")


if __name__ == "__main__":
    main()

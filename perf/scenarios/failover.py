"""``python -m rocketbox.perf --only failover``: how long a broker group takes to write again after its master fails
(the target: median under 10 s, never over 30 s), and what the controller mode costs.

One group, master + 1 slave, ``LocalCluster(failover=True)`` (NameServers run the Raft controller,
cluster/controller/; it declares a master dead after ``broker_heartbeat_timeout_ms``, 3 s),
SYNC_MASTER and SYNC_FLUSH. One producer thread sends single messages continuously (a 2 ms pause
after each answer; request time-out 500 ms, no client retries; a failed send is sent again after
10 ms). Before each fault the group is healthy (sync set of 2, every child running, master writable
and in sync, 20 SEND_OK since) and, unless ``--back-to-back``, both replicas' broker mains have run
for the supervisor's back-off reset time (``backoff_reset_after_s``, 10 s), so the fault is an
isolated one: faults closer together meet the supervisor's exponential restart back-off (up to 5 s),
which is longer than the controller's time-out and makes a new master that restarts into its role look
dead too (two elections a fault; see perf/RESULTS.md). Faults alternate:

- ``SIGSTOP``: the master is stopped until the controller shows a new epoch, then resumed (SIGCONT);
  a real failover: the slave becomes master, the old master is fenced and rejoins as slave.
- ``SIGKILL``: the master's broker process is killed; the supervisor restarts its process group. If
  it is back within the controller's time-out it stays master; otherwise the slave takes over. Each
  fault's outcome is recorded.

Two measures per fault, from the signal to the answer of a send that started after it:
"write accepted" = first SEND_OK or SLAVE_NOT_AVAILABLE (stored by a master; with one slave a new
master answers SLAVE_NOT_AVAILABLE until the old one is back in sync), and "SEND_OK" = first send
confirmed by a slave again (the old master rejoined and caught up). Per kind: median, p90, max and
the number of samples; the per-fault details (epochs, masters, elections, answers seen) go to the JSON.

First, the cost of the controller mode: batched produce (256 x 100 B, ``--producer-threads``,
``--messages`` a run) with sync flush + sync replication on a failover=False and a failover=True
cluster, both up, runs alternating (the load of the shared machine drifts): throughput, batch p99.

Bounded: ``--faults`` per kind (7; back to back 15; quick 3) and at most ``FAULT_PHASE_S_MAX``
seconds of faults (fewer samples are reported as such); every wait has a deadline; clusters stop in
``finally``. ``--keep-logs DIR`` copies the failover cluster's ``logs/`` there (outliers are explained
by them). The whole scenario takes ~3-4 minutes here.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import signal
import statistics
import threading
import time

from rocketbox.cluster import Admin, Message, Producer, SendStatus
from rocketbox.cluster.config import SYNC_FLUSH, SYNC_MASTER
from rocketbox.cluster.testing import LocalCluster, store_host_prefix, wait_until
from rocketbox.perf.harness import BATCH_SIZE, Settings, client_config, create_topic, run_producers
from rocketbox.perf.report import Report, Row, percentile


GROUP = "broker-a"
TOPIC = "FailoverBench"
FAILOVER_GOAL_MEDIAN_S = 10.0
FAILOVER_GOAL_MAX_S = 30.0
FAULT_PHASE_S_MAX = 190.0
FAULT_PHASE_S_MAX_QUICK = 60.0
FAULT_WAIT_S = 60.0          # one fault's measures: counted as missing past this
SEND_PAUSE_S = 0.002
ACCEPTED = (SendStatus.SEND_OK.name, SendStatus.SLAVE_NOT_AVAILABLE.name)
BROKER = {"broker_role": SYNC_MASTER, "sync_replication_timeout_ms": 1500}


def await_healthy(cluster: LocalCluster, admin: Admin, timeout_s: float = 60.0) -> str:
    return cluster.await_group_serving(GROUP, admin, timeout_s)


class Sender:
    """One producer thread sending single messages until stopped; each answer or failure is recorded
    as (start, end, status name or "error", store-host prefix of the offset msg id)."""

    def __init__(self, namesrv: str):
        self.cfg = client_config(namesrv, request_timeout_ms=500, send_timeout_ms=500, send_retry_count=0)
        self.records: list[tuple[float, float, str, str]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="failover-sender", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            with Producer("FailoverBenchProducer", config=self.cfg) as producer:
                seq = 0
                message = None
                while not self._stop.is_set():
                    if message is None:   # else the failed one again (same UNIQ_KEY)
                        message = Message(TOPIC, f"m-{seq}".encode())
                        seq += 1
                    t0 = time.monotonic()
                    try:
                        result = producer.send(message)
                        status, store = result.status.name, (result.offset_msg_id or "")[:16]
                    except Exception:   # noqa: BLE001 - a failed send: recorded, sent again
                        status, store = "error", ""
                    with self.lock:
                        self.records.append((t0, time.monotonic(), status, store))
                    if status != "error":
                        message = None
                    self._stop.wait(SEND_PAUSE_S if status != "error" else 0.01)
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario
            self.error = exc

    def since(self, t: float) -> list[tuple[float, float, str, str]]:
        """Records of sends that started at or after ``t`` (monotonic)."""
        with self.lock:   # appended in start order: only the tail is copied
            return self.records[bisect.bisect_left(self.records, t, key=lambda r: r[0]):]

    def first_after(self, t: float, statuses: tuple[str, ...]) -> tuple[float, float, str, str] | None:
        return next((r for r in self.since(t) if r[2] in statuses), None)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(30)


def _backoff_reset_s(cluster: LocalCluster) -> dict[str, float]:
    """Replica child name -> the supervisor's ``backoff_reset_after_s`` for it (children.json)."""
    with open(os.path.join(cluster.data_dir, "children.json")) as f:
        specs = {spec["name"]: spec for spec in json.load(f)}
    return {name: float(specs[name].get("backoff_reset_after_s", 10.0)) for name in cluster.replica_configs(GROUP)}


def await_backoff_reset(cluster: LocalCluster, timeout_s: float = 60.0) -> float:
    """Until every replica's broker main has run for the supervisor's back-off reset time, so its next
    restart is not delayed by the exponential back-off of earlier ones (an isolated fault); seconds waited."""
    reset = _backoff_reset_s(cluster)
    t0 = time.monotonic()

    def settled():
        children = {c["name"]: c for c in cluster.state().get("children", [])}
        return all(children[name]["state"] == "running" and children[name]["started_at"] and
                   time.time() - children[name]["started_at"] >= reset_s for name, reset_s in reset.items())
    wait_until(settled, timeout_s, interval_s=0.1, what="replicas up past the supervisor's back-off reset")
    return time.monotonic() - t0


def _one_fault(cluster: LocalCluster, admin: Admin, sender: Sender, kind: str, deadline: float,
               spaced: bool) -> dict:
    """Make the master fail (``kind``: SIGSTOP or SIGKILL); the measures of this fault."""
    await_healthy(cluster, admin)
    spacing_s = await_backoff_reset(cluster) if spaced else 0.0
    master = await_healthy(cluster, admin)
    t_ok = time.monotonic()
    wait_until(lambda: sum(r[2] == "SEND_OK" for r in sender.since(t_ok)) >= 20, 30, interval_s=0.05,
               what="SEND_OK answers before the fault")
    view = admin.controller_group(GROUP)
    epoch = view["epoch"]
    fault: dict = {"kind": kind, "master_before": master, "epoch_before": epoch,
                   "wall_time": time.strftime("%H:%M:%S"), "spacing_wait_s": spacing_s}
    t_fault = time.monotonic()
    if kind == "SIGSTOP":
        cluster.kill(master, signal.SIGSTOP)
        try:
            wait_until(lambda: admin.controller_group(GROUP)["epoch"] > epoch, FAILOVER_GOAL_MAX_S * 2,
                       interval_s=0.05, what="a new epoch")
            fault["new_epoch_s"] = time.monotonic() - t_fault
        finally:
            cluster.kill(master, signal.SIGCONT)
        fault["resumed_s"] = time.monotonic() - t_fault
    else:
        pid = cluster.kill(master, signal.SIGKILL)
        cluster.await_running(master, not_pid=pid, timeout_s=FAULT_WAIT_S)
        fault["restarted_s"] = time.monotonic() - t_fault
    limit = min(FAULT_WAIT_S, max(10.0, deadline - time.monotonic() + 30))
    try:
        accepted = wait_until(lambda: sender.first_after(t_fault, ACCEPTED), limit, interval_s=0.02,
                              what="a write accepted after the fault")
        fault["accepted_s"] = accepted[1] - t_fault
        fault["accepted_status"] = accepted[2]
        ok = wait_until(lambda: sender.first_after(t_fault, ("SEND_OK",)), limit, interval_s=0.02,
                        what="SEND_OK after the fault")
        fault["send_ok_s"] = ok[1] - t_fault
    except TimeoutError as exc:
        fault["timeout"] = str(exc)
    after = await_healthy(cluster, admin)
    fault["healthy_s"] = time.monotonic() - t_fault
    view = admin.controller_group(GROUP)
    fault.update(master_after=after, epoch_after=view["epoch"], failover=after != master,
                 elections=view["epoch"] - epoch)
    prefixes = {store_host_prefix(cfg): name for name, cfg in cluster.replica_configs(GROUP).items()}
    seen: dict = {}
    for r in sender.since(t_fault):
        if r[1] - t_fault > fault.get("send_ok_s", 0):
            break
        key = r[2] if r[2] == "error" else f"{r[2]} by {prefixes.get(r[3], r[3])}"
        seen[key] = seen.get(key, 0) + 1
    fault["answers_until_send_ok"] = seen
    return fault


def _throughput_run(s: Settings, cluster: LocalCluster, run: int, label: str) -> tuple[float, float]:
    """One batched sync + sync run: (msg/s, batch publish p99 us); every answer must be SEND_OK."""
    statuses: dict = {}
    cfg = client_config(cluster.namesrv)
    topic = f"FoCost{run}"
    create_topic(cfg, topic)
    latencies: list = []
    sent, elapsed = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, s.producer_threads,
                                  s.measure_s_max, latencies=latencies, statuses=statuses)
    if set(statuses) != {"SEND_OK"}:
        raise RuntimeError(f"{label}: answers other than SEND_OK: {statuses}")
    return sent / elapsed, percentile(latencies, 0.99)


def _keep_logs(s: Settings, cluster: LocalCluster, name: str) -> None:
    target = getattr(s, "keep_logs", None)
    if target:
        shutil.copytree(os.path.join(cluster.data_dir, "logs"), os.path.join(target, name), dirs_exist_ok=True)


def _summary(values: list[float]) -> str:
    return (f"n={len(values)}, median {percentile(values, 0.5):.2f} s, p90 {percentile(values, 0.9):.2f} s, "
            f"max {max(values):.2f} s") if values else "no samples"


def scenario_failover(s: Settings, report: Report, tmp: str) -> None:
    spaced = not getattr(s, "back_to_back", False)
    faults_per_kind = getattr(s, "faults", 0) or (3 if s.quick else (7 if spaced else 15))
    phase_s = FAULT_PHASE_S_MAX_QUICK if s.quick else FAULT_PHASE_S_MAX
    cost: dict = {False: ([], []), True: ([], [])}
    faults: list[dict] = []
    # The cost of the controller mode: the same batched sync + sync load without and with it, both
    # clusters up and the runs alternating, so a change of the shared machine's load hits both alike.
    with LocalCluster(os.path.join(tmp, "failover-on"), slaves=1, failover=True, flush_mode=SYNC_FLUSH,
                      broker_overrides=dict(BROKER)) as cluster:
        try:
            with Admin(config=client_config(cluster.namesrv)) as admin:
                with LocalCluster(os.path.join(tmp, "failover-off"), slaves=1, flush_mode=SYNC_FLUSH,
                                  broker_overrides=dict(BROKER)) as plain:
                    master = f"tcp://{plain.topology.brokers[0].address}"
                    with Admin(config=client_config(plain.namesrv)) as plain_admin:
                        wait_until(lambda: plain_admin.broker_runtime_info(master)["ha"]["inSync"], 30,
                                   what="slave in sync")
                    await_healthy(cluster, admin)
                    for run in range(s.runs):
                        for mode, which in ((False, plain), (True, cluster)):
                            rate, p99 = _throughput_run(s, which, run, f"failover={mode}")
                            cost[mode][0].append(rate)
                            cost[mode][1].append(p99)
                create_topic(client_config(cluster.namesrv), TOPIC)
                deadline = time.monotonic() + phase_s
                with Sender(cluster.namesrv) as sender:
                    for i in range(2 * faults_per_kind):
                        if time.monotonic() > deadline:
                            break
                        kind = "SIGSTOP" if i % 2 == 0 else "SIGKILL"
                        fault = _one_fault(cluster, admin, sender, kind, deadline, spaced)
                        faults.append(fault)
                        print(f"[perf] failover {i + 1}: {kind} {fault['master_before']} -> "
                              f"{fault['master_after']} (epoch {fault['epoch_before']} -> {fault['epoch_after']}, "
                              f"after {fault['spacing_wait_s']:.1f} s of spacing): accepted "
                              f"{fault.get('accepted_s', float('nan')):.2f} s, SEND_OK "
                              f"{fault.get('send_ok_s', float('nan')):.2f} s", flush=True)
                    sends = len(sender.records)
                if sender.error:
                    raise RuntimeError(f"the sender failed: {sender.error!r}")
        finally:
            _keep_logs(s, cluster, "failover-on")

    note = (f"{s.producer_threads} producer threads, {s.messages} messages a run; master + 1 slave, sync flush + "
            f"sync replication; runs alternate between the two clusters, both up")
    for mode in (False, True):
        rates, p99s = cost[mode]
        report.add(Row("failover", f"batched {BATCH_SIZE}, 100 B, sync + sync, failover={mode}", "msg/s", rates,
                       vs_baseline=True, note=note))
        report.add(Row("failover", f"batch publish p99, sync + sync, failover={mode}", "us", p99s, note=note))
    if cost[False][0] and cost[True][0]:
        share = 100 * statistics.median(cost[True][0]) / statistics.median(cost[False][0])
        report.add(Row("failover", "failover=True throughput as a share of failover=False", "%", [share],
                       note="ratio of the medians"))

    for kind in ("SIGSTOP", "SIGKILL"):
        mine = [f for f in faults if f["kind"] == kind]
        switched = sum(f["failover"] for f in mine)
        outcome = (f"{len(mine)} faults, {'spaced' if spaced else 'back to back'}: {switched} ended with the slave "
                   f"as master, {len(mine) - switched} with the same master; "
                   f"{sum(f['elections'] > 1 for f in mine)} took two or more elections; "
                   f"{sum('timeout' in f for f in mine)} not measured")
        for key, what in (("accepted_s", "first write accepted (SEND_OK or SLAVE_NOT_AVAILABLE)"),
                          ("send_ok_s", "first SEND_OK (the other replica in sync again)")):
            values = [f[key] for f in mine if key in f]
            extra = {"samples": values, "summary": _summary(values)}
            if key == "accepted_s":
                extra["faults"] = mine
            report.add(Row("failover", f"{kind} master: fault -> {what}, n={len(values)}", "s", values,
                           ("<=", FAILOVER_GOAL_MEDIAN_S), note=outcome, extra=extra))
            if values:
                report.add(Row("failover", f"{kind} master: fault -> {what.split(' (')[0]}, p90", "s",
                               [percentile(values, 0.9)]))
                report.add(Row("failover", f"{kind} master: fault -> {what.split(' (')[0]}, max", "s",
                               [max(values)], ("<=", FAILOVER_GOAL_MAX_S)))
    report.add(Row("failover", "single sends during the fault phase", "count", [sends],
                   note=f"one thread, {SEND_PAUSE_S * 1000:.0f} ms pause after each answer, 500 ms request time-out"))

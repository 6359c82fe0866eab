"""A real cluster for tests, benchmarks and the demo: a supervisor process and its children.

``LocalCluster`` writes the child table, starts ``python -m rocketbox.cluster.procs.supervisor``
(which dies with its parent: PR_SET_PDEATHSIG), waits until cluster.json says ready,
and exposes what tests need: NameServer addresses, child pids, kill-and-await-restart.
Every port is picked free on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from rocketbox.cluster.acl.curve import client_config_fields, client_keys_for
from rocketbox.cluster.config import ASYNC_FLUSH, BrokerConfig, ClientConfig, broker_config_from_json
from rocketbox.cluster.file_modes import open_private, private_dir
from rocketbox.cluster.shm.paths import commitlog_segment
from rocketbox.cluster.supervision import lifecycle
from rocketbox.cluster.supervision.run_state import read_state_file
from rocketbox.cluster.tls import CERT_FILE, KEY_FILE, make_self_signed, tls_directory
from rocketbox.cluster.topology import (Topology, build_topology, child_specs, exporter_settings, free_ports,
                                        group_name, prepare_access_control,
                                        prepare_controller_secret)

# Small files so tests roll segments and stay light; production defaults are RocketMQ's.
SMALL_STORE = {
    "commitlog_file_size_bytes": 16 * 1024 * 1024,
    "consumequeue_entries_per_file": 100_000,
    "index_slot_count": 50_000,
    "index_entry_count_max": 200_000,
    "flush_interval_ms": 200,
    "disk_free_bytes_min": 8 * 1024 * 1024,
    "message_size_bytes_max": 4 * 1024 * 1024,
}


def wait_until(condition, timeout_s: float, interval_s: float = 0.02, what: str = "condition"):
    """Poll ``condition`` until it returns a truthy value; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not reached within {timeout_s} s")
        time.sleep(interval_s)


def read_topic(consumer, topic: str, batch: int = 1024, pulls_max: int = 100_000) -> list:
    """Every message of ``topic`` now visible, queue by queue from its min offset (a PullConsumer)."""
    messages = []
    for mq in consumer.queues(topic):
        offset = consumer.min_offset(mq)
        for _ in range(pulls_max):
            result = consumer.pull(mq, offset, batch)
            if not result.messages:
                break
            offset = result.next_begin_offset
            messages.extend(result.messages)
    return messages


def pull_until(consumer, topic: str, expected: int, timeout_s: float = 30.0, batch: int = 256) -> list:
    """Pull every queue of ``topic`` from offset 0 (a PullConsumer) until ``expected`` messages
    came; TimeoutError if they do not within ``timeout_s``."""
    queues = consumer.queues(topic)
    offsets = {mq: 0 for mq in queues}
    got: list = []

    def progress():
        for mq in queues:
            result = consumer.pull(mq, offsets[mq], batch)
            offsets[mq] = result.next_begin_offset
            got.extend(result.messages)
        return len(got) >= expected
    wait_until(progress, timeout_s, interval_s=0.01, what=f"{expected} messages pulled")
    return got


def child_record(data_dir: str, name: str) -> dict:
    """The supervisor's record of child ``name`` (pid, state) in ``data_dir``'s cluster.json."""
    for child in (read_state_file(data_dir) or {}).get("children", []):
        if child["name"] == name:
            return child
    raise KeyError(f"no child {name} in {data_dir}/cluster.json")


def _controller_view(namesrv: str, broker: str, admin=None) -> dict:
    from rocketbox.cluster.client.admin import Admin   # clients import nothing of this module: no cycle
    if admin is not None:
        return admin.controller_group(broker)
    owned = Admin(namesrv)
    try:
        return owned.controller_group(broker)
    finally:
        owned.shutdown()


def master_of(replicas: dict[str, BrokerConfig], view: dict) -> str | None:
    """The child name of the replica a controller view names master (None: no master)."""
    return next((name for name, cfg in replicas.items() if cfg.address == view.get("masterAddress")), None)


def serving_master(data_dir: str, replicas: dict[str, BrokerConfig], view: dict) -> str | None:
    """The master's child name when the group serves: every supervisor child runs, every replica is
    in the controller's sync set, and the master is writable in the view's epoch with a slave in sync."""
    master = master_of(replicas, view)
    children = (read_state_file(data_dir) or {}).get("children", [])
    if not (master and len(view.get("syncStateSet", [])) == len(replicas)
            and all(c["state"] == "running" for c in children)):
        return None
    info = broker_runtime_info(replicas[master].address) or {}
    serving = info.get("writable") and info.get("epoch") == view["epoch"] and (info.get("ha") or {}).get("inSync")
    return master if serving else None


def broker_runtime_info(address: str, timeout_ms: int = 1000) -> dict | None:
    """GET_BROKER_RUNTIME_INFO of the broker at host:port, or None when it does not answer."""
    from rocketbox.cluster.protocol import RequestCode
    from rocketbox.cluster.wire_format import Command
    from rocketbox.cluster.zmq_transport import RpcClient, TransportError
    client = RpcClient(default_timeout_ms=timeout_ms)
    try:
        return json.loads(client.call(f"tcp://{address}", Command(RequestCode.GET_BROKER_RUNTIME_INFO, {})).body)
    except (TransportError, ValueError):
        return None
    finally:
        client.close()


def store_host_prefix(cfg: BrokerConfig) -> str:
    """The store-host part of the offset msg ids a broker writes (its IP and port, hex)."""
    return "".join(f"{int(part):02X}" for part in cfg.host.split(".")) + f"{cfg.store_host_port:08X}"


def commitlog_bytes(store_dir: str, end: int, file_size: int) -> bytes:
    """The CommitLog bytes [0, end) of a store, read from its segment files (no mapping)."""
    out = bytearray()
    start = 0
    while start < end:
        with open(commitlog_segment(store_dir, start), "rb") as f:
            out += f.read(min(file_size, end - start))
        start += file_size
    return bytes(out)


class LocalCluster:
    def __init__(self, data_dir: str, *, namesrvs: int = 1, brokers: int = 1, flush_mode: str = ASYNC_FLUSH,
                 store_overrides: dict | None = None, broker_overrides: dict | None = None,
                 namesrv_overrides: dict | None = None, heartbeat_timeout_s: float | None = None,
                 slaves: int = 0, failover: bool = False, remoting: bool = True, metrics: bool = True,
                 proxy: bool = False, proxy_overrides: dict | None = None, console: bool = False,
                 acl_file: str = "", require_credentials: bool = False, tls: str = "",
                 console_trust_loopback: bool = False):
        """``slaves`` per broker group (children ``broker-a-s1``, ...; broker/ha.py); ``failover``:
        controllers in the NameServers elect each group's master (cluster/controller/);
        ``remoting``: every process also serves RocketMQ's remoting protocol (on free ports too);
        ``metrics``: the Prometheus exporter runs (in child ``web``, on a free port: ``metrics_url``);
        ``proxy``: the gRPC proxy runs (child ``proxy``, on a free port: ``proxy_endpoint``), off by
        default: it loads the gRPC client package, which most tests do not need; ``proxy_overrides``:
        ProxySettings fields; ``console``: the web console runs (in child ``web``, on a free port:
        ``console_url``), off by default: it loads the web libraries, which most tests do not need;
        ``acl_file``: access control on every door with this plain_acl.yml (its CURVE key pair made at
        start; ``client_config`` gives a client the keys; the console asks for an admin's credentials),
        ``require_credentials``: the metrics endpoint asks for credentials although it is on loopback,
        ``console_trust_loopback``: the console does not (build_topology); ``tls``: tls.server.mode
        ("permissive" or "enforcing") of every remoting door and the proxy, with a self-signed
        certificate made at start in ``<data dir>/tls/`` (``tls_cert_path``: what clients trust)."""
        base = namesrvs + brokers * (2 + slaves)
        failover_count = namesrvs + brokers * slaves if failover else 0
        remoting_count = namesrvs + brokers * (1 + slaves) if remoting else 0
        ports = free_ports(base + failover_count + remoting_count + 1 + int(proxy) + int(console))
        metrics_port = ports.pop()
        proxy_port = ports.pop() if proxy else None
        console_port = ports.pop() if console else None
        broker_overrides = {**({"metrics_prom_exporter_port": metrics_port} if metrics
                               else {"metrics_exporter_type": "DISABLE"}), **(broker_overrides or {})}
        extra = ports[base:base + failover_count]
        remoting_ports = ports[base + failover_count:]
        store = dict(SMALL_STORE)
        store.update(store_overrides or {})
        masters_end = namesrvs + brokers
        self.topology: Topology = build_topology(
            data_dir, namesrv_count=namesrvs, broker_count=brokers, flush_mode=flush_mode,
            namesrv_ports=ports[:namesrvs], broker_ports=ports[namesrvs:masters_end], store_overrides=store,
            broker_overrides=broker_overrides, namesrv_overrides=namesrv_overrides, slave_count=slaves,
            ha_ports=ports[masters_end:masters_end + brokers], slave_ports=ports[masters_end + brokers:base],
            failover=failover, controller_ports=extra[:namesrvs] or None, slave_ha_ports=extra[namesrvs:] or None,
            remoting=remoting, namesrv_remoting_ports=remoting_ports[:namesrvs] or None,
            broker_remoting_ports=remoting_ports[namesrvs:masters_end] or None,
            slave_remoting_ports=remoting_ports[masters_end:] or None, proxy_port=proxy_port,
            proxy_overrides=proxy_overrides, console_port=console_port, acl_file=acl_file,
            require_credentials=require_credentials, console_trust_loopback=console_trust_loopback, tls_mode=tls,
            tls_cert=os.path.join(tls_directory(data_dir), CERT_FILE) if tls else "",
            tls_key=os.path.join(tls_directory(data_dir), KEY_FILE) if tls else "")
        self.data_dir = self.topology.data_dir
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.process: subprocess.Popen | None = None

    @property
    def namesrv(self) -> str:
        return self.topology.namesrv_env

    @property
    def metrics_url(self) -> str | None:
        """Where the cluster's Prometheus metrics are scraped (None when started without them)."""
        exporter = exporter_settings(self.topology)
        return exporter.url if exporter is not None else None

    @property
    def proxy_endpoint(self) -> str | None:
        """host:port of the gRPC proxy, a RocketMQ 5 client's endpoints (None when started without it)."""
        return self.topology.proxy.address if self.topology.proxy is not None else None

    @property
    def console_url(self) -> str | None:
        """The web console's address, http://127.0.0.1:PORT/ (None when started without it)."""
        return self.topology.console.url if self.topology.console is not None else None

    @property
    def remoting_namesrv(self) -> str:
        """The NameServers' remoting addresses, as a RocketMQ client's namesrvAddr ("host:port;...")."""
        return ";".join(f"{n.host}:{n.remoting_port}" for n in self.topology.namesrvs if n.remoting_port)

    def client_config(self, account: str | None = None, **fields) -> ClientConfig:
        """A native client's config for this cluster: with access control, the cluster's own CURVE key
        (every right) or ``account``'s pair (``curve/clients/<account>.key_secret``)."""
        acl_file = self.topology.acl_file
        keys = client_config_fields(client_keys_for(acl_file, account)) if acl_file else {}
        return ClientConfig(namesrv_endpoints=self.topology.namesrv_endpoints, **{**keys, **fields})

    @property
    def tls_cert_path(self) -> str:
        """The certificate every door presents ("" without TLS): a client's trusted certificate."""
        return self.topology.tls_cert_path

    def start(self, ready_timeout_s: float = 60.0) -> "LocalCluster":
        private_dir(self.data_dir)
        prepare_access_control(self.topology)
        prepare_controller_secret(self.topology)
        if self.tls_cert_path and not os.path.exists(self.tls_cert_path):
            make_self_signed(os.path.dirname(self.tls_cert_path))
        specs_path = os.path.join(self.data_dir, "children.json")
        with open_private(specs_path) as f:
            watchdog = {} if self.heartbeat_timeout_s is None else {"heartbeat_timeout_s": self.heartbeat_timeout_s}
            json.dump([s.to_dict() for s in child_specs(self.topology, **watchdog)], f)
        log = open_private(os.path.join(self.data_dir, "supervisor.out"), "ab")
        lifecycle.preload_libc()  # before fork: the child only makes the prctl syscall
        self.process = subprocess.Popen(
            lifecycle.python_module_command("rocketbox.cluster.procs.supervisor", "--data-dir", self.data_dir,
                                            "--specs", specs_path),
            stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            preexec_fn=lambda: lifecycle.set_parent_death_signal(signal.SIGTERM))
        log.close()
        try:
            wait_until(self._ready, ready_timeout_s, what="cluster ready")
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"cluster did not start; see {self.data_dir}/supervisor.out and logs/") from None
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"supervisor exited with {self.process.returncode}; "
                               f"see {self.data_dir}/supervisor.out")
        state = read_state_file(self.data_dir) or {}
        return state.get("supervisor_pid") == self.process.pid and state.get("state") == "ready"

    def state(self) -> dict:
        return read_state_file(self.data_dir) or {}

    def child(self, name: str) -> dict:
        return child_record(self.data_dir, name)

    def pid(self, name: str) -> int | None:
        return self.child(name).get("pid")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        pid = self.pid(name)
        os.kill(pid, sig)
        return pid

    def await_running(self, name: str, not_pid: int | None = None, timeout_s: float = 60.0) -> int:
        """Wait until ``name`` runs (ready) with a pid other than ``not_pid``; return the pid."""
        def running():
            child = self.child(name)
            return child["state"] == "running" and child["pid"] != not_pid and child["pid"]
        return wait_until(running, timeout_s, what=f"{name} running again")

    def await_all_running(self, timeout_s: float = 60.0) -> None:
        wait_until(lambda: all(c["state"] == "running" for c in self.state().get("children", [])),
                   timeout_s, what="every child running")

    # ---- replicas (failover) ----

    def replica_configs(self, broker: str = "broker-a") -> dict[str, "BrokerConfig"]:
        """child name -> static config of every replica of group ``broker``."""
        return {group_name(cfg): cfg for cfg in self.topology.brokers + self.topology.slaves
                if cfg.broker_name == broker}

    def master_child(self, broker: str = "broker-a", admin=None) -> str | None:
        """The child the failover controller names master of ``broker`` now (None: no master)."""
        return master_of(self.replica_configs(broker), _controller_view(self.namesrv, broker, admin))

    def await_group_serving(self, broker: str = "broker-a", admin=None, timeout_s: float = 60.0) -> str:
        """Until ``broker`` serves (``serving_master``); returns the master's child name."""
        replicas = self.replica_configs(broker)
        return wait_until(lambda: serving_master(self.data_dir, replicas, _controller_view(self.namesrv, broker, admin)),
                          timeout_s, interval_s=0.1, what=f"{broker} serving (master and slaves in sync)")

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def replica_configs(data_dir: str, broker: str = "broker-a") -> dict:
    """child name -> BrokerConfig of every replica of group ``broker``, from the specs the
    supervisor was started with (``children.json``: ``LocalCluster`` and ``cluster up`` write it)."""
    with open(os.path.join(data_dir, "children.json")) as f:
        specs = json.load(f)
    out = {}
    for spec in specs:
        if spec.get("role") == "broker" and "--config-json" in spec.get("args", []):
            cfg = broker_config_from_json(spec["args"][spec["args"].index("--config-json") + 1])
            if cfg.broker_name == broker:
                out[spec["name"]] = cfg
    return out


def compare_replicas(data_dir: str, namesrv: str, broker: str = "broker-a", timeout_s: float = 60.0) -> dict:
    """Wait (bounded) until every replica of ``broker`` reports the same CommitLog end, then
    compare their CommitLog bytes up to it: {replicas, end, identical, first_difference, error}."""
    from rocketbox.cluster.client.admin import Admin   # clients import nothing of this module: no cycle
    configs = replica_configs(data_dir, broker)
    result = {"replicas": sorted(configs), "end": None, "identical": False, "first_difference": None,
              "error": None, "ends": {}}
    admin = Admin(namesrv)
    try:
        def same_end():
            ends = {}
            for name, cfg in configs.items():
                try:
                    ends[name] = admin.broker_runtime_info(f"tcp://{cfg.address}")["writePos"]
                except Exception:
                    return None
            result["ends"] = ends
            return len(set(ends.values())) == 1 and ends
        try:
            wait_until(same_end, timeout_s, interval_s=0.2, what="replicas at the same CommitLog end")
        except TimeoutError as exc:
            result["error"] = f"{exc}; last ends {result['ends']}"
            return result
    finally:
        admin.shutdown()
    end = result["end"] = next(iter(result["ends"].values()))
    logs = {name: commitlog_bytes(cfg.store.store_dir, end, cfg.store.commitlog_file_size_bytes)
            for name, cfg in configs.items()}
    first = next(iter(logs.values()))
    for name, data in logs.items():
        if data != first:
            result["first_difference"] = next(i for i, (a, b) in enumerate(zip(first, data)) if a != b) \
                if len(data) == len(first) else min(len(data), len(first))
            return result
    result["identical"] = True
    return result

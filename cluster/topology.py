"""What ``cluster up`` starts: NameServers and broker groups as a supervisor child table.

Data layout under the data directory:

    namesrv-<n>/            (NameServer state and logs)
    <broker-name>/store/    (commitlog/, consumequeue/, index/, config/, checkpoint, abort, control)
    <broker-name>-s<n>/store/   (slave n of that group: the same layout, its own files)
    logs/<child>.log        (each child's stdout/stderr, written by the supervisor)
    cluster.json            (the supervisor's run state)

A broker group is a fate-sharing group led by the broker main process: its flush,
reput and allocate workers start after it (it recovers the store first) and are
restarted with it. A slave (broker id n >= 1, role SLAVE) is a group of its own,
``<broker-name>-s<n>`` with the same four roles: it shares nothing with its master but
the HA connection (broker/ha.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import socket
from dataclasses import dataclass

from rocketbox.cluster import port_reservations
from rocketbox.cluster.account_keys import AUTH_FILE_NAME
from rocketbox.cluster.config import (ASYNC_FLUSH, BROKER_PORT_DEFAULT, BROKER_PORT_STEP, BROKER_REMOTING_PORT_DEFAULT,
                                      METRICS_PROM, NAMESRV_PORT_DEFAULT, NAMESRV_REMOTING_PORT_DEFAULT, SLAVE,
                                      TLS_DISABLED, BrokerConfig, NamesrvConfig, StoreConfig, check_tls,
                                      namesrv_endpoints, parse_levels, to_json)
from rocketbox.cluster.console.settings import ConsoleSettings, loopback_problem
from rocketbox.cluster.file_modes import exposure
from rocketbox.cluster.metrics.settings import BrokerTarget, ExporterSettings, NamesrvTarget
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.message import record_format
from rocketbox.cluster.shm.control_format import heartbeat_offset
from rocketbox.cluster.shm.paths import control_path
from rocketbox.cluster.supervision.child_table import ChildSpec
from rocketbox.cluster.supervision.run_state import STATE_FILE_NAME

# Worker processes of a broker group; the allocate worker runs on a thread of the reput process.
BROKER_WORKER_ROLES = ("flush", "reput")
# A NameServer's controller (Raft) node listens on its port + this, unless told otherwise.
CONTROLLER_PORT_OFFSET = 50


@dataclass(frozen=True)
class Topology:
    data_dir: str
    namesrvs: tuple[NamesrvConfig, ...]
    brokers: tuple[BrokerConfig, ...]
    # Slaves of every group, in group order (their broker_name is their master's).
    slaves: tuple[BrokerConfig, ...] = ()
    # The gRPC proxy (RocketMQ 5's clients), when one runs here.
    proxy: ProxySettings | None = None
    # The web console, when one runs here (loopback only, unless access control asks for credentials).
    console: ConsoleSettings | None = None
    # The cluster's plain_acl.yml when access control is on (every process checks its callers).
    acl_file: str = ""
    # ACL 2.0 with migrateAuthFromV1Enabled: the plain_acl.yml whose accounts become users (acl_file
    # is then the cluster's auth.json).
    auth_migrate_from: str = ""
    # The metrics endpoint asks for credentials even on loopback (with acl_file; the console always does
    # unless told to trust loopback).
    require_credentials: bool = False
    # TLS on every remoting door and the proxy (cluster/tls.py): tls.server.mode and the certificate.
    tls_mode: str = TLS_DISABLED
    tls_cert_path: str = ""

    @property
    def namesrv_endpoints(self) -> tuple[str, ...]:
        return tuple(n.endpoint for n in self.namesrvs)

    @property
    def namesrv_env(self) -> str:
        """The value of ROCKETBOX_NAMESRV for clients of this cluster."""
        return ";".join(f"{n.host}:{n.port}" for n in self.namesrvs)


def _ephemeral_low(default: int = 32768) -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports free right now and not handed out by another call in the last minute
    (``port_reservations.py``): tests use them so parallel runs never collide.

    Picked below the kernel's ephemeral range: a port from that range can be handed to an
    outgoing connection meanwhile, and a client reconnecting to a restarting server on
    loopback can even connect to itself on it (TCP simultaneous open)."""
    rng = random.SystemRandom()
    high = min(_ephemeral_low(), 65536) - 1
    low = max(1024, min(20_000, high - 4096))
    chosen: list[int] = []
    for _ in range(count * 200):   # bounded: a busy range falls back to the kernel's pick below
        if len(chosen) == count:
            return chosen
        port = rng.randint(low, high)
        if port in chosen or not port_reservations.claim(port):
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        chosen.append(port)
    sockets = []
    try:
        for _ in range(count - len(chosen)):
            s = socket.socket()
            s.bind((host, 0))
            sockets.append(s)
        return chosen + [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def namesrv_name(index: int) -> str:
    return f"namesrv-{index}"


def broker_name(index: int) -> str:
    return f"broker-{chr(ord('a') + index)}" if index < 26 else f"broker-{index}"


def slave_name(broker: str, broker_id: int) -> str:
    """The child (and store directory) name of slave ``broker_id`` of group ``broker``."""
    return f"{broker}-s{broker_id}"


def group_name(cfg: BrokerConfig) -> str:
    return slave_name(cfg.broker_name, cfg.broker_id) if cfg.broker_id else cfg.broker_name


def build_topology(data_dir: str, *, namesrv_count: int = 1, broker_count: int = 1, flush_mode: str = ASYNC_FLUSH,
                   host: str = "127.0.0.1", namesrv_ports: list[int] | None = None,
                   broker_ports: list[int] | None = None, store_overrides: dict | None = None,
                   broker_overrides: dict | None = None, namesrv_overrides: dict | None = None,
                   slave_count: int = 0, ha_ports: list[int] | None = None,
                   slave_ports: list[int] | None = None, failover: bool = False,
                   controller_ports: list[int] | None = None, slave_ha_ports: list[int] | None = None,
                   remoting: bool = False, namesrv_remoting_ports: list[int] | None = None,
                   broker_remoting_ports: list[int] | None = None,
                   slave_remoting_ports: list[int] | None = None, proxy_port: int | None = None,
                   proxy_overrides: dict | None = None, console_port: int | None = None,
                   console_host: str = "127.0.0.1", acl_file: str = "", require_credentials: bool = False,
                   console_trust_loopback: bool = False, controller_secret_file: str = "", tls_mode: str = "",
                   tls_cert: str = "", tls_key: str = "") -> Topology:
    """``slave_count`` slaves per group: by default slave n of a group listens on its master's
    port + 2n and the master's HA endpoint is its port + 1 (``ha_ports``, ``slave_ports`` (group
    by group) override them).

    ``failover``: every NameServer also runs a controller node (Raft on ``controller_ports``,
    default its port + CONTROLLER_PORT_OFFSET) and every replica of a group runs in controller
    mode: the controller names the master, and each replica has an HA endpoint of its own (a
    slave's: its port + 1, or ``slave_ha_ports``) for when it is elected. The controller nodes
    prove to each other they hold ``controller_secret_file`` (default: ``controller.secret`` beside
    the ACL file, else in ``data_dir``; ``prepare_controller_secret`` makes it).

    ``remoting``: every NameServer and broker also serves RocketMQ's remoting protocol, on
    ``namesrv_remoting_ports`` (default 9876, 9877, ...), ``broker_remoting_ports`` (default 10911,
    +10 a group) and ``slave_remoting_ports`` (default: the master's + 2n), as on RocketMQ's ports.

    ``proxy_port``: a gRPC proxy (RocketMQ 5's clients) listens there, on ``host``, with
    ``proxy_overrides`` (ProxySettings fields) on top of what the topology gives it.

    ``console_port``: the web console listens there, on ``console_host`` (a loopback address:
    ValueError otherwise, before anything starts, unless access control is on). With access control
    the console asks for an admin's credentials, on loopback too unless ``console_trust_loopback``
    (a single-user machine: whoever reaches loopback is trusted as admin).

    ``acl_file``: access control (cluster/acl/) on every NameServer, broker, the proxy, the console and
    the metrics endpoint, with this plain_acl.yml (also taken from ``broker_overrides``' acl_enable and
    acl_file, broker.conf's aclEnable and aclFile); ``require_credentials``: the metrics endpoint asks
    for credentials even on loopback (it does beyond loopback).

    ``tls_mode``, ``tls_cert``, ``tls_key``: TLS on every NameServer's and broker's remoting door
    and on the proxy (also taken from ``broker_overrides``' tls_server_*, broker.conf's tls.server.*)."""
    data_dir = os.path.abspath(data_dir)
    tls = tls_overrides(tls_mode, tls_cert, tls_key, broker_overrides)
    namesrv_overrides = {**(namesrv_overrides or {}), **tls}
    broker_overrides = {**(broker_overrides or {}), **tls}
    proxy_overrides = {**tls, **(proxy_overrides or {})}
    if not acl_file and (broker_overrides or {}).get("acl_enable"):
        acl_file = broker_overrides.get("acl_file", "")
    acl_file, migrate_from = access_file(data_dir, acl_file, broker_overrides)
    if acl_file:
        access = {"acl_enable": True, "acl_file": os.path.abspath(acl_file)}
        acl_file = access["acl_file"]
        namesrv_overrides = {**(namesrv_overrides or {}), **access}
        broker_overrides = {**(broker_overrides or {}), **access}
        proxy_overrides = {"acl_file": acl_file, **(proxy_overrides or {})}
    elif require_credentials:
        raise ValueError("asking for credentials needs access control: an ACL file (aclFile)")
    elif console_trust_loopback:
        raise ValueError("trusting loopback (--console-trust-loopback) is a choice of access control: without an "
                         "ACL file the console on loopback asks for nothing already")
    namesrv_ports = namesrv_ports or [NAMESRV_PORT_DEFAULT + i for i in range(namesrv_count)]
    broker_ports = broker_ports or [BROKER_PORT_DEFAULT + BROKER_PORT_STEP * i for i in range(broker_count)]
    if slave_count and slave_ports is None:
        slave_ports = [broker_ports[i] + 2 * n for i in range(broker_count) for n in range(1, slave_count + 1)]
    if remoting:
        namesrv_remoting_ports = namesrv_remoting_ports or [NAMESRV_REMOTING_PORT_DEFAULT + i
                                                            for i in range(namesrv_count)]
        broker_remoting_ports = broker_remoting_ports or [BROKER_REMOTING_PORT_DEFAULT + BROKER_PORT_STEP * i
                                                          for i in range(broker_count)]
        slave_remoting_ports = slave_remoting_ports or [broker_remoting_ports[i] + 2 * n for i in range(broker_count)
                                                        for n in range(1, slave_count + 1)]
    else:
        namesrv_remoting_ports = [0] * namesrv_count
        broker_remoting_ports = [0] * broker_count
        slave_remoting_ports = [0] * (broker_count * slave_count)
    namesrvs = tuple(NamesrvConfig(host=host, port=namesrv_ports[i], remoting_port=namesrv_remoting_ports[i],
                                   data_dir=os.path.join(data_dir, namesrv_name(i)), **(namesrv_overrides or {}))
                     for i in range(namesrv_count))
    if failover:
        controller_ports = controller_ports or [p + CONTROLLER_PORT_OFFSET for p in namesrv_ports[:namesrv_count]]
        raft = [f"{host}:{p}" for p in controller_ports]
        from rocketbox.cluster.controller.secret import default_secret_path   # hmac, hashlib: failover only
        secret_file = os.path.abspath(controller_secret_file) if controller_secret_file else \
            default_secret_path(data_dir, acl_file)
        namesrvs = tuple(dataclasses.replace(n, controller_address=raft[i],
                                             controller_peers=tuple(a for a in raft if a != raft[i]),
                                             controller_secret_file=secret_file)
                         for i, n in enumerate(namesrvs))
        # A slave may become master any moment: copy the master's topics and offsets every second.
        broker_overrides = {"controller_mode": True, "slave_sync_interval_ms": 1000, **(broker_overrides or {})}
    endpoints = tuple(n.endpoint for n in namesrvs)
    brokers = []
    for i in range(broker_count):
        name = broker_name(i)
        store = StoreConfig(store_dir=os.path.join(data_dir, name, "store"), flush_mode=flush_mode,
                            **(store_overrides or {}))
        cfg = BrokerConfig(store=store, broker_name=name, host=host, port=broker_ports[i],
                           remoting_port=broker_remoting_ports[i], namesrv_endpoints=endpoints,
                           **(broker_overrides or {}))
        if ha_ports:
            cfg = dataclasses.replace(cfg, ha_port=ha_ports[i])
        cfg.validate()
        brokers.append(cfg)
    slaves = []
    for i, master in enumerate(brokers):
        for n in range(1, slave_count + 1):
            store = dataclasses.replace(master.store, store_dir=os.path.join(
                data_dir, slave_name(master.broker_name, n), "store"))
            cfg = dataclasses.replace(master, store=store, broker_id=n, broker_role=SLAVE, ha_port=0,
                                      port=slave_ports[i * slave_count + n - 1],
                                      remoting_port=slave_remoting_ports[i * slave_count + n - 1],
                                      ha_master_address=master.ha_address,
                                      master_address=master.address)
            if failover:   # a replica like the others: the controller picks its role
                cfg = dataclasses.replace(cfg, broker_role=master.broker_role, ha_master_address="",
                                          master_address="",
                                          ha_port=slave_ha_ports[i * slave_count + n - 1] if slave_ha_ports else 0)
            cfg.validate()
            slaves.append(cfg)
    proxy = None
    if proxy_port:
        proxy = proxy_settings(host, proxy_port, endpoints, brokers, proxy_overrides)
    console = None
    if console_port:
        loopback = loopback_problem(console_host) is None
        if console_trust_loopback and not loopback:
            raise ValueError(f"the console trusts loopback (--console-trust-loopback) only when it listens there, "
                             f"not on {console_host}")
        ask = bool(acl_file) and not (console_trust_loopback and loopback)
        console = ConsoleSettings(host=console_host, port=console_port, namesrv_endpoints=tuple(endpoints),
                                  state_path=os.path.join(data_dir, STATE_FILE_NAME), acl_file=acl_file,
                                  require_credentials=ask)
        console.validate()
    return Topology(data_dir, namesrvs, tuple(brokers), tuple(slaves), proxy, console, acl_file, migrate_from,
                    require_credentials, tls.get("tls_server_mode", TLS_DISABLED), tls.get("tls_server_cert_path", ""))


def access_file(data_dir: str, acl_file: str, broker_overrides: dict) -> tuple[str, str]:
    """(the file every process checks callers against, the plain_acl.yml to migrate from): under ACL
    2.0 (authenticationEnabled and authorizationEnabled) the cluster's auth.json in authConfigPath
    (default <data dir>/auth); else ``acl_file`` (ACL 1.0, or "" without access control). ValueError
    for one of the two keys alone, or a plain_acl.yml beside ACL 2.0 without migrateAuthFromV1Enabled."""
    authn, authz = bool(broker_overrides.get("authentication_enabled")), bool(broker_overrides.get("authorization_enabled"))
    if not (authn or authz):
        return acl_file, ""
    if authn != authz:
        raise ValueError("ACL 2.0: RocketBox serves authenticationEnabled and authorizationEnabled together "
                         "(set both to true)")
    if acl_file and not broker_overrides.get("migrate_auth_from_v1_enabled"):
        raise ValueError("a cluster runs ACL 1.0 (aclEnable, a plain_acl.yml) or ACL 2.0 (authenticationEnabled), "
                         "not both: migrateAuthFromV1Enabled=true makes the plain_acl.yml's accounts ACL 2.0 users")
    directory = broker_overrides.get("auth_config_path") or os.path.join(data_dir, "auth")
    return os.path.join(os.path.abspath(directory), AUTH_FILE_NAME), os.path.abspath(acl_file) if acl_file else ""


def tls_overrides(mode: str, cert: str, key: str, broker_overrides: dict | None = None) -> dict:
    """Every door's tls_server_* settings (absolute paths; {} without TLS): the arguments, else what
    ``broker_overrides`` (broker.conf) says. ValueError for an unknown mode or a missing file name."""
    given = broker_overrides or {}
    mode = mode or given.get("tls_server_mode", "") or TLS_DISABLED
    if mode == TLS_DISABLED:
        return {}
    cert = cert or given.get("tls_server_cert_path", "")
    key = key or given.get("tls_server_key_path", "")
    check_tls(mode, cert, key)
    return {"tls_server_mode": mode, "tls_server_cert_path": os.path.abspath(cert),
            "tls_server_key_path": os.path.abspath(key)}


def proxy_settings(host: str, port: int, namesrv_endpoints: tuple[str, ...],
                   brokers: list[BrokerConfig], overrides: dict | None = None) -> ProxySettings:
    """The proxy of a cluster: it asks these NameServers, and tells consumers the brokers' delay
    levels and producers the largest body every broker stores: the brokers' record size limit (the
    smallest, should they differ) less the room a record's header, topic and properties may take,
    so that a body the proxy takes is never refused by a store."""
    settings = ProxySettings(host=host, port=port, namesrv_endpoints=tuple(namesrv_endpoints))
    if brokers:
        record_room = record_format.FIXED_SIZE + record_format.TOPIC_LENGTH_MAX + \
            record_format.PROPERTIES_LENGTH_MAX
        settings = dataclasses.replace(
            settings, max_body_size=min(b.store.message_size_bytes_max for b in brokers) - record_room,
            retry_delays_ms=tuple(parse_levels(brokers[0].store.message_delay_levels)))
    settings = dataclasses.replace(settings, **(overrides or {}))
    settings.validate()
    return settings


# A broker process silent this long is hung: the supervisor kills and restarts it. Generous,
# because a flush worker's msync of a large dirty range can legitimately take seconds.
HEARTBEAT_TIMEOUT_S_DEFAULT = 30.0
# First-boot waves (ChildSpec.start_order): each starts once the ones before it are ready. The doors of
# their own (proxy, console, metrics exporter) need nothing to boot and nothing waits for them: they
# start with the NameServers, not awaited.
START_NAMESRVS, START_MASTERS, START_SLAVES, START_WORKERS = range(4)
# What the supervisor imports before it forks a server role (role_fork.py): what every one of them
# imports, so its pages are shared; each imports its own modules after the fork, so no role forked
# later carries another's (RSS counts every page a child shares with the supervisor in that child).
# The broker's workers are forked with their own modules imported (three of a group share them).
SERVER_PRELOAD = ("rocketbox.cluster.procs.runner", "rocketbox.cluster.zmq_transport")
# Ready within: a child's imports and listeners (seconds on a loaded two-core machine, with a
# cluster's children starting side by side); a broker's recovery of its store; a door's imports.
READY_TIMEOUT_S = 30.0
BROKER_READY_TIMEOUT_S = 120.0
DOOR_READY_TIMEOUT_S = 60.0
# The child that serves the console and the metrics endpoint (procs/web.py).
WEB_CHILD = "web"


def _heartbeat(cfg, role: str, timeout_s: float) -> dict:
    return {"heartbeat_path": control_path(cfg.store.store_dir),
            "heartbeat_offset": heartbeat_offset(role), "heartbeat_timeout_s": timeout_s}


def child_specs(topology: Topology, *, restart_backoff_initial_s: float = 0.1,
                heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S_DEFAULT) -> list[ChildSpec]:
    """The supervisor's table. On first boot each start order waits for the ones before it and starts
    side by side (``start_gate.py``): the NameServers, with the proxy, console and metrics exporter
    beside them (they ask the cluster only when asked, so nothing waits for them); the masters; the
    slaves (after their masters, as the controller names the first replica master); every group's
    workers (after its broker recovered the store)."""
    specs = []
    common = {"backoff_initial_s": restart_backoff_initial_s, "ready_timeout_s": READY_TIMEOUT_S}
    for i, ns in enumerate(topology.namesrvs):
        specs.append(ChildSpec(name=namesrv_name(i), module="rocketbox.cluster.procs.namesrv",
                               args=("--config-json", to_json(ns)), role="namesrv", start_order=START_NAMESRVS,
                               preload=SERVER_PRELOAD, **common))
    for cfg in topology.brokers + topology.slaves:
        config_json = to_json(cfg)
        group = group_name(cfg)
        specs.append(ChildSpec(name=group, module="rocketbox.cluster.procs.broker",
                               args=("--config-json", config_json), role="broker", group=group, leader=True,
                               preload=SERVER_PRELOAD,
                               start_order=START_SLAVES if cfg.is_slave else START_MASTERS,
                               **{**common, "ready_timeout_s": BROKER_READY_TIMEOUT_S},
                               **_heartbeat(cfg, "broker", heartbeat_timeout_s)))
        for role in BROKER_WORKER_ROLES:
            specs.append(ChildSpec(name=f"{group}-{role}", module=f"rocketbox.cluster.procs.{role}",
                                   args=("--config-json", config_json), role=role, group=group,
                                   start_order=START_WORKERS, **common,
                                   **_heartbeat(cfg, role, heartbeat_timeout_s)))
    if topology.proxy is not None:
        # It needs nothing to boot (it asks the NameServers when clients ask it).
        # HOME: the rocketmq 5 client package whose generated protos the proxy loads opens its log at
        # ~/logs/rocketmq_python/rocketmq_client.log if its __init__ runs (proxy/protos.py defers it);
        # should it, with the data dir as HOME the log lands in <data dir>/logs/, not in the user's home.
        specs.append(ChildSpec(name="proxy", module="rocketbox.cluster.procs.proxy",
                               args=("--config-json", topology.proxy.to_json()), role="proxy",
                               start_order=START_NAMESRVS, awaited=False, preload=SERVER_PRELOAD,
                               env={"HOME": topology.data_dir},
                               **{**common, "ready_timeout_s": DOOR_READY_TIMEOUT_S}))
    exporter = exporter_settings(topology)
    if topology.console is not None or exporter is not None:
        # The console and the metrics endpoint, one process serving both (procs/web.py): they too ask
        # the cluster only when asked (a page opened, a scrape).
        console_json = topology.console.to_json() if topology.console is not None else None
        web_json = web_config_json(console_json, exporter.to_json() if exporter is not None else None)
        specs.append(ChildSpec(name=WEB_CHILD, module="rocketbox.cluster.procs.web", args=("--config-json", web_json),
                               role="web", start_order=START_NAMESRVS, awaited=False, preload=SERVER_PRELOAD,
                               **{**common, "ready_timeout_s": DOOR_READY_TIMEOUT_S}))
    return specs


def web_config_json(console_json: str | None, metrics_json: str | None) -> str:
    """The web process's config (procs/web.py): an object of each door's settings (their to_json's
    object), null for a door that does not run."""
    return json.dumps({"console": json.loads(console_json) if console_json else None,
                       "metrics": json.loads(metrics_json) if metrics_json else None}, sort_keys=True)


def exporter_settings(topology: Topology) -> ExporterSettings | None:
    """The metrics exporter of this host's part of the cluster: its brokers, on the first one's
    metricsPromExporterHost:Port; None without brokers or with metricsExporterType DISABLE."""
    brokers = topology.brokers + topology.slaves
    if not brokers or brokers[0].metrics_exporter_type != METRICS_PROM:
        return None
    first = brokers[0]
    acl_file = first.acl_file if first.acl_enable else ""
    host = first.metrics_prom_exporter_host
    return ExporterSettings(host=host, port=first.metrics_prom_exporter_port,
                            cluster_name=first.cluster_name,
                            brokers=tuple(BrokerTarget(b.address, b.broker_name, b.broker_id) for b in brokers),
                            namesrvs=tuple(NamesrvTarget(f"{n.host}:{n.port}", namesrv_name(i))
                                           for i, n in enumerate(topology.namesrvs)),
                            state_path=os.path.join(topology.data_dir, STATE_FILE_NAME), acl_file=acl_file,
                            require_credentials=bool(acl_file) and (topology.require_credentials
                                                                    or loopback_problem(host) is not None))


# ---------------------------------------------------------------- one role per host (cluster up --role)
# The same processes spread over several hosts: one host runs the NameServers, each other host
# runs a broker group (master and/or slaves) that registers with them. Every config keeps its
# host, which is both where it binds and the address it advertises, so it must be an address the
# other hosts reach it on.

def namesrv_addresses_to_endpoints(addresses: str) -> tuple[str, ...]:
    """``host:port;host:port`` (the --namesrv / ROCKETBOX_NAMESRV form) as tcp:// endpoints."""
    return namesrv_endpoints(addresses)


def namesrv_only(topology: Topology) -> Topology:
    """Just the NameServers of ``topology``: brokers elsewhere register with them."""
    return dataclasses.replace(topology, brokers=(), slaves=(), proxy=None, console=None)


def brokers_only(topology: Topology, namesrv_endpoints: tuple[str, ...]) -> Topology:
    """Just the broker groups of ``topology``, registering with NameServers elsewhere."""
    if not namesrv_endpoints:
        raise ValueError("a broker group needs the NameServers it registers with")

    def register_there(brokers):
        return tuple(dataclasses.replace(b, namesrv_endpoints=tuple(namesrv_endpoints)) for b in brokers)
    return dataclasses.replace(topology, namesrvs=(), brokers=register_there(topology.brokers),
                               slaves=register_there(topology.slaves), proxy=None, console=None)


def _renamed(cfg: BrokerConfig, name: str, data_dir: str) -> BrokerConfig:
    renamed = dataclasses.replace(cfg, broker_name=name)
    store = dataclasses.replace(cfg.store, store_dir=os.path.join(data_dir, group_name(renamed), "store"))
    renamed = dataclasses.replace(renamed, store=store)
    renamed.validate()
    return renamed


def with_broker_names(topology: Topology, names: list[str]) -> Topology:
    """Groups named ``names`` in order instead of broker-a, broker-b, ...: two hosts each running
    one group must not both call theirs broker-a (the NameServer would take them for one group)."""
    if len(names) != len(topology.brokers) or len(set(names)) != len(names):
        raise ValueError(f"{len(topology.brokers)} distinct broker names are needed, got {names}")
    new_name = {b.broker_name: name for b, name in zip(topology.brokers, names)}
    return dataclasses.replace(
        topology,
        brokers=tuple(_renamed(b, new_name[b.broker_name], topology.data_dir) for b in topology.brokers),
        slaves=tuple(_renamed(s, new_name[s.broker_name], topology.data_dir) for s in topology.slaves))


def remote_master_slave(data_dir: str, *, broker_name: str, broker_id: int, host: str, port: int,
                        master_address: str, namesrv_endpoints: tuple[str, ...], master_ha_address: str = "",
                        flush_mode: str = ASYNC_FLUSH, store_overrides: dict | None = None,
                        broker_overrides: dict | None = None) -> Topology:
    """One slave group (``<broker_name>-s<broker_id>``) whose master runs on another host.

    ``master_address`` is the master's request host:port (config sync); its HA endpoint is
    ``master_ha_address``, by default the master's port + 1 as BrokerConfig.ha_address has it."""
    data_dir = os.path.abspath(data_dir)
    broker_overrides = dict(broker_overrides or {})
    acl_file, migrate_from = access_file(
        data_dir, broker_overrides.get("acl_file", "") if broker_overrides.get("acl_enable") else "", broker_overrides)
    if acl_file:
        broker_overrides.update(acl_enable=True, acl_file=acl_file)
    if not master_ha_address:
        master_host, master_port = master_address.rsplit(":", 1)
        master_ha_address = f"{master_host}:{int(master_port) + 1}"
    store = StoreConfig(store_dir=os.path.join(data_dir, slave_name(broker_name, broker_id), "store"),
                        flush_mode=flush_mode, **(store_overrides or {}))
    cfg = BrokerConfig(store=store, broker_name=broker_name, host=host, port=port,
                       namesrv_endpoints=tuple(namesrv_endpoints), **(broker_overrides or {}))
    cfg = dataclasses.replace(cfg, broker_id=broker_id, broker_role=SLAVE, ha_port=0,
                              ha_master_address=master_ha_address, master_address=master_address)
    cfg.validate()
    return Topology(data_dir, (), (), (cfg,), acl_file=cfg.acl_file if cfg.acl_enable else "",
                    auth_migrate_from=migrate_from)


def prepare_access_control(topology: Topology) -> None:
    """Before a cluster with access control starts: its ACL file must read (AclFormatError, a
    ValueError, with the reason), and the cluster's CURVE key pair is made next to it if missing."""
    if not topology.acl_file:
        return
    # Here, not at the top: a cluster without access control never loads the ACL modules (YAML, CURVE).
    from rocketbox.cluster.acl.acl_file import read_acl_file
    from rocketbox.cluster.acl.auth_migration import migrate_plain_acl
    from rocketbox.cluster.acl.auth_store import ensure as ensure_auth_file, is_auth_file
    from rocketbox.cluster.acl.curve import server_key_pair
    if is_auth_file(topology.acl_file):
        first = (topology.brokers + topology.slaves + (None,))[0]
        migrated = migrate_plain_acl(topology.auth_migrate_from) if topology.auth_migrate_from else []
        ensure_auth_file(topology.acl_file, first.cluster_name if first else "",
                         first.init_authentication_user if first else "",
                         first.inner_client_authentication_credentials if first else "", migrated)
    read_acl_file(topology.acl_file)
    server_key_pair(topology.acl_file, create=True)


def exposed_secrets(topology: Topology) -> list[str]:
    """A warning for each secret of the cluster other local users may read or change (``cluster up``
    prints them; each process that reads one logs it): the ACL file and its CURVE secret keys, the TLS
    key, the controller secret."""
    found = []
    if topology.acl_file:
        from rocketbox.cluster.acl.acl_file import secret_exposures
        found = secret_exposures(topology.acl_file)
    others = {(cfg.tls_server_key_path, "the TLS key") for cfg in (*topology.namesrvs, *topology.brokers)
              if cfg.tls_server_key_path}
    others |= {(n.controller_secret_file, "the controller secret") for n in topology.namesrvs if n.controller_address}
    return found + [warning for path, what in sorted(others) if (warning := exposure(path, what))]


def prepare_controller_secret(topology: Topology) -> None:
    """Before a cluster with failover starts: its controller secret is made if missing (kept if
    there: every host of a cluster must use the same one)."""
    paths = sorted({n.controller_secret_file for n in topology.namesrvs if n.controller_address})
    if paths:
        from rocketbox.cluster.controller.secret import make_secret
    for path in paths:
        make_secret(path)


def exposure_problem(host: str, topology: Topology, insecure: bool) -> str | None:
    """Why ``cluster up`` refuses to serve on ``host``: an address other hosts reach, with no access
    control and no ``--insecure``."""
    if topology.acl_file or insecure or loopback_problem(host) is None:
        return None
    return (f"--host {host} is reachable from other hosts, and anyone reaching it could produce, consume, reset "
            f"offsets and delete topics: turn access control on (--acl-file plain_acl.yml, or aclEnable=true and "
            f"aclFile in broker.conf) or accept that with --insecure")


def transport_warning(host: str, topology: Topology) -> str | None:
    """What ``cluster up`` says about a ``host`` other hosts reach with access control but no TLS."""
    if not topology.acl_file or topology.tls_mode != TLS_DISABLED or loopback_problem(host) is None:
        return None
    return (f"--host {host} is reachable from other hosts and its remoting doors speak plain TCP: signatures "
            f"authenticate requests but do not encrypt them, and a captured request can be replayed as another "
            f"request code (a remoting signature does not cover it). Turn TLS on: cluster tls, then "
            f"--tls-mode enforcing (or tls.server.mode in broker.conf)")

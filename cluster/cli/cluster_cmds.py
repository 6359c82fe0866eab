"""``cluster up``, ``status`` and ``down``: a supervised cluster on this host (or one role of a
cluster spread over several hosts)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from rocketbox.cluster.cli import setting_sources, up_config, up_settings
from rocketbox.cluster.cli.busy_ports import busy_port_problem
from rocketbox.cluster.cli.common import namesrv_env, new_console, print_json, table
from rocketbox.cluster.cli.up_settings import STORE_PROFILES, SWITCH_OFF
from rocketbox.cluster.config import (ASYNC_FLUSH, ASYNC_MASTER, BROKER_PORT_DEFAULT, BROKER_REMOTING_PORT_DEFAULT,
                                      METRICS_PORT_DEFAULT, METRICS_PROM,
                                      NAMESRV_PORT_DEFAULT, NAMESRV_REMOTING_PORT_DEFAULT, SYNC_FLUSH, SYNC_MASTER)
from rocketbox.cluster.console.settings import CONSOLE_PORT_DEFAULT
from rocketbox.cluster.procs.runner import (LOG_BACKUPS_DEFAULT, LOG_BACKUPS_ENV, LOG_MAX_BYTES_DEFAULT,
                                             LOG_MAX_BYTES_ENV)
from rocketbox.cluster.proxy.settings import GRPC_FRONTS, PROXY_PORT_DEFAULT
from rocketbox.cluster.supervision.detach import spawn_detached
from rocketbox.cluster.supervision.errors import SupervisorError
from rocketbox.cluster.supervision.lifecycle import python_module_command
from rocketbox.cluster.supervision.run_state import LOGS_DIR_NAME, STATE_FILE_NAME, read_state_file
from rocketbox.cluster.supervision.titles import set_title, supervisor_title


def _topology_from_args(args):
    from rocketbox.cluster.topology import build_topology
    files = getattr(args, "file_settings", None) or up_config.NO_FILES
    store = {**up_settings.store_overrides(args), **files.store}
    return build_topology(args.data_dir, namesrv_count=args.namesrvs, broker_count=args.brokers,
                          flush_mode=SYNC_FLUSH if args.flush_mode == "sync" else ASYNC_FLUSH, host=args.host,
                          namesrv_ports=[args.namesrv_port + i for i in range(args.namesrvs)],
                          broker_ports=[args.broker_port + 10 * i for i in range(args.brokers)],
                          store_overrides=store, slave_count=args.slaves, failover=args.failover,
                          remoting=not args.no_remoting,
                          namesrv_remoting_ports=[args.namesrv_remoting_port + i for i in range(args.namesrvs)],
                          broker_remoting_ports=[args.broker_remoting_port + 10 * i for i in range(args.brokers)],
                          namesrv_overrides=files.namesrv,
                          proxy_port=None if args.no_proxy else args.proxy_port,
                          proxy_overrides={"grpc_front": args.grpc_front},
                          console_port=None if args.no_console else args.console_port, console_host=args.console_host,
                          console_trust_loopback=args.console_trust_loopback, acl_file=args.acl_file or "",
                          controller_secret_file=args.controller_secret or "", **tls_arguments(args),
                          broker_overrides={**files.broker, **_metrics_overrides(args),
                                            "broker_role": SYNC_MASTER if args.broker_role == "sync" else ASYNC_MASTER,
                                            "auto_create_topic_enabled": not args.no_auto_create_topic})


def tls_arguments(args) -> dict:
    """build_topology's TLS arguments from --tls-mode/--tls-cert/--tls-key; the pair ``cluster tls``
    made in the data dir when no file is named."""
    mode = args.tls_mode or ""
    cert, key = args.tls_cert or "", args.tls_key or ""
    if mode and mode != "disabled" and not (cert or key):
        from rocketbox.cluster.tls import CERT_FILE, KEY_FILE, tls_directory   # ssl: only when TLS is asked for
        cert = os.path.join(tls_directory(args.data_dir), CERT_FILE)
        key = os.path.join(tls_directory(args.data_dir), KEY_FILE)
    return {"tls_mode": mode, "tls_cert": cert, "tls_key": key}


def _metrics_overrides(args) -> dict:
    """The brokers' metrics settings from --no-metrics / --metrics-port (the exporter: topology.py)."""
    if args.no_metrics:
        return {"metrics_exporter_type": "DISABLE"}
    return {"metrics_exporter_type": METRICS_PROM, "metrics_prom_exporter_port": args.metrics_port}


def _registered_namesrvs(args) -> tuple[str, ...]:
    """Where a broker-only host's groups register: --namesrv, else ROCKETBOX_NAMESRV (never the
    default local address: a broker on its own host has no NameServer beside it)."""
    from rocketbox.cluster.topology import namesrv_addresses_to_endpoints
    return namesrv_addresses_to_endpoints(args.namesrv or os.environ.get("ROCKETBOX_NAMESRV", ""))


def _broker_names(args) -> list[str]:
    return [name.strip() for name in (args.broker_name or "").split(",") if name.strip()]


def role_problem(args) -> str | None:
    """What is wrong with an ``up`` command line's role options, before anything starts."""
    if args.role != "broker" and (args.slave_id or args.master_address):
        return "--slave-id and --master-address go with --role broker"
    if args.role == "namesrv" and args.broker_name:
        return "--broker-name goes with --role broker or all"
    if args.role == "broker" and not _registered_namesrvs(args):
        return "--role broker needs the NameServers to register with: --namesrv host:port;host:port"
    if bool(args.slave_id) != bool(args.master_address):
        return "a slave of a master elsewhere needs both --slave-id N (>= 1) and --master-address host:port"
    if args.slave_id and len(_broker_names(args)) != 1:
        return "a slave of a master elsewhere needs --broker-name, its master's broker name"
    return None


def topology_for_role(args):
    """The part of the cluster ``--role`` asks for on this host (all of it by default)."""
    from rocketbox.cluster.topology import (brokers_only, namesrv_only, remote_master_slave, tls_overrides,
                                            with_broker_names)
    files = getattr(args, "file_settings", None) or up_config.NO_FILES
    if args.slave_id:
        return remote_master_slave(
            args.data_dir, broker_name=_broker_names(args)[0], broker_id=args.slave_id, host=args.host,
            port=args.broker_port, master_address=args.master_address, master_ha_address=args.master_ha_address,
            namesrv_endpoints=_registered_namesrvs(args),
            flush_mode=SYNC_FLUSH if args.flush_mode == "sync" else ASYNC_FLUSH,
            store_overrides={**up_settings.store_overrides(args), **files.store},
            broker_overrides={**files.broker, **_metrics_overrides(args),
                              **({"acl_enable": True, "acl_file": os.path.abspath(args.acl_file)} if args.acl_file
                                 else {}),
                              **tls_overrides(*tls_arguments(args).values(), files.broker),
                              "remoting_port": 0 if args.no_remoting else args.broker_remoting_port})
    names = _broker_names(args)
    if names:
        args = argparse.Namespace(**{**vars(args), "brokers": len(names)})
    topology = _topology_from_args(args)
    if names:
        topology = with_broker_names(topology, names)
    if args.role == "namesrv":
        return namesrv_only(topology)
    if args.role == "broker":
        return brokers_only(topology, _registered_namesrvs(args))
    return topology


def _topology_namesrv_env(topology) -> str:
    """The NameServers clients of this (part of the) cluster use: its own, else those its brokers
    register with."""
    if topology.namesrvs:
        return topology.namesrv_env
    endpoints = {e for b in topology.brokers + topology.slaves for e in b.namesrv_endpoints}
    return ";".join(sorted(e[len("tcp://"):] if e.startswith("tcp://") else e for e in endpoints))


# "endpoint" is the native (ZeroMQ) door, "remoting" RocketMQ's protocol for its clients.
ENDPOINT_COLUMNS = ["name", "role", "pid", "state", "endpoint", "remoting", "restarts"]


def _endpoint_rows(state: dict) -> list[list]:
    rows = []
    for child in state.get("children", []):
        info = child.get("ready_info") or {}
        rows.append([child.get("name"), child.get("role"), child.get("pid"), child.get("state"),
                     info.get("endpoint", ""), info.get("remoting", ""), child.get("restarts", 0)])
    return rows


def remoting_namesrv_addr(state: dict) -> str:
    """RocketMQ clients' namesrvAddr for this cluster ("" without a remoting door)."""
    return ";".join(info["remoting"] for child in state.get("children", []) if child.get("role") == "namesrv"
                    for info in [child.get("ready_info") or {}] if info.get("remoting"))


def proxy_endpoints(state: dict) -> str:
    """RocketMQ 5 clients' endpoints (the gRPC proxy's host:port; "" without a proxy)."""
    return ";".join(info["endpoint"][len("grpc://"):] for child in state.get("children", [])
                    if child.get("role") == "proxy"
                    for info in [child.get("ready_info") or {}] if str(info.get("endpoint", "")).startswith("grpc://"))


def cmd_up(args) -> int:
    from rocketbox.cluster.topology import (child_specs, exporter_settings, exposed_secrets, exposure_problem,
                                            prepare_access_control, prepare_controller_secret, transport_warning)
    # The children (and a detached supervisor) inherit these; each rotates its own log.
    for value, name in ((args.log_max_bytes, LOG_MAX_BYTES_ENV), (args.log_backups, LOG_BACKUPS_ENV)):
        if value is not None:
            os.environ[name] = str(value)
    for change in getattr(args, "changed_settings", ()):
        print(f"note: {change}", file=sys.stderr)
    topology = topology_for_role(args)
    exposed = exposure_problem(args.host, topology, args.insecure)
    if exposed:
        print(f"error: {exposed}", file=sys.stderr)
        return 1
    plain = transport_warning(args.host, topology)
    if plain:
        print(f"warning: {plain}", file=sys.stderr)
    prepare_access_control(topology)
    prepare_controller_secret(topology)
    for warning in exposed_secrets(topology):   # the processes log them too
        print(f"warning: {warning}", file=sys.stderr)
    busy = busy_port_problem(topology, exporter_settings(topology))
    if busy:
        print(f"error: {busy}", file=sys.stderr)
        return 1
    # A flag or the broker.conf given now wins over a live change of the same setting (setting_sources.py).
    for note in setting_sources.drop_superseded_live(topology.brokers + topology.slaves, args):
        print(f"note: {note}", file=sys.stderr)
    specs = child_specs(topology)
    up_settings.save(args)
    started = time.monotonic()
    if args.detach:
        specs_path = os.path.join(topology.data_dir, "children.json")
        with open(specs_path, "w") as f:
            json.dump([s.to_dict() for s in specs], f)
        consoles = []   # the banner's library (rich) loads while the cluster boots, not before it
        try:
            pid = spawn_detached(python_module_command("rocketbox.cluster.procs.supervisor", "--data-dir",
                                                        topology.data_dir, "--specs", specs_path), topology.data_dir,
                                 ready_timeout_s=args.ready_timeout_s,
                                 while_booting=lambda: consoles.append(_banner_console()),
                                 fork_module="rocketbox.cluster.procs.supervisor")
        except SupervisorError as exc:
            (consoles or [new_console()])[0].print(f"[red]cluster failed to start:[/red] {exc}")
            return 1
        state = read_state_file(topology.data_dir) or {}
        _print_up_banner((consoles or [new_console()])[0], state, time.monotonic() - started, pid,
                         topology.data_dir, _topology_namesrv_env(topology))
        args.nothing_to_tidy = True   # the program leaves without tearing its interpreter down (cli.run)
        return 0
    from rocketbox.cluster.supervision.arbiter import Supervisor
    console = new_console()
    supervisor = Supervisor(specs, topology.data_dir)
    set_title(supervisor_title(topology.data_dir))   # this process is the supervisor from here on
    try:
        supervisor.start()
    except SupervisorError as exc:
        console.print(f"[red]cluster failed to start:[/red] {exc}")
        return 1
    _print_up_banner(console, supervisor.snapshot(), time.monotonic() - started, os.getpid(), topology.data_dir,
                     _topology_namesrv_env(topology))
    if args.no_live:
        code = supervisor.run_forever()
    else:
        from rich.live import Live
        with Live(console=console, refresh_per_second=2, transient=True) as live:
            while supervisor.state not in ("stopped", "failed"):
                supervisor.step(0.5)
                live.update(table("RocketBox (Ctrl-C stops)", ENDPOINT_COLUMNS,
                                  _endpoint_rows(supervisor.snapshot())))
        code = 0 if not supervisor.halt_reason else 1
    console.print(f"cluster stopped{': ' + supervisor.halt_reason if supervisor.halt_reason else ''}")
    return code


def _banner_console():
    """The console the banner is printed on, with rich's first rendering (its lazy imports, style and
    width caches: ~50 ms) done on a banner-shaped throwaway while the supervisor boots, not after."""
    console = new_console()
    with console.capture():
        console.print(table("RocketBox is up", ENDPOINT_COLUMNS, [["broker-a", "broker", "1", "running",
                                                                   "tcp://127.0.0.1:1", "127.0.0.1:1", "0"]]))
        _print_data_dir(console, "/")
        console.print("export ROCKETBOX_NAMESRV='127.0.0.1:1'")
    return console


def _print_up_banner(console, state: dict, ready_s: float, supervisor_pid: int, data_dir: str,
                     planned_env: str = "") -> None:
    console.print(table(f"RocketBox is up in {ready_s:.2f} s (supervisor pid {supervisor_pid})",
                         ENDPOINT_COLUMNS, _endpoint_rows(state)))
    _print_data_dir(console, data_dir)
    console.print(f"export ROCKETBOX_NAMESRV='{namesrv_env(state) or planned_env}'")
    remoting = remoting_namesrv_addr(state)
    if remoting:
        console.print(f"RocketMQ clients: namesrvAddr {remoting}")
    grpc = proxy_endpoints(state)
    if grpc:
        console.print(f"RocketMQ 5 clients (gRPC): endpoints {grpc}")
    web = [child.get("ready_info") or {} for child in state.get("children", []) if child.get("role") == "web"]
    if web and web[0].get("console"):
        login = " (log in with an admin account's accessKey and secretKey)" if web[0].get("credentials") else ""
        console.print(f"web console: {web[0]['console']}{login}")
    if web and web[0].get("metrics"):
        console.print(f"Prometheus metrics: {web[0]['metrics']}")


def _print_data_dir(console, data_dir: str) -> None:
    console.print(f"data dir: {data_dir} (logs: {os.path.join(data_dir, LOGS_DIR_NAME)}, cluster logs NAME)",
                  markup=False, highlight=False)


def cmd_status(args) -> int:
    state = read_state_file(args.data_dir)
    if state is None:
        print(f"no cluster state in {os.path.join(args.data_dir, STATE_FILE_NAME)}", file=sys.stderr)
        return 1
    pid = state.get("supervisor_pid")
    alive = _pid_alive(pid)
    # Children die with their supervisor: without it there is no broker to ask.
    from rocketbox.cluster.cli import broker_roles   # the wire protocol's modules: status only
    brokers = broker_roles.broker_rows(state) if alive else []
    if args.json:
        print_json({**state, "supervisor_alive": alive, "brokers": brokers})   # data_dir is in the state
        return 0 if alive else 1
    console = new_console()
    console.print(table(f"supervisor pid {pid} ({'running' if alive else 'not running'}), "
                         f"state {state.get('state')}",
                         ENDPOINT_COLUMNS, _endpoint_rows(state)))
    _print_data_dir(console, os.path.abspath(args.data_dir))
    if brokers:
        console.print(table(broker_roles.table_title(brokers), broker_roles.COLUMNS,
                            broker_roles.table_rows(brokers)))
    return 0 if alive else 1


def _pid_alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
        return True
    except (ProcessLookupError, PermissionError, ValueError):
        return False


def cmd_down(args) -> int:
    state = read_state_file(args.data_dir)
    pid = (state or {}).get("supervisor_pid")
    if not _pid_alive(pid):
        print("no running cluster in", args.data_dir)
        return 0
    os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + args.timeout_s
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _pid_alive(pid):
        print(f"supervisor {pid} still running after {args.timeout_s} s", file=sys.stderr)
        return 1
    print("cluster stopped")
    return 0


def add_shape_arguments(parser) -> None:
    """The flags that say what cluster ``up`` starts (``config show`` takes them too). Those a data
    dir remembers default to None here; up_settings.resolve fills them in."""
    parser.add_argument("-c", "--config", metavar="BROKER_CONF",
                        help="broker.conf: RocketMQ's keys (brokerClusterName, flushDiskType, fileReservedTime, ...) "
                             "for every broker; flags given here win; remembered by the data dir")
    parser.add_argument("--namesrv-config", metavar="NAMESRV_CONF", help="namesrv.conf: the NameServers' keys")
    parser.add_argument("--namesrvs", type=int, help="NameServers to start (default 1)")
    parser.add_argument("--brokers", type=int, help="broker groups (masters) to start (default 1)")
    parser.add_argument("--slaves", type=int, help="slaves per broker group (replicas of its master)")
    parser.add_argument("--failover", action="store_true", default=None,
                        help="automatic failover: a controller (Raft) in every NameServer elects each group's master "
                             "among its replicas (use with --slaves)")
    parser.add_argument("--controller-secret", metavar="FILE",
                        help="with --failover: the controller nodes' shared secret (made if missing; default "
                             "controller.secret beside --acl-file, else in the data dir); give every host of a "
                             "cluster a copy of the same file")
    parser.add_argument("--broker-role", choices=("async", "sync"),
                        help="masters replicate asynchronously (default), or answer a send once a slave has it")
    parser.add_argument("--flush-mode", choices=("async", "sync"), help="default async")
    parser.add_argument("--no-auto-create-topic", action="store_true", default=None,
                        help="a send to a topic that does not exist is refused (RocketMQ's autoCreateTopicEnable=false)")
    parser.add_argument("--host", help="the address every process here binds and advertises (reachable from other "
                                       "hosts; default 127.0.0.1)")
    parser.add_argument("--role", choices=("all", "namesrv", "broker"),
                        help="namesrv: only NameServers; broker: only broker groups, registering with --namesrv")
    parser.add_argument("--broker-name", help="name(s) of this host's broker group(s), comma separated "
                                              "(default broker-a, broker-b, ...)")
    parser.add_argument("--slave-id", type=int,
                        help="with --role broker: start only slave N of --broker-name, whose master is elsewhere")
    parser.add_argument("--master-address", help="that master's host:port")
    parser.add_argument("--master-ha-address", help="that master's HA host:port (default its port + 1)")
    parser.add_argument("--namesrv-port", type=int, help=f"default {NAMESRV_PORT_DEFAULT}")
    parser.add_argument("--broker-port", type=int, help=f"default {BROKER_PORT_DEFAULT}")
    parser.add_argument("--namesrv-remoting-port", type=int,
                        help=f"RocketMQ clients' NameServer port (namesrvAddr), default {NAMESRV_REMOTING_PORT_DEFAULT}")
    parser.add_argument("--broker-remoting-port", type=int,
                        help=f"RocketMQ clients' broker port (listenPort), default {BROKER_REMOTING_PORT_DEFAULT}; "
                             f"+10 a group, slave n at + 2n")
    parser.add_argument("--no-remoting", action="store_true", default=None,
                        help="serve only RocketBox's own clients (no RocketMQ remoting protocol)")
    parser.add_argument("--metrics-port", type=int,
                        help=f"Prometheus metrics on http://127.0.0.1:PORT/metrics (metricsPromExporterPort), "
                             f"default {METRICS_PORT_DEFAULT}")
    parser.add_argument("--no-metrics", action="store_true", default=None,
                        help="no metrics exporter, no request timing (metricsExporterType=DISABLE)")
    parser.add_argument("--proxy-port", type=int,
                        help=f"RocketMQ 5 clients (gRPC) reach the proxy on 127.0.0.1:PORT (--host), "
                             f"default {PROXY_PORT_DEFAULT}")
    parser.add_argument("--no-proxy", action="store_true", default=None,
                        help="no gRPC proxy (RocketMQ 5 clients cannot connect)")
    parser.add_argument("--grpc-front", choices=GRPC_FRONTS,
                        help="the proxy's gRPC server: native (default; HTTP/2 in the C helper) or grpcio (grpc.aio; "
                             "with TLS the proxy always uses grpcio)")
    parser.add_argument("--console-port", type=int,
                        help=f"the web console on http://127.0.0.1:PORT/, default {CONSOLE_PORT_DEFAULT}")
    parser.add_argument("--console-host", help="the console's address (default 127.0.0.1; another than loopback "
                                               "needs --acl-file: the console then asks for an admin's credentials)")
    parser.add_argument("--console-trust-loopback", action="store_true", default=None,
                        help="with --acl-file, a console on loopback serves without asking for an admin's "
                             "credentials (a single-user machine: anyone who reaches 127.0.0.1 is admin)")
    parser.add_argument("--acl-file", help="access control on every door: RocketMQ's plain_acl.yml (accounts, "
                                           "permissions, white addresses; reread when it changes); the ZeroMQ door's "
                                           "CURVE keys live in curve/ beside it (made if missing); a data dir made "
                                           "without it takes it later, and remembers it")
    parser.add_argument("--no-acl", action="store_true",
                        help="access control off, for a data dir that was started with --acl-file")
    parser.add_argument("--tls-mode", choices=("disabled", "permissive", "enforcing"),
                        help="TLS on every remoting door and the gRPC proxy (RocketMQ's tls.server.mode): permissive "
                             "serves TLS and plain TCP on one port, enforcing TLS only (default disabled)")
    parser.add_argument("--tls-cert", help="the certificate (PEM) the doors present; default <data dir>/tls/server.crt "
                                           "(cluster tls makes one)")
    parser.add_argument("--tls-key", help="its private key (PEM); default <data dir>/tls/server.key")
    parser.add_argument("--insecure", action="store_true", default=None,
                        help="serve a --host other hosts reach without access control")
    parser.add_argument("--no-console", action="store_true", default=None, help="no web console")
    parser.add_argument("--store-sizes", choices=sorted(STORE_PROFILES),
                        help="dev (default): 64 MiB CommitLog segments, a 42 MB IndexFile; rocketmq: RocketMQ's "
                             "1 GiB and 401 MB, for servers")
    parser.add_argument("--commitlog-file-size-bytes", type=int, help="overrides the profile's segment size")
    for name, flag in SWITCH_OFF.items():   # a remembered switch can be turned back off at a later up
        parser.add_argument(flag, dest=name, action="store_const", const=False,
                            help=f"undo {'--' + name.replace('_', '-')} remembered by the data dir")


def add_parsers(sub) -> None:
    """The subcommands up, status and down."""
    up = sub.add_parser("up", help="start NameServers and brokers under a supervisor")
    add_shape_arguments(up)
    up.add_argument("--detach", action="store_true", help="return once the cluster is ready")
    up.add_argument("--no-live", action="store_true", help="no live status view (logs only)")
    up.add_argument("--ready-timeout-s", type=float, default=60.0, help="how long to wait for every process")
    up.add_argument("--log-max-bytes", type=int,
                    help=f"rotate a process's log at this size (default {LOG_MAX_BYTES_DEFAULT // (1024 * 1024)} MiB)")
    up.add_argument("--log-backups", type=int,
                    help=f"rotated logs kept per process (default {LOG_BACKUPS_DEFAULT}): the cap is "
                         f"(backups + 1) x max bytes")
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="every process (the supervisor's view) and each broker's role, id, "
                                           "epoch and replication lag (the brokers' own answers)")
    status.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    status.set_defaults(func=cmd_status)

    down = sub.add_parser("down", help="stop a detached cluster")
    down.add_argument("--timeout-s", type=float, default=30.0, help="how long to wait for the supervisor to stop")
    down.set_defaults(func=cmd_down)

"""The ``cluster`` command: bring a cluster up and down, and talk to it.

    cluster up [--data-dir D] [--namesrvs N] [--brokers N] [--slaves N] [--flush-mode async|sync]
               [--broker-role async|sync] [--failover] [--detach]
               [--role all|namesrv|broker] [--broker-name NAME[,NAME]] [--host ADDR]
               [--slave-id N --master-address HOST:PORT [--master-ha-address HOST:PORT]]
    cluster status | down
    cluster topic create|update|list|route|delete
    cluster send | consume
    cluster query --id OFFSET_MSG_ID | --msg-id ID --topic T | --key K --topic T [--begin --end --max]
                | --topic T [--broker B] --queue Q --offset N        (each with every group's consume status)
    cluster dlq list GROUP | show GROUP MSG_ID | resend GROUP (--msg-id ID | --all)
    cluster group reset-offset GROUP TOPIC --to-time ISO|EPOCH_MS [--no-force]

Commands that talk to a cluster find its NameServers in ``--namesrv``, else in
``ROCKETBOX_NAMESRV``, else in the run-state file of ``--data-dir``.
Read commands take ``--json``. Everything binds to 127.0.0.1 by default.

Several hosts: ``cluster up --role namesrv --host A`` on one, and on each other host
``cluster --namesrv A:9871 up --role broker --host B --broker-name broker-b`` (``--host`` is
where the processes bind and the address routes advertise, so it must be reachable from
the other hosts); ``--slave-id N --master-address B:PORT`` starts a slave of a master elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from datetime import datetime

from cluster.config import ASYNC_FLUSH, ASYNC_MASTER, BROKER_PORT_DEFAULT, NAMESRV_PORT_DEFAULT, SYNC_FLUSH, SYNC_MASTER
from cluster.procs.lifecycle import python_module_command
from cluster.procs.supervisor import (STATE_FILE_NAME, Supervisor, SupervisorError, read_state_file,
                                      spawn_detached)

DATA_DIR_DEFAULT = os.environ.get("ROCKETBOX_DATA_DIR", os.path.join(os.path.expanduser("~"), ".rocketbox"))


def _console():
    from rich.console import Console
    return Console()


def _print_json(value) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def _table(title: str, columns: list[str], rows: list[list]):
    from rich.table import Table
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    return table


# ---------------------------------------------------------------- up / status / down

def _topology_from_args(args):
    from cluster.topology import build_topology
    store = {}
    if args.commitlog_file_size_bytes:
        store["commitlog_file_size_bytes"] = args.commitlog_file_size_bytes
    return build_topology(args.data_dir, namesrv_count=args.namesrvs, broker_count=args.brokers,
                          flush_mode=SYNC_FLUSH if args.flush_mode == "sync" else ASYNC_FLUSH, host=args.host,
                          namesrv_ports=[args.namesrv_port + i for i in range(args.namesrvs)],
                          broker_ports=[args.broker_port + 10 * i for i in range(args.brokers)],
                          store_overrides=store, slave_count=args.slaves, failover=args.failover,
                          broker_overrides={"broker_role": SYNC_MASTER if args.broker_role == "sync" else ASYNC_MASTER})


def _registered_namesrvs(args) -> tuple[str, ...]:
    """Where a broker-only host's groups register: --namesrv, else ROCKETBOX_NAMESRV (never the
    default local address: a broker on its own host has no NameServer beside it)."""
    from cluster.topology import namesrv_addresses_to_endpoints
    return namesrv_addresses_to_endpoints(args.namesrv or os.environ.get("ROCKETBOX_NAMESRV", ""))


def _broker_names(args) -> list[str]:
    return [name.strip() for name in (args.broker_name or "").split(",") if name.strip()]


def _role_problem(args) -> str | None:
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


def _topology_for_role(args):
    """The part of the cluster ``--role`` asks for on this host (all of it by default)."""
    from cluster.topology import brokers_only, namesrv_only, remote_master_slave, with_broker_names
    if args.slave_id:
        return remote_master_slave(
            args.data_dir, broker_name=_broker_names(args)[0], broker_id=args.slave_id, host=args.host,
            port=args.broker_port, master_address=args.master_address, master_ha_address=args.master_ha_address,
            namesrv_endpoints=_registered_namesrvs(args),
            flush_mode=SYNC_FLUSH if args.flush_mode == "sync" else ASYNC_FLUSH,
            store_overrides=_store_overrides(args))
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


def _store_overrides(args) -> dict:
    return {"commitlog_file_size_bytes": args.commitlog_file_size_bytes} if args.commitlog_file_size_bytes else {}


def _topology_namesrv_env(topology) -> str:
    """The NameServers clients of this (part of the) cluster use: its own, else those its brokers
    register with."""
    if topology.namesrvs:
        return topology.namesrv_env
    endpoints = {e for b in topology.brokers + topology.slaves for e in b.namesrv_endpoints}
    return ";".join(sorted(e[len("tcp://"):] if e.startswith("tcp://") else e for e in endpoints))


def _endpoint_rows(state: dict) -> list[list]:
    rows = []
    for child in state.get("children", []):
        info = child.get("ready_info") or {}
        rows.append([child.get("name"), child.get("role"), child.get("pid"), child.get("state"),
                     info.get("endpoint", ""), child.get("restarts", 0)])
    return rows


def _namesrv_env(state: dict) -> str:
    out = []
    for child in state.get("children", []):
        endpoint = (child.get("ready_info") or {}).get("endpoint", "")
        if child.get("role") == "namesrv" and endpoint.startswith("tcp://"):
            out.append(endpoint[len("tcp://"):])
    return ";".join(out)


def cmd_up(args) -> int:
    from cluster.topology import child_specs
    topology = _topology_for_role(args)
    specs = child_specs(topology)
    os.makedirs(topology.data_dir, exist_ok=True)
    console = _console()
    started = time.monotonic()
    if args.detach:
        specs_path = os.path.join(topology.data_dir, "children.json")
        with open(specs_path, "w") as f:
            json.dump([s.to_dict() for s in specs], f)
        try:
            pid = spawn_detached(python_module_command("cluster.procs.supervisor", "--data-dir",
                                                        topology.data_dir, "--specs", specs_path), topology.data_dir,
                                 ready_timeout_s=args.ready_timeout_s)
        except SupervisorError as exc:
            console.print(f"[red]cluster failed to start:[/red] {exc}")
            return 1
        state = read_state_file(topology.data_dir) or {}
        _print_up_banner(console, state, time.monotonic() - started, pid, _topology_namesrv_env(topology))
        return 0
    supervisor = Supervisor(specs, topology.data_dir)
    try:
        supervisor.start()
    except SupervisorError as exc:
        console.print(f"[red]cluster failed to start:[/red] {exc}")
        return 1
    _print_up_banner(console, supervisor.snapshot(), time.monotonic() - started, os.getpid(),
                     _topology_namesrv_env(topology))
    if args.no_live:
        return supervisor.run_forever()
    from rich.live import Live
    with Live(console=console, refresh_per_second=2, transient=True) as live:
        while supervisor.state not in ("stopped", "failed"):
            supervisor.step(0.5)
            live.update(_table("RocketBox (Ctrl-C stops)", ["name", "role", "pid", "state", "endpoint", "restarts"],
                               _endpoint_rows(supervisor.snapshot())))
    console.print(f"cluster stopped{': ' + supervisor.halt_reason if supervisor.halt_reason else ''}")
    return 0 if not supervisor.halt_reason else 1


def _print_up_banner(console, state: dict, ready_s: float, supervisor_pid: int, namesrv_env: str = "") -> None:
    console.print(_table(f"RocketBox is up in {ready_s:.2f} s (supervisor pid {supervisor_pid})",
                         ["name", "role", "pid", "state", "endpoint", "restarts"], _endpoint_rows(state)))
    console.print(f"export ROCKETBOX_NAMESRV='{_namesrv_env(state) or namesrv_env}'")


def cmd_status(args) -> int:
    state = read_state_file(args.data_dir)
    if state is None:
        print(f"no cluster state in {os.path.join(args.data_dir, STATE_FILE_NAME)}", file=sys.stderr)
        return 1
    pid = state.get("supervisor_pid")
    alive = _pid_alive(pid)
    if args.json:
        _print_json({**state, "supervisor_alive": alive})
        return 0 if alive else 1
    console = _console()
    console.print(_table(f"supervisor pid {pid} ({'running' if alive else 'not running'}), "
                         f"state {state.get('state')}",
                         ["name", "role", "pid", "state", "endpoint", "restarts"], _endpoint_rows(state)))
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


# ---------------------------------------------------------------- client commands

def _namesrv(args) -> str | None:
    if getattr(args, "namesrv", None):
        return args.namesrv
    if os.environ.get("ROCKETBOX_NAMESRV"):
        return os.environ["ROCKETBOX_NAMESRV"]
    state = read_state_file(args.data_dir)
    if state:
        env = _namesrv_env(state)
        if env:
            return env
    return f"127.0.0.1:{NAMESRV_PORT_DEFAULT}"


def _admin(args):
    from cluster.client.admin import Admin
    return Admin(namesrv=_namesrv(args))


def cmd_topic(args) -> int:
    with _admin(args) as admin:
        if args.action in ("create", "update"):
            admin.create_topic(args.topic, args.queues, perm=args.perm)
            print(f"topic {args.topic}: {args.queues} queues per broker")
        elif args.action == "delete":
            admin.delete_topic(args.topic)
            print(f"topic {args.topic} deleted")
        elif args.action == "list":
            topics = admin.topic_list()
            if args.json:
                _print_json(topics)
            else:
                print("\n".join(topics))
        elif args.action == "route":
            route = admin.route(args.topic)
            if args.json:
                _print_json(route)
            else:
                _console().print(_table(f"route of {args.topic}", ["broker", "read", "write", "perm", "addresses"],
                                        [[q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"],
                                          json.dumps(next((b["brokerAddrs"] for b in route["brokerDatas"]
                                                           if b["brokerName"] == q["brokerName"]), {}))]
                                         for q in route["queueDatas"]]))
    return 0


def cmd_send(args) -> int:
    from cluster.client.message import Message
    from cluster.client.producer import Producer
    bodies = [args.body.encode()] if args.body is not None else [line.rstrip(b"\n") for line in sys.stdin.buffer]
    results = []
    with Producer(args.group, namesrv=_namesrv(args)) as producer:
        for _ in range(args.count):
            for body in bodies:
                r = producer.send(Message(args.topic, body, tags=args.tags, keys=args.keys))
                results.append({"status": r.status.name, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
                                "broker": r.queue.broker_name, "queueId": r.queue.queue_id,
                                "queueOffset": r.queue_offset})
    if args.json:
        _print_json(results)
    else:
        for r in results:
            print(f"{r['status']} msgId={r['msgId']} offsetMsgId={r['offsetMsgId']} "
                  f"{r['broker']}:{r['queueId']}@{r['queueOffset']}")
    return 0


def _message_dict(m) -> dict:
    return {"topic": m.topic, "broker": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "tags": m.tags, "keys": m.keys,
            "bornTimestamp": m.born_timestamp_ms, "storeTimestamp": m.store_timestamp_ms,
            "reconsumeTimes": m.reconsume_times, "properties": m.properties,
            "body": m.body.decode("utf-8", "replace")}


def cmd_consume(args) -> int:
    """Read messages from the start (or --from offsets) of every queue, without a consumer group commit."""
    from cluster.client.broker_api import PullStatus
    from cluster.client.consumer import PullConsumer
    shown = 0
    deadline = time.monotonic() + args.wait_s
    with PullConsumer(args.group, namesrv=_namesrv(args)) as consumer:
        queues = consumer.queues(args.topic)
        offsets = {mq: (consumer.committed_offset(mq) or 0) if args.from_committed else 0 for mq in queues}
        # Pass over every queue until nothing new comes; with --wait-s, keep polling that long.
        while shown < args.max:
            progressed = False
            for mq in queues:
                result = consumer.pull(mq, offsets[mq], min(32, args.max - shown), args.tags or "*")
                offsets[mq] = result.next_begin_offset
                if result.status == PullStatus.FOUND:
                    progressed = True
                for m in result.messages[:args.max - shown]:
                    print(json.dumps(_message_dict(m)) if args.json else
                          f"{m.broker_name}:{m.queue_id}@{m.queue_offset} {m.msg_id} tags={m.tags} "
                          f"keys={' '.join(m.keys)} body={m.body[:200].decode('utf-8', 'replace')}")
                    shown += 1
                if shown >= args.max:
                    break
            if not progressed:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        if args.commit and args.from_committed:
            for mq, offset in offsets.items():
                consumer.commit_offset(mq, offset)
    return 0


def _time_ms(text: str) -> int:
    """argparse type: epoch milliseconds, or an ISO 8601 time (local unless it names a zone)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither epoch milliseconds nor an ISO 8601 time") from None


def _iso_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).astimezone().isoformat(timespec="milliseconds")


def _query_problem(args) -> str | None:
    if not (args.id or args.msg_id or args.key or args.offset is not None):
        return "say what to look up: --id, --msg-id, --key, or --offset (with --queue)"
    if (args.msg_id or args.key or args.offset is not None) and not args.topic:
        return "--msg-id, --key and --offset need --topic"
    if args.id and len(args.id) != 32 and not args.topic:
        return "--topic is needed to look up a UNIQ_KEY message id or a key"
    if args.offset is not None and args.queue is None:
        return "--offset needs --queue"
    return None


def _only_broker(admin, topic: str) -> str:
    route = admin.route(topic)
    names = sorted({q["brokerName"] for q in route["queueDatas"]})
    if len(names) != 1:
        raise ValueError(f"topic {topic} is on brokers {', '.join(names)}: say which with --broker")
    return names[0]


def _query_messages(admin, args) -> list:
    from cluster.protocol import MessageQueue
    if args.id:
        if len(args.id) == 32 and args.topic is None:
            return [admin.view_message(args.id)]
        return admin.query_by_key(args.topic, args.id, args.max)
    if args.msg_id:
        return admin.query_by_unique_key(args.topic, args.msg_id, args.max)
    if args.key:
        return admin.query_by_key(args.topic, args.key, args.max, args.begin or 0, args.end)
    broker = args.broker or _only_broker(admin, args.topic)
    message = admin.message_at(MessageQueue(args.topic, broker, args.queue), args.offset)
    return [message] if message is not None else []


def _print_message(row: dict) -> None:
    print(f"{row['topic']} {row['broker']}:{row['queueId']}@{row['queueOffset']} msgId={row['msgId']} "
          f"offsetMsgId={row['offsetMsgId']} tags={row['tags']} keys={' '.join(row['keys'])} "
          f"stored={_iso_ms(row['storeTimestamp'])} reconsumeTimes={row['reconsumeTimes']}")
    print(f"  body: {row['body'][:200]}")
    for track in row["tracks"]:
        print(f"  group {track['consumerGroup']}: {track['trackType']} (committed offset {track['consumerOffset']})")
    if not row["tracks"]:
        print("  no consumer group has an offset on this topic or subscribes to it")


def cmd_query(args) -> int:
    with _admin(args) as admin:
        rows = [{**_message_dict(m), "tracks": admin.message_track(m)} for m in _query_messages(admin, args)]
    if args.json:
        _print_json(rows)
    else:
        for row in rows:
            _print_message(row)
    if not rows:
        print("no message found", file=sys.stderr)
        return 1
    return 0


def _dead_letter_dict(admin, m) -> dict:
    return {"msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "broker": m.broker_name, "queueOffset": m.queue_offset,
            "originTopic": m.properties.get("RETRY_TOPIC"), "reconsumeTimes": m.reconsume_times,
            "storeTimestamp": m.store_timestamp_ms, "storeTime": _iso_ms(m.store_timestamp_ms),
            "resent": admin.dead_letter_resent(m), "bodyPreview": m.body[:80].decode("utf-8", "replace")}


def _dlq_list(admin, args) -> int:
    rows = [_dead_letter_dict(admin, m) for m in admin.dead_letters(args.group, args.max)]
    if args.json:
        _print_json(rows)
        return 0
    for r in rows:
        print(f"{r['msgId']} topic={r['originTopic']} reconsumeTimes={r['reconsumeTimes']} stored={r['storeTime']} "
              f"resent={'yes' if r['resent'] else 'no'} body={r['bodyPreview']}")
    if not rows:
        print(f"no dead letters for group {args.group}")
    return 0


def _dlq_show(admin, args) -> int:
    rows = [{**_message_dict(m), **_dead_letter_dict(admin, m)} for m in admin.dead_letter(args.group, args.msg_id)]
    if args.json:
        _print_json(rows)
    else:
        for row in rows:
            print(json.dumps(row, indent=2, sort_keys=True))
    if not rows:
        print(f"no dead letter {args.msg_id} for group {args.group}", file=sys.stderr)
        return 1
    return 0


def _dlq_resend(admin, args) -> int:
    if not args.all and not args.msg_id:
        print("say which: --msg-id ID (repeatable) or --all", file=sys.stderr)
        return 2
    rows = admin.resend_dead_letters(args.group, None if args.all else args.msg_id, force=args.force)
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            where = f" -> {r['broker']}:{r['queueId']}@{r['queueOffset']}" if r["status"] == "RESENT" else ""
            print(f"{r['status']} {r['msgId']} topic={r['topic']}{where}")
    resent = sum(r["status"] == "RESENT" for r in rows)
    print(f"{resent} resent, {len(rows) - resent} not", file=sys.stderr)
    if not rows and not args.all:
        print(f"no dead letter {' '.join(args.msg_id)} for group {args.group}", file=sys.stderr)
        return 1
    return 0


def cmd_dlq(args) -> int:
    with _admin(args) as admin:
        return {"list": _dlq_list, "show": _dlq_show, "resend": _dlq_resend}[args.action](admin, args)


def cmd_controller(args) -> int:
    from cluster.protocol import RequestCode
    from cluster.wire_format import Command
    from cluster.zmq_transport import TransportError
    nodes = []
    with _admin(args) as admin:
        for endpoint in admin.cfg.namesrv_endpoints:
            try:
                response = admin.rpc.call(endpoint, Command(RequestCode.CONTROLLER_GET_METADATA_INFO, {}), 3000)
            except TransportError as exc:
                nodes.append({"namesrv": endpoint, "error": str(exc)})
                continue
            nodes.append({"namesrv": endpoint, "code": response.code, "remark": response.remark,
                          **(json.loads(response.body) if response.code == 0 else {})})
    if args.json:
        _print_json(nodes)
    else:
        console = _console()
        console.print(_table("controller nodes", ["namesrv", "leader", "raft"],
                             [[n["namesrv"], n.get("isLeader", "-"), n.get("raft", n.get("error") or n.get("remark"))]
                              for n in nodes]))
        leader = next((n for n in nodes if n.get("isLeader")), None)
        if leader is not None:
            console.print(_table("broker groups (the leader's view)",
                                 ["group", "master", "address", "epoch", "sync set", "replicas"],
                                 [[g["brokerName"], g["masterId"], g["masterAddress"], g["epoch"],
                                   g["syncStateSet"], g["replicas"]] for g in leader["groups"]]))
    return 0 if any(n.get("isLeader") for n in nodes) else 1


def cmd_group(args) -> int:
    """``group reset-offset``: RocketMQ's ``mqadmin resetOffsetByTime``; a running group rereads at once."""
    with _admin(args) as admin:
        offsets = admin.reset_offset_by_time(args.topic, args.group, args.to_time, force=args.force)
    rows = [{"topic": mq.topic, "broker": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
            for mq, offset in sorted(offsets.items())]
    if args.json:
        _print_json(rows)
        return 0
    for r in rows:
        print(f"{r['topic']} {r['broker']}:{r['queueId']} -> {r['offset']}")
    print(f"group {args.group} reset to {_iso_ms(args.to_time) if args.to_time >= 0 else 'the end'} "
          f"on {len(rows)} queues of {args.topic}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cluster", description="RocketBox: a RocketMQ-style cluster in a box")
    parser.add_argument("--data-dir", default=DATA_DIR_DEFAULT, help=f"default {DATA_DIR_DEFAULT}")
    parser.add_argument("--namesrv", help="NameServer addresses, host:port;host:port")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start NameServers and brokers under a supervisor")
    up.add_argument("--namesrvs", type=int, default=1)
    up.add_argument("--brokers", type=int, default=1)
    up.add_argument("--slaves", type=int, default=0, help="slaves per broker group (replicas of its master)")
    up.add_argument("--failover", action="store_true",
                    help="automatic failover: a controller (Raft) in every NameServer elects each group's master "
                         "among its replicas (use with --slaves)")
    up.add_argument("--broker-role", choices=("async", "sync"), default="async",
                    help="masters replicate asynchronously, or answer a send once a slave has it")
    up.add_argument("--flush-mode", choices=("async", "sync"), default="async")
    up.add_argument("--host", default="127.0.0.1",
                    help="the address every process here binds and advertises (reachable from other hosts)")
    up.add_argument("--role", choices=("all", "namesrv", "broker"), default="all",
                    help="namesrv: only NameServers; broker: only broker groups, registering with --namesrv")
    up.add_argument("--broker-name", help="name(s) of this host's broker group(s), comma separated "
                                          "(default broker-a, broker-b, ...)")
    up.add_argument("--slave-id", type=int, default=0,
                    help="with --role broker: start only slave N of --broker-name, whose master is elsewhere")
    up.add_argument("--master-address", help="that master's host:port")
    up.add_argument("--master-ha-address", default="", help="that master's HA host:port (default its port + 1)")
    up.add_argument("--namesrv-port", type=int, default=NAMESRV_PORT_DEFAULT)
    up.add_argument("--broker-port", type=int, default=BROKER_PORT_DEFAULT)
    up.add_argument("--commitlog-file-size-bytes", type=int, default=0)
    up.add_argument("--detach", action="store_true", help="return once the cluster is ready")
    up.add_argument("--no-live", action="store_true", help="no live status view (logs only)")
    up.add_argument("--ready-timeout-s", type=float, default=60.0)
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="the supervisor's view of every process")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    down = sub.add_parser("down", help="stop a detached cluster")
    down.add_argument("--timeout-s", type=float, default=30.0)
    down.set_defaults(func=cmd_down)

    topic = sub.add_parser("topic", help="create, update, list, route, delete topics")
    topic.add_argument("action", choices=("create", "update", "list", "route", "delete"))
    topic.add_argument("topic", nargs="?")
    topic.add_argument("--queues", type=int, default=4)
    topic.add_argument("--perm", type=int, default=6)
    topic.add_argument("--json", action="store_true")
    topic.set_defaults(func=cmd_topic)

    send = sub.add_parser("send", help="send a message (or one per stdin line)")
    send.add_argument("topic")
    send.add_argument("body", nargs="?")
    send.add_argument("--tags")
    send.add_argument("--keys")
    send.add_argument("--count", type=int, default=1)
    send.add_argument("--group", default="CLI_PRODUCER")
    send.add_argument("--json", action="store_true")
    send.set_defaults(func=cmd_send)

    consume = sub.add_parser("consume", help="print messages of a topic")
    consume.add_argument("topic")
    consume.add_argument("--group", default="CLI_CONSUMER")
    consume.add_argument("--tags")
    consume.add_argument("--max", type=int, default=100)
    consume.add_argument("--wait-s", type=float, default=0.0, help="keep polling this long for new messages")
    consume.add_argument("--from-committed", action="store_true", help="start at the group's committed offsets")
    consume.add_argument("--commit", action="store_true", help="commit the group's offsets afterwards")
    consume.add_argument("--json", action="store_true")
    consume.set_defaults(func=cmd_consume)

    query = sub.add_parser("query", help="look a message up; shows whether each consumer group has consumed it")
    which = query.add_mutually_exclusive_group()
    which.add_argument("--id", help="offset message id (or UNIQ_KEY or key, with --topic)")
    which.add_argument("--msg-id", help="the msg id (UNIQ_KEY) a producer gave the message; needs --topic")
    which.add_argument("--key", help="a KEYS word; needs --topic; narrow with --begin/--end/--max")
    which.add_argument("--offset", type=int, help="the queue offset; needs --topic and --queue (and --broker "
                                                  "when the topic is on several brokers)")
    query.add_argument("--topic")
    query.add_argument("--broker")
    query.add_argument("--queue", type=int)
    query.add_argument("--max", type=int, default=32)
    query.add_argument("--begin", "--begin-ms", type=_time_ms, help="stored at or after: epoch ms or ISO 8601")
    query.add_argument("--end", "--end-ms", type=_time_ms, help="stored at or before: epoch ms or ISO 8601")
    query.add_argument("--json", action="store_true")
    query.set_defaults(func=cmd_query)

    dlq = sub.add_parser("dlq", help="list, show and resend a consumer group's dead letters (%%DLQ%%<group>)")
    dlq_sub = dlq.add_subparsers(dest="action", required=True)
    dlq_list = dlq_sub.add_parser("list", help="the dead letters of a group")
    dlq_list.add_argument("group")
    dlq_list.add_argument("--max", type=int, default=1000)
    dlq_list.add_argument("--json", action="store_true")
    dlq_show = dlq_sub.add_parser("show", help="one dead letter, whole")
    dlq_show.add_argument("group")
    dlq_show.add_argument("msg_id", help="msg id (UNIQ_KEY) or offset msg id")
    dlq_show.add_argument("--json", action="store_true")
    dlq_resend = dlq_sub.add_parser("resend", help="send dead letters back to their original topic")
    dlq_resend.add_argument("group")
    chosen = dlq_resend.add_mutually_exclusive_group()
    chosen.add_argument("--msg-id", action="append", help="msg id (UNIQ_KEY) or offset msg id; repeatable")
    chosen.add_argument("--all", action="store_true", help="every dead letter not resent yet")
    dlq_resend.add_argument("--force", action="store_true", help="resend even what was resent before")
    dlq_resend.add_argument("--json", action="store_true")
    dlq.set_defaults(func=cmd_dlq)

    group = sub.add_parser("group", help="consumer group operations")
    group_sub = group.add_subparsers(dest="action", required=True)
    reset = group_sub.add_parser("reset-offset", help="move a group's offsets of a topic to a time, even while "
                                                      "it runs (RocketMQ's resetOffsetByTime)")
    reset.add_argument("group")
    reset.add_argument("topic")
    reset.add_argument("--to-time", type=_time_ms, required=True,
                       help="ISO 8601 or epoch ms: the first message stored at or after it is read next; -1: the end")
    reset.add_argument("--no-force", dest="force", action="store_false",
                       help="keep a queue's committed offset when it is already earlier than the time's")
    reset.add_argument("--json", action="store_true")
    group.set_defaults(func=cmd_group)

    controller = sub.add_parser("controller", help="the failover controller: each group's master, epoch and "
                                                   "in-sync replicas, and each NameServer's Raft view")
    controller.add_argument("--json", action="store_true")
    controller.set_defaults(func=cmd_controller)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "topic" and args.action != "list" and not args.topic:
        print("a topic name is needed", file=sys.stderr)
        return 2
    problem = _query_problem(args) if args.command == "query" else None
    if args.command == "up":
        problem = _role_problem(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the CLI reports; it does not dump a trace for a refused request
        from cluster.errors import ClientError
        if isinstance(exc, (ClientError, ValueError)):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())

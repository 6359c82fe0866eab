"""``cluster dlq``, ``group`` and ``controller``: operating consumer groups and failover."""

from __future__ import annotations

import json
import sys

from rocketbox.cluster.cli.client_cmds import message_dict
from rocketbox.cluster.cli.common import (consumer_group_name, iso_ms, new_console, open_admin, print_json,
                                         print_json_line, table, time_ms, topic_name, unknown_group_problem)


def _dead_letter_dict(admin, m) -> dict:
    return {"msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "broker": m.broker_name, "queueOffset": m.queue_offset,
            "originTopic": m.properties.get("RETRY_TOPIC"), "reconsumeTimes": m.reconsume_times,
            "storeTimestamp": m.store_timestamp_ms, "storeTime": iso_ms(m.store_timestamp_ms),
            "resent": admin.dead_letter_resent(m), "bodyPreview": m.body[:80].decode("utf-8", "replace")}


def _found_nothing(admin, group: str, reason: str, *, empty_is_an_answer: bool = False) -> int:
    """Nothing to show: exit 1 with why (the group is unknown to the cluster, else ``reason``), or 0
    when an empty list is the answer (a known group without dead letters), still said on stderr."""
    unknown = unknown_group_problem(admin, group)
    if empty_is_an_answer and not unknown:
        print(reason, file=sys.stderr)
        return 0
    print(f"error: {unknown or reason}", file=sys.stderr)
    return 1


def _dlq_list(admin, args) -> int:
    rows = [_dead_letter_dict(admin, m) for m in admin.dead_letters(args.group, args.max)]
    for r in rows:
        if args.json:
            print_json_line(r)
        else:
            print(f"{r['msgId']} topic={r['originTopic']} reconsumeTimes={r['reconsumeTimes']} "
                  f"stored={r['storeTime']} resent={'yes' if r['resent'] else 'no'} body={r['bodyPreview']}")
    if not rows:
        return _found_nothing(admin, args.group, f"no dead letters for group {args.group}", empty_is_an_answer=True)
    return 0


def _dlq_show(admin, args) -> int:
    rows = [{**message_dict(m), **_dead_letter_dict(admin, m)} for m in admin.dead_letter(args.group, args.msg_id)]
    for row in rows:
        if args.json:
            print_json_line(row)
        else:
            _print_dead_letter(row)
    if not rows:
        return _found_nothing(admin, args.group, f"no dead letter {args.msg_id} for group {args.group}")
    return 0


_DEAD_LETTER_FIELDS = ("msgId", "offsetMsgId", "originTopic", "topic", "broker", "queueId", "queueOffset", "tags",
                       "keys", "reconsumeTimes", "storeTime", "resent")


def _print_dead_letter(row: dict) -> None:
    """One dead letter as ``name: value`` lines, its properties, then its body."""
    for name in _DEAD_LETTER_FIELDS:
        value = row.get(name)
        if value in (None, "", []):
            continue
        if name == "keys":
            value = " ".join(value)
        elif name == "resent":
            value = "yes" if value else "no"
        print(f"{name}: {value}")
    print("properties: " + " ".join(f"{k}={v}" for k, v in sorted(row["properties"].items())))
    print(f"body: {row['body']}")
    print()


def _dlq_resend(admin, args) -> int:
    if not args.all and not args.msg_id:
        print("say which: --msg-id ID (repeatable) or --all", file=sys.stderr)
        return 2
    rows = admin.resend_dead_letters(args.group, None if args.all else args.msg_id, force=args.force)
    for r in rows:
        if args.json:
            print_json_line(r)
        else:
            where = f" -> {r['broker']}:{r['queueId']}@{r['queueOffset']}" if r["status"] == "RESENT" else ""
            print(f"{r['status']} {r['msgId']} topic={r['topic']}{where}")
    if not rows:
        missing = "no dead letters" if args.all else f"no dead letter {' '.join(args.msg_id)}"
        return _found_nothing(admin, args.group, f"{missing} for group {args.group}", empty_is_an_answer=args.all)
    resent = sum(r["status"] == "RESENT" for r in rows)
    print(f"{resent} resent, {len(rows) - resent} not", file=sys.stderr)
    return 0


def cmd_dlq(args) -> int:
    with open_admin(args) as admin:
        return {"list": _dlq_list, "show": _dlq_show, "resend": _dlq_resend}[args.action](admin, args)


def _controller_row(node: dict) -> list:
    raft = node.get("raft") or {}
    if "isLeader" not in node:
        return [node["namesrv"], "unreachable", "-", "-", "-", "-", node.get("error") or node.get("remark", "")]
    leader = raft.get("leader")
    return [node["namesrv"], "leader" if node["isLeader"] else "follower", _raft_state(raft.get("state")),
            raft.get("term", "-"), raft.get("commitIdx", "-"), leader if leader not in (None, "None") else "-", ""]


def _raft_state(state) -> str:
    # PySyncObj's _RAFT_STATE numbers.
    return {0: "follower", 1: "candidate", 2: "leader"}.get(state, str(state))


def _names_by_address(data_dir: str) -> dict[str, str]:
    """broker address -> its process's name (broker-a, broker-a-s1), from the cluster run in ``data_dir``."""
    from rocketbox.cluster.supervision.run_state import read_state_file
    state = read_state_file(data_dir) or {}
    return {child["ready_info"]["address"]: child["name"] for child in state.get("children", [])
            if child.get("role") == "broker" and (child.get("ready_info") or {}).get("address")}


def cmd_controller(args) -> int:
    from rocketbox.cluster.protocol import RequestCode
    from rocketbox.cluster.wire_format import Command
    from rocketbox.cluster.zmq_transport import TransportError
    nodes = []
    with open_admin(args) as admin:
        for endpoint in admin.cfg.namesrv_endpoints:
            try:
                response = admin.rpc.call(endpoint, Command(RequestCode.CONTROLLER_GET_METADATA_INFO, {}), 3000)
            except TransportError as exc:
                nodes.append({"namesrv": endpoint, "error": str(exc)})
                continue
            nodes.append({"namesrv": endpoint, "code": response.code, "remark": response.remark,
                          **(json.loads(response.body) if response.code == 0 else {})})
    if args.json:
        print_json(nodes)
    else:
        console = new_console()
        console.print(table("controller nodes", ["namesrv", "role", "raft state", "term", "commit index", "leader",
                                                 "problem"],
                             [_controller_row(n) for n in nodes]))
        leader = next((n for n in nodes if n.get("isLeader")), None)
        if leader is not None:
            # Replica ids (1, 2, ...) name a group's brokers under failover, in `cluster status` too; a
            # route lists its master under 0. The process names come from this data dir's cluster.
            names = _names_by_address(args.data_dir)

            def named(replica_id, address) -> str:
                return f"{replica_id} ({names[address]})" if address in names else str(replica_id)
            console.print(table("broker groups (the leader's view; ids are replica ids)",
                                 ["group", "master", "master address", "epoch", "in-sync replicas (SyncStateSet)",
                                  "replicas"],
                                 [[g["brokerName"], named(g["masterId"], g["masterAddress"]) if g["masterId"] else
                                   "none", g["masterAddress"] or "-", g["epoch"],
                                   ", ".join(str(i) for i in g["syncStateSet"]) or "-",
                                   ", ".join(f"{i}: {a}" + (f" ({names[a]})" if a in names else "")
                                             for i, a in sorted(g["replicas"].items()))]
                                  for g in leader["groups"]]))
    return 0 if any(n.get("isLeader") for n in nodes) else 1


def cmd_group(args) -> int:
    """``group reset-offset``: RocketMQ's ``mqadmin resetOffsetByTime``; a running group rereads at once."""
    with open_admin(args) as admin:
        if not args.new_group and args.group not in admin.groups_of(args.topic):
            print(f"error: group {args.group} has no offsets on {args.topic} and no member subscribing to it; "
                  f"nothing reset (--new-group sets the offsets of a group that has not consumed yet)",
                  file=sys.stderr)
            return 1
        offsets = admin.reset_offset_by_time(args.topic, args.group, args.to_time, force=args.force)
    rows = [{"topic": mq.topic, "broker": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
            for mq, offset in sorted(offsets.items())]
    for r in rows:
        print_json_line(r) if args.json else print(f"{r['topic']} {r['broker']}:{r['queueId']} -> {r['offset']}")
    if args.json:
        return 0
    print(f"group {args.group} reset to {iso_ms(args.to_time) if args.to_time >= 0 else 'the end'} "
          f"on {len(rows)} queues of {args.topic}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    """The subcommands dlq, group and controller."""
    dlq = sub.add_parser("dlq", help="list, show and resend a consumer group's dead letters (%%DLQ%%<group>)")
    dlq_sub = dlq.add_subparsers(dest="action", required=True)
    dlq_list = dlq_sub.add_parser("list", help="the dead letters of a group")
    dlq_list.add_argument("group", type=consumer_group_name, help="consumer group")
    dlq_list.add_argument("--max", type=int, default=1000, help="at most this many (default 1000)")
    dlq_list.add_argument("--json", action="store_true", help="one JSON line per dead letter")
    dlq_show = dlq_sub.add_parser("show", help="one dead letter, whole")
    dlq_show.add_argument("group", type=consumer_group_name, help="consumer group")
    dlq_show.add_argument("msg_id", help="msg id (UNIQ_KEY) or offset msg id")
    dlq_show.add_argument("--json", action="store_true", help="JSON instead of text")
    dlq_resend = dlq_sub.add_parser("resend", help="send dead letters back to their original topic")
    dlq_resend.add_argument("group", type=consumer_group_name, help="consumer group")
    chosen = dlq_resend.add_mutually_exclusive_group()
    chosen.add_argument("--msg-id", action="append", help="msg id (UNIQ_KEY) or offset msg id; repeatable")
    chosen.add_argument("--all", action="store_true", help="every dead letter not resent yet")
    dlq_resend.add_argument("--force", action="store_true", help="resend even what was resent before")
    dlq_resend.add_argument("--json", action="store_true", help="one JSON line per resent letter")
    dlq.set_defaults(func=cmd_dlq)

    group = sub.add_parser("group", help="consumer group operations")
    group_sub = group.add_subparsers(dest="action", required=True)
    reset = group_sub.add_parser("reset-offset", help="move a group's offsets of a topic to a time, even while "
                                                      "it runs (RocketMQ's resetOffsetByTime)")
    reset.add_argument("group", type=consumer_group_name, help="consumer group")
    reset.add_argument("topic", type=topic_name, help="the topic whose offsets move")
    reset.add_argument("--to-time", type=time_ms, required=True,
                       help="ISO 8601 or epoch ms: the first message stored at or after it is read next; -1: the end")
    reset.add_argument("--no-force", dest="force", action="store_false",
                       help="keep a queue's committed offset when it is already earlier than the time's")
    reset.add_argument("--new-group", action="store_true",
                       help="the group has not consumed the topic yet: create its offsets")
    reset.add_argument("--json", action="store_true", help="one JSON line per queue")
    group.set_defaults(func=cmd_group)

    controller = sub.add_parser("controller", help="the failover controller: each group's master, epoch and "
                                                   "in-sync replicas, and each NameServer's Raft view")
    controller.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    controller.set_defaults(func=cmd_controller)

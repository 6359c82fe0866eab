"""mqadmin's everyday verbs under ``cluster``, with its names, short flags and ``#Column`` tables:

    cluster clusterList [-c CLUSTER] [-i SECONDS]
    cluster brokerStatus -b ADDR | -c CLUSTER
    cluster topicStatus -t TOPIC [-c CLUSTER]
    cluster consumerProgress -g GROUP [-t TOPIC] [-s] [-c CLUSTER]
    cluster consumerConnection -g GROUP [-b ADDR]
    cluster consumerStatus -g GROUP [-i CLIENT_ID] [-s] [-b ADDR]
    cluster updateSubGroup -g GROUP [-c CLUSTER | -b ADDR] [-s BOOL] [-r N] [-d BOOL] [-o BOOL] ...
    cluster deleteSubGroup -g GROUP [-c CLUSTER | -b ADDR] [--clean-offset]
    cluster getBrokerConfig -b ADDR | -c CLUSTER
    cluster updateBrokerConfig -b ADDR | -c CLUSTER -k KEY -v VALUE
    cluster deleteExpiredCommitLog -b ADDR | -c CLUSTER
    cluster statsAll [-t TOPIC] [-a]
    cluster haStatus -b ADDR | -c CLUSTER [-i SECONDS]

``-n`` names the NameServers as ``--namesrv`` does; ``-b`` takes a broker's address as
clusterList prints it. Each answers through the broker requests of ``broker/admin.py``.
"""

from __future__ import annotations

import argparse
import sys
import time

from rocketbox.cluster.cli.common import (consumer_group_name, iso_ms, new_console, open_admin, print_json,
                                         print_json_line, table, topic_name, unknown_group_problem)
from rocketbox.cluster.errors import BrokerError, NoRouteError
from rocketbox.cluster.mq_version import version_desc
from rocketbox.cluster.protocol import DLQ_TOPIC_PREFIX, MASTER_ID, RETRY_TOPIC_PREFIX, ResponseCode


def targets(admin, args) -> dict[str, str]:
    """broker label -> endpoint: ``-b ADDR`` alone, else every master (of ``-c CLUSTER``)."""
    if getattr(args, "broker_addr", None):
        return {args.broker_addr: f"tcp://{args.broker_addr}"}
    return admin.master_endpoints(getattr(args, "cluster", None))


def _emit(args, title: str, columns: list[str], rows: list[list], records: list[dict]) -> None:
    if args.json:
        for record in records:
            print_json_line(record)
    else:
        new_console().print(table(title, columns, rows))


def _every(args, show) -> int:
    """``show()`` once, or every ``-i SECONDS`` until interrupted (mqadmin's -i interval)."""
    while True:
        code = show()
        if not args.interval:
            return code
        time.sleep(args.interval)


def cmd_cluster_list(args) -> int:
    return _every(args, lambda: _cluster_list(args))


def _cluster_list(args) -> int:
    with open_admin(args) as admin:
        info = admin.cluster_info()
        records = []
        for cluster, names in sorted(info["clusterAddrTable"].items()):
            if args.cluster and cluster != args.cluster:
                continue
            for name in sorted(names):
                for broker_id, addr in sorted(info["brokerAddrTable"][name]["brokerAddrs"].items(),
                                              key=lambda item: int(item[0])):
                    status = admin.broker_status(f"tcp://{addr}")
                    records.append({"cluster": cluster, "brokerName": name, "brokerId": int(broker_id),
                                    "addr": addr, "role": "MASTER" if int(broker_id) == MASTER_ID else "SLAVE",
                                    "version": status.get("brokerVersionDesc", ""),
                                    "inTps": float(status.get("putTps", "0").split()[0]),
                                    "outTps": float(status.get("getTransferedTps", "0").split()[0]),
                                    "diskRatio": float(status.get("commitLogDiskRatio", "0"))})
    _emit(args, "clusterList", ["#Cluster Name", "#Broker Name", "#BID", "#Role", "#Addr", "#Version",
                                "#InTPS", "#OutTPS", "#SPACE"],
          [[r["cluster"], r["brokerName"], r["brokerId"], r["role"], r["addr"], r["version"], f"{r['inTps']:.2f}",
            f"{r['outTps']:.2f}", f"{r['diskRatio']:.4f}"] for r in records], records)
    return 0 if records else 1


def _show_per_broker(args, fetch, show) -> int:
    """``fetch(admin, endpoint)`` from each broker ``-b`` / ``-c`` names: one JSON document of them
    all, or ``show(label, answer)`` for each."""
    with open_admin(args) as admin:
        answers = {label: fetch(admin, endpoint) for label, endpoint in targets(admin, args).items()}
    if args.json:
        print_json(answers)
        return 0
    for label, answer in answers.items():
        show(label, answer)
    return 0


def cmd_broker_status(args) -> int:
    return _show_per_broker(args, lambda admin, endpoint: admin.broker_status(endpoint),
                            lambda label, status: new_console().print(
                                table(f"brokerStatus {label}", ["#Key", "#Value"], sorted(status.items()))))


def cmd_topic_status(args) -> int:
    with open_admin(args) as admin:
        rows = admin.queue_offsets(args.topic)
        if args.cluster:
            names = set(admin.cluster_info()["clusterAddrTable"].get(args.cluster, []))
            rows = [r for r in rows if r["broker"] in names]
    records = [{"brokerName": r["broker"], "queueId": r["queueId"], "minOffset": r["minOffset"],
                "maxOffset": r["maxOffset"], "lastUpdated": r["lastUpdateTimestamp"]} for r in rows]
    _emit(args, f"topicStatus {args.topic}", ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
          [[r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"],
            iso_ms(r["lastUpdated"]) if r["lastUpdated"] else ""] for r in records], records)
    return 0


def cmd_consumer_progress(args) -> int:
    records, tps = [], 0.0
    with open_admin(args) as admin:
        owners = _queue_owners(admin, args.group) if args.show_client_ip else {}
        for broker_name, endpoint in sorted(admin.master_endpoints(args.cluster).items()):
            stats = admin.consume_stats(endpoint, args.group, args.topic or "")
            tps += stats["consumeTps"]
            for mq, offsets in sorted(stats["offsetTable"].items(), key=lambda item: (item[0].topic, item[0].queue_id)):
                records.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                                "brokerOffset": offsets["brokerOffset"], "consumerOffset": offsets["consumerOffset"],
                                "diff": offsets["brokerOffset"] - offsets["consumerOffset"],
                                "lastTime": offsets.get("lastTimestamp", 0)})
                if args.show_client_ip:
                    records[-1]["clientIp"] = owners.get(mq, "N/A")
        if not records:
            # mqadmin: "Not found the consumer group consume stats, because return offset table is empty"
            on = f" on topic {args.topic}" if args.topic else ""
            reason = (unknown_group_problem(admin, args.group)
                      or f"group {args.group} has no consume progress{on}: no master holds an offset of it "
                         f"(it has not consumed{on} yet)")
            print(f"error: {reason}", file=sys.stderr)
            return 1
    if args.json:
        for record in records:
            print_json_line(record)
        return 0
    client_column = ["#Client IP"] if args.show_client_ip else []
    new_console().print(table(f"consumerProgress {args.group}",
                              ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", *client_column,
                               "#Diff", "#LastTime"],
                              [[r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"],
                                *([r["clientIp"]] if args.show_client_ip else []),
                                r["diff"], iso_ms(r["lastTime"]) if r["lastTime"] else ""] for r in records]))
    print(f"Consume TPS: {tps:.2f}")
    print(f"Diff Total: {sum(r['diff'] for r in records)}")
    return 0


def _queue_owners(admin, group: str) -> dict:
    """queue -> the address of the online member that holds it (from each member's own running
    info, as mqadmin consumerProgress -s asks); empty when nobody is online."""
    try:
        members = admin.consumer_connection(group)["connectionSet"]
    except BrokerError:
        return {}
    return {mq: member["clientAddr"] for member in members
            for mq in _running_info(admin, group, member["clientId"])["mqTable"]}


def _broker_endpoint(args) -> str | None:
    return f"tcp://{args.broker_addr}" if getattr(args, "broker_addr", None) else None


def cmd_consumer_connection(args) -> int:
    with open_admin(args) as admin:
        connection = admin.consumer_connection(args.group, _broker_endpoint(args))
    if args.json:
        print_json(connection)
        return 0
    console = new_console()
    console.print(table(f"consumerConnection {args.group}", ["#ClientId", "#ClientAddr", "#Language", "#Version"],
                        [[c["clientId"], c["clientAddr"], c["language"], version_desc(c["version"])]
                         for c in connection["connectionSet"]]))
    console.print(table("subscriptions", ["#Topic", "#SubExpression"],
                        [[t, s["subString"]] for t, s in sorted(connection["subscriptionTable"].items())]))
    print(f"ConsumeType: {connection['consumeType']}\nMessageModel: {connection['messageModel']}\n"
          f"ConsumeFromWhere: {connection['consumeFromWhere']}")
    return 0


def cmd_consumer_status(args) -> int:
    endpoint = _broker_endpoint(args)
    with open_admin(args) as admin:
        connection = admin.consumer_connection(args.group, endpoint)
        clients = [c["clientId"] for c in connection["connectionSet"]]
        if args.client_id:
            clients = [c for c in clients if c == args.client_id] or [args.client_id]
        infos = {client: _running_info(admin, args.group, client, endpoint, args.jstack) for client in clients}
    if args.json:
        print_json({client: {**info, "mqTable": [{"topic": mq.topic, "brokerName": mq.broker_name,
                                                  "queueId": mq.queue_id, **pq}
                                                 for mq, pq in sorted(info["mqTable"].items())]}
                    for client, info in infos.items()})
        return 0
    console = new_console()
    for client, info in infos.items():
        console.print(table(f"consumerStatus {client}", ["#Property", "#Value"],
                            sorted((k, v) for k, v in info["properties"].items())))
        console.print(table("queues", ["#Topic", "#Broker Name", "#QID", "#Commit Offset", "#Cached", "#Locked"],
                            [[mq.topic, mq.broker_name, mq.queue_id, pq.get("commitOffset"), pq.get("cachedMsgCount"),
                              pq.get("locked")] for mq, pq in sorted(info["mqTable"].items())]))
        if args.jstack:
            print(info.get("jstack", ""))
    return 0


def _running_info(admin, group: str, client_id: str, endpoint: str | None = None, jstack: bool = False) -> dict:
    """The member's ConsumerRunningInfo through ``endpoint``, else the first master it heartbeats to
    (a member reaches only the brokers of its topics, so the first master may not know it)."""
    refusal = None
    for endpoint in [endpoint] if endpoint else admin.master_endpoints().values():
        try:
            return admin.consumer_running_info(endpoint, group, client_id, jstack)
        except BrokerError as exc:
            refusal = exc
    raise refusal or BrokerError(ResponseCode.SYSTEM_ERROR, "no broker master is registered", "")


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is neither true nor false")
    return text.lower() == "true"


SUB_GROUP_FLAGS = (  # (short flag, long flag, SubscriptionGroupConfig field, type, help)
    ("-s", "--consume-enable", "consumeEnable", _bool, "may the group consume (true/false)"),
    ("-m", "--consume-from-min-enable", "consumeFromMinEnable", _bool, "consume from the min offset (true/false)"),
    ("-d", "--consume-broadcast-enable", "consumeBroadcastEnable", _bool, "may it consume broadcasting (true/false)"),
    ("-o", "--consume-message-orderly", "consumeMessageOrderly", _bool, "orderly group (true/false)"),
    ("-q", "--retry-queue-nums", "retryQueueNums", int, "retry queues"),
    ("-r", "--retry-max-times", "retryMaxTimes", int, "deliveries before the dead-letter topic"),
    ("-i", "--broker-id", "brokerId", int, "the broker id it consumes from"),
    ("-w", "--which-broker-when-consume-slowly", "whichBrokerWhenConsumeSlowly", int,
     "the broker id it consumes from when slow"),
    ("-a", "--notify-consumer-ids-changed", "notifyConsumerIdsChangedEnable", _bool,
     "tell members when the group changes (true/false)"),
)


def cmd_update_sub_group(args) -> int:
    settings = {field: getattr(args, field) for _s, _l, field, _t, _h in SUB_GROUP_FLAGS
                if getattr(args, field) is not None}
    with open_admin(args) as admin:
        chosen = targets(admin, args)
        for endpoint in chosen.values():
            admin.update_subscription_group_at(endpoint, args.group, **settings)
        stored = {label: admin.subscription_groups(endpoint).get(args.group) for label, endpoint in chosen.items()}
    if args.json:
        print_json(stored)
    else:
        for label, cfg in stored.items():
            print(f"update subscription group to {label} success.\n{cfg}")
    return 0


def cmd_delete_sub_group(args) -> int:
    with open_admin(args) as admin:
        for label, endpoint in targets(admin, args).items():
            admin.delete_subscription_group_at(endpoint, args.group, args.clean_offset)
            print(f"delete subscription group [{args.group}] from broker [{label}] success.")
    return 0


def cmd_get_broker_config(args) -> int:
    def show(label: str, config: dict) -> None:
        print(f"============{label}============")
        for key, value in sorted(config.items()):
            print(f"{key:<50s}=  {value}")
    return _show_per_broker(args, lambda admin, endpoint: admin.broker_config(endpoint), show)


def cmd_update_broker_config(args) -> int:
    with open_admin(args) as admin:
        for label, endpoint in targets(admin, args).items():
            admin.update_broker_config(endpoint, {args.key: args.value})
            print(f"update broker config success, {label}")
    return 0


def cmd_delete_expired_commitlog(args) -> int:
    """Every broker of ``-c`` (slaves too: each replica keeps its own files), or ``-b``'s."""
    with open_admin(args) as admin:
        if args.broker_addr:
            targets = {args.broker_addr: f"tcp://{args.broker_addr}"}
        else:
            info = admin.cluster_info()
            names = info["clusterAddrTable"].get(args.cluster, [])
            targets = {addr: f"tcp://{addr}" for name in sorted(names)
                       for addr in info["brokerAddrTable"][name]["brokerAddrs"].values()}
            if not targets:
                print(f"no broker in cluster {args.cluster}")
                return 1
        for label, endpoint in targets.items():
            admin.delete_expired_commitlog(endpoint)
            print(f"delete expired CommitLog files of broker [{label}]: requested")
    return 0


STATS_ALL_COLUMNS = ["#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
                     "#OutMsg24Hour"]


def cmd_stats_all(args) -> int:
    """mqadmin statsAll: per topic and consumer group, the lag and the last minute's in and out TPS
    and last day's counts, summed over the topic's masters (retry and dead-letter topics left out)."""
    records = []
    with open_admin(args) as admin:
        topics = [args.topic] if args.topic else sorted(admin.topic_list())
        for topic in topics:
            if topic.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX)):
                continue
            try:
                records.extend(_topic_stats(admin, topic, args.active))
            except NoRouteError:
                if args.topic:
                    raise   # the one topic asked for: say so
                continue   # listed but gone (deleted meanwhile): mqadmin skips it too
    if args.json:
        for record in records:
            print_json_line(record)
        return 0 if records or not args.topic else 1
    rows = [[r["topic"], r["group"] or "", r["accumulation"], f"{r['inTps']:.2f}",
             "" if r["group"] is None else f"{r['outTps']:.2f}", r["inMsg24Hour"],
             "NO_CONSUMER" if r["group"] is None else r["outMsg24Hour"]] for r in records]
    new_console().print(table("statsAll", STATS_ALL_COLUMNS, rows))
    return 0 if records or not args.topic else 1


def _topic_stats(admin, topic: str, active_only: bool) -> list[dict]:
    route = admin.routes.get(topic, refresh=True)
    if route is None:
        raise NoRouteError(f"topic {topic} has no route")
    masters = [e for e in (route.master_endpoint(name) for name in sorted(route.broker_addrs)) if e is not None]

    def windows(stats_name: str, key: str) -> tuple[float, int]:
        """(last minute's TPS, last day's count) over the masters."""
        tps, day = 0.0, 0
        for endpoint in masters:
            data = admin.broker_stats_data(endpoint, stats_name, key)
            if data is not None:
                tps += data["statsMinute"]["tps"]
                day += data["statsDay"]["sum"]
        return tps, day

    in_tps, in_day = windows("TOPIC_PUT_NUMS", topic)
    groups = sorted(admin.groups_of(topic))
    if not groups:
        if active_only and not in_day:
            return []
        return [{"topic": topic, "group": None, "accumulation": 0, "inTps": in_tps, "outTps": 0.0,
                 "inMsg24Hour": in_day, "outMsg24Hour": 0}]
    records = []
    for group in groups:
        out_tps, out_day = windows("GROUP_GET_NUMS", f"{topic}@{group}")
        if active_only and not in_day and not out_day:
            continue
        diff = sum(offsets["brokerOffset"] - offsets["consumerOffset"] for endpoint in masters
                   for offsets in admin.consume_stats(endpoint, group, topic)["offsetTable"].values())
        records.append({"topic": topic, "group": group, "accumulation": max(diff, 0), "inTps": in_tps,
                        "outTps": out_tps, "inMsg24Hour": in_day, "outMsg24Hour": out_day})
    return records


def cmd_ha_status(args) -> int:
    return _every(args, lambda: _ha_status(args))


def _ha_status(args) -> int:
    """mqadmin haStatus: each master's slaves (-c: every master of the cluster), or -b's own view."""
    with open_admin(args) as admin:
        endpoints = ([f"tcp://{args.broker_addr}"] if args.broker_addr
                     else sorted(admin.master_endpoints(args.cluster).values()))
        answers = {e.removeprefix("tcp://"): admin.ha_status(e) for e in endpoints}
        info = admin.cluster_info()
    for addr, status in answers.items():
        replicas = _replica_addresses(info, addr)
        for connection in status.get("haConnectionInfo", []):
            # The broker knows a slave by its connection's IP; the route names it by its broker id.
            connection["brokerAddr"] = replicas.get(connection.get("brokerId"), "")
    if args.json:
        print_json(answers)
        return 0
    console = new_console()
    for addr, status in answers.items():
        if status["master"]:
            slaves = status["haConnectionInfo"]
            console.print(table(f"haStatus: master {addr}, CommitLog max offset {status['masterCommitLogMaxOffset']}, "
                                f"{len(slaves)} slave(s), {status['inSyncSlaveNums']} in sync",
                                ["#SlaveAddr", "#BID", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                                 "#TransferFromWhere"],
                                [[c["brokerAddr"] or c["addr"], c["brokerId"], c["slaveAckOffset"], c["diff"],
                                  f"{c['transferredByteInSecond'] / 1024:.2f}", "OK" if c["inSync"] else "Fall Behind",
                                  c["transferFromWhere"]] for c in slaves]))
        else:
            client = status["haClientRuntimeInfo"]
            console.print(table(f"haStatus: slave {addr}", ["#Key", "#Value"], [
                ["#MasterAddr", client["masterAddr"]], ["#CommitLogMaxOffset", client["maxOffset"]],
                ["#TransferSpeed(KB/s)", f"{client['transferredByteInSecond'] / 1024:.2f}"],
                ["#LastReadTime", iso_ms(client["lastReadTimestamp"]) if client["lastReadTimestamp"] else ""],
                ["#LastWriteTime", iso_ms(client["lastWriteTimestamp"]) if client["lastWriteTimestamp"] else ""]]))
    return 0


def _replica_addresses(cluster_info: dict, addr: str) -> dict[int, str]:
    """broker id -> address of every replica in the group of the broker at ``addr``."""
    for data in cluster_info["brokerAddrTable"].values():
        addrs = {int(broker_id): a for broker_id, a in data["brokerAddrs"].items()}
        if addr in addrs.values():
            return addrs
    return {}


def verb_factory(sub):
    """``verb(name, func, help, group=, topic=, where=)``: a subcommand with mqadmin's shared flags."""
    def verb(name: str, func, help_text: str, *, group=False, topic=False, where=False):
        parser = sub.add_parser(name, help=help_text)
        # SUPPRESS: absent here, the global --namesrv given before the verb stays as it was.
        parser.add_argument("-n", "--namesrv", dest="namesrv", default=argparse.SUPPRESS,
                            help="NameServer addresses, host:port;host:port (as mqadmin's -n)")
        if group:
            parser.add_argument("-g", "--group", required=True, type=consumer_group_name, help="consumer group")
        if topic:
            parser.add_argument("-t", "--topic", required=topic == "required", type=topic_name, help="topic")
        if where:
            target = parser.add_mutually_exclusive_group(required=where == "required")
            target.add_argument("-b", "--broker-addr", help="one broker's address, host:port (clusterList #Addr)")
            target.add_argument("-c", "--cluster", help="every master of this cluster")
        parser.add_argument("--json", action="store_true", help="JSON instead of a table")
        parser.set_defaults(func=func)
        return parser
    return verb


def add_parsers(sub) -> None:
    verb = verb_factory(sub)

    def interval(parser) -> None:
        parser.add_argument("-i", "--interval", type=float, metavar="SECONDS",
                            help="print again every SECONDS until interrupted (mqadmin's -i)")

    listing = verb("clusterList", cmd_cluster_list, "every broker: cluster, name, id, role, address, version, TPS")
    listing.add_argument("-c", "--cluster", help="only this cluster")
    interval(listing)
    verb("brokerStatus", cmd_broker_status, "a broker's runtime key/values (putTps, commitLogMaxOffset, ...)",
         where="required")
    topic_status = verb("topicStatus", cmd_topic_status, "a topic's queues: min and max offset, last store time",
                        topic="required")
    topic_status.add_argument("-c", "--cluster", help="only the brokers of this cluster")
    progress = verb("consumerProgress", cmd_consumer_progress, "a group's lag per queue, Diff Total and consume TPS",
                    group=True, topic=True)
    progress.add_argument("-s", "--show-client-ip", action="store_true",
                          help="add the address of the member holding each queue")
    progress.add_argument("-c", "--cluster", help="only the masters of this cluster")
    connection = verb("consumerConnection", cmd_consumer_connection, "a group's online members and subscriptions",
                      group=True)
    connection.add_argument("-b", "--broker-addr", help="ask this broker, host:port (default: the masters in turn)")
    status = verb("consumerStatus", cmd_consumer_status, "each member's own running state (queues, settings)",
                  group=True)
    status.add_argument("-i", "--client-id", help="only this member")
    status.add_argument("-s", "--jstack", action="store_true", help="also print each member's thread stacks")
    status.add_argument("-b", "--broker-addr", help="relay through this broker, host:port (default: the masters)")
    update = verb("updateSubGroup", cmd_update_sub_group, "create or change a subscription group", group=True,
                  where=True)
    for short, long, field, kind, help_text in SUB_GROUP_FLAGS:
        update.add_argument(short, long, dest=field, type=kind, help=help_text)
    delete = verb("deleteSubGroup", cmd_delete_sub_group, "delete a subscription group", group=True, where=True)
    delete.add_argument("--clean-offset", action="store_true", help="forget the group's offsets too")
    verb("getBrokerConfig", cmd_get_broker_config, "a broker's settings under RocketMQ's keys", where="required")
    update_config = verb("updateBrokerConfig", cmd_update_broker_config,
                         "change a setting of running brokers (those that may change live)", where="required")
    update_config.add_argument("-k", "--key", required=True, help="the broker.conf key, e.g. fileReservedTime")
    update_config.add_argument("-v", "--value", required=True, help="its new value")
    verb("deleteExpiredCommitLog", cmd_delete_expired_commitlog,
         "delete expired CommitLog files now rather than at deleteWhen", where="required")
    stats_all = verb("statsAll", cmd_stats_all, "per topic and group: lag, in/out TPS (last minute), in/out messages "
                     "(last 24 h)", topic=True)
    stats_all.add_argument("-a", "--active", action="store_true", help="only topics with messages in or out in 24 h")
    interval(verb("haStatus", cmd_ha_status, "replication: a master's slaves, their ack offsets, lag and status",
                  where="required"))

"""mqadmin's everyday verbs under ``cluster``, with its names, short flags and ``#Column`` tables:

    cluster clusterList [-c CLUSTER]
    cluster brokerStatus -b ADDR | -c CLUSTER
    cluster topicStatus -t TOPIC
    cluster consumerProgress -g GROUP [-t TOPIC]
    cluster consumerConnection -g GROUP
    cluster consumerStatus -g GROUP [-i CLIENT_ID]
    cluster updateSubGroup -g GROUP [-c CLUSTER | -b ADDR] [-s BOOL] [-r N] [-d BOOL] [-o BOOL] ...
    cluster deleteSubGroup -g GROUP [-c CLUSTER | -b ADDR] [--clean-offset]
    cluster getBrokerConfig -b ADDR | -c CLUSTER
    cluster updateBrokerConfig -b ADDR | -c CLUSTER -k KEY -v VALUE
    cluster deleteExpiredCommitLog -b ADDR | -c CLUSTER

``-n`` names the NameServers as ``--namesrv`` does; ``-b`` takes a broker's address as
clusterList prints it. Each answers through the broker requests of ``broker/admin.py``.
"""

from __future__ import annotations

import argparse

from rocketbox.cluster.cli.common import iso_ms, new_console, open_admin, print_json, print_json_line, table
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import MASTER_ID, ResponseCode


def _targets(admin, args) -> dict[str, str]:
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


def cmd_cluster_list(args) -> int:
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
        answers = {label: fetch(admin, endpoint) for label, endpoint in _targets(admin, args).items()}
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
    records = [{"brokerName": r["broker"], "queueId": r["queueId"], "minOffset": r["minOffset"],
                "maxOffset": r["maxOffset"], "lastUpdated": r["lastUpdateTimestamp"]} for r in rows]
    _emit(args, f"topicStatus {args.topic}", ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
          [[r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"],
            iso_ms(r["lastUpdated"]) if r["lastUpdated"] else ""] for r in records], records)
    return 0


def cmd_consumer_progress(args) -> int:
    records, tps = [], 0.0
    with open_admin(args) as admin:
        for broker_name, endpoint in sorted(admin.master_endpoints().items()):
            stats = admin.consume_stats(endpoint, args.group, args.topic or "")
            tps += stats["consumeTps"]
            for mq, offsets in sorted(stats["offsetTable"].items(), key=lambda item: (item[0].topic, item[0].queue_id)):
                records.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                                "brokerOffset": offsets["brokerOffset"], "consumerOffset": offsets["consumerOffset"],
                                "diff": offsets["brokerOffset"] - offsets["consumerOffset"],
                                "lastTime": offsets.get("lastTimestamp", 0)})
    if args.json:
        for record in records:
            print_json_line(record)
        return 0 if records else 1
    new_console().print(table(f"consumerProgress {args.group}",
                              ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                               "#LastTime"],
                              [[r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"],
                                r["diff"], iso_ms(r["lastTime"]) if r["lastTime"] else ""] for r in records]))
    print(f"Consume TPS: {tps:.2f}")
    print(f"Diff Total: {sum(r['diff'] for r in records)}")
    return 0 if records else 1


def cmd_consumer_connection(args) -> int:
    with open_admin(args) as admin:
        connection = admin.consumer_connection(args.group)
    if args.json:
        print_json(connection)
        return 0
    console = new_console()
    console.print(table(f"consumerConnection {args.group}", ["#ClientId", "#ClientAddr", "#Language", "#Version"],
                        [[c["clientId"], c["clientAddr"], c["language"], c["version"]]
                         for c in connection["connectionSet"]]))
    console.print(table("subscriptions", ["#Topic", "#SubExpression"],
                        [[t, s["subString"]] for t, s in sorted(connection["subscriptionTable"].items())]))
    print(f"ConsumeType: {connection['consumeType']}\nMessageModel: {connection['messageModel']}\n"
          f"ConsumeFromWhere: {connection['consumeFromWhere']}")
    return 0


def cmd_consumer_status(args) -> int:
    with open_admin(args) as admin:
        connection = admin.consumer_connection(args.group)
        clients = [c["clientId"] for c in connection["connectionSet"]]
        if args.client_id:
            clients = [c for c in clients if c == args.client_id] or [args.client_id]
        infos = {client: _running_info(admin, args.group, client) for client in clients}
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
    return 0


def _running_info(admin, group: str, client_id: str) -> dict:
    """The member's ConsumerRunningInfo through the first master it heartbeats to (a member reaches
    only the brokers of its topics, so the first master may not know it)."""
    refusal = None
    for endpoint in admin.master_endpoints().values():
        try:
            return admin.consumer_running_info(endpoint, group, client_id)
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
        targets = _targets(admin, args)
        for endpoint in targets.values():
            admin.update_subscription_group_at(endpoint, args.group, **settings)
        stored = {label: admin.subscription_groups(endpoint).get(args.group) for label, endpoint in targets.items()}
    if args.json:
        print_json(stored)
    else:
        for label, cfg in stored.items():
            print(f"update subscription group to {label} success.\n{cfg}")
    return 0


def cmd_delete_sub_group(args) -> int:
    with open_admin(args) as admin:
        for label, endpoint in _targets(admin, args).items():
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
        for label, endpoint in _targets(admin, args).items():
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


def add_parsers(sub) -> None:
    def verb(name: str, func, help_text: str, *, group=False, topic=False, where=False):
        parser = sub.add_parser(name, help=help_text)
        # SUPPRESS: absent here, the global --namesrv given before the verb stays as it was.
        parser.add_argument("-n", "--namesrv", dest="namesrv", default=argparse.SUPPRESS,
                            help="NameServer addresses, host:port;host:port (as mqadmin's -n)")
        if group:
            parser.add_argument("-g", "--group", required=True, help="consumer group")
        if topic:
            parser.add_argument("-t", "--topic", required=topic == "required", help="topic")
        if where:
            target = parser.add_mutually_exclusive_group(required=where == "required")
            target.add_argument("-b", "--broker-addr", help="one broker's address, host:port (clusterList #Addr)")
            target.add_argument("-c", "--cluster", help="every master of this cluster")
        parser.add_argument("--json", action="store_true", help="JSON instead of a table")
        parser.set_defaults(func=func)
        return parser

    listing = verb("clusterList", cmd_cluster_list, "every broker: cluster, name, id, role, address, version, TPS")
    listing.add_argument("-c", "--cluster", help="only this cluster")
    verb("brokerStatus", cmd_broker_status, "a broker's runtime key/values (putTps, commitLogMaxOffset, ...)",
         where="required")
    verb("topicStatus", cmd_topic_status, "a topic's queues: min and max offset, last store time", topic="required")
    verb("consumerProgress", cmd_consumer_progress, "a group's lag per queue, Diff Total and consume TPS",
         group=True, topic=True)
    verb("consumerConnection", cmd_consumer_connection, "a group's online members and subscriptions", group=True)
    status = verb("consumerStatus", cmd_consumer_status, "each member's own running state (queues, settings)",
                  group=True)
    status.add_argument("-i", "--client-id", help="only this member")
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

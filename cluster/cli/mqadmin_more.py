"""mqadmin's NameServer verbs and its rarer broker verbs under ``cluster``, with its names and flags:

    cluster updateKvConfig -s NAMESPACE -k KEY -v VALUE      cluster deleteKvConfig -s NAMESPACE -k KEY
    cluster updateOrderConf -t TOPIC -m get|put|delete [-v brokerName:queues;...]
    cluster getNamesrvConfig                                 cluster updateNamesrvConfig -k KEY -v VALUE
    cluster wipeWritePerm -b BROKER_NAME                     cluster addWritePerm -b BROKER_NAME
    cluster producerConnection -g GROUP [-t TOPIC]           cluster producer -b ADDR
    cluster brokerConsumeStats -b ADDR [-o BOOL] [-l DIFF]
    cluster cleanExpiredCQ -b ADDR | -c CLUSTER              cluster cleanUnusedTopic -b ADDR | -c CLUSTER
    cluster cloneGroupOffset -s SRC -d DEST [-t TOPIC] [-o BOOL]
    cluster queryCq -t TOPIC -q QUEUE -i INDEX [-c COUNT] [-b ADDR] [-g GROUP]
    cluster consumeMessageDirectly -i OFFSET_MSG_ID -g GROUP -d CLIENT_ID

``-b`` takes a broker's address as clusterList prints it (wipeWritePerm/addWritePerm: its name).
The requests are ``client/admin_requests.py``'s.
"""

from __future__ import annotations

import sys

from rocketbox.cluster.cli.common import (consumer_group_name, iso_ms, new_console, open_admin, print_json,
                                         producer_group_name, table, topic_name)
from rocketbox.cluster.cli.mqadmin_cmds import targets, verb_factory
from rocketbox.cluster.client import admin_requests as requests


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def cmd_update_kv_config(args) -> int:
    with open_admin(args) as admin:
        requests.put_kv_config(admin, args.namespace, args.key, args.value)
    print("create or update kv config to namespace success.")
    return 0


def cmd_delete_kv_config(args) -> int:
    with open_admin(args) as admin:
        requests.delete_kv_config(admin, args.namespace, args.key)
    print("delete kv config from namespace success.")
    return 0


def cmd_update_order_conf(args) -> int:
    namespace = requests.NAMESPACE_ORDER_TOPIC_CONFIG
    with open_admin(args) as admin:
        if args.method == "get":
            conf = requests.kv_config(admin, namespace, args.topic)
            if conf is None:   # RocketMQ's tool fails here too (QUERY_NOT_FOUND)
                print(f"no order config for topic {args.topic}", file=sys.stderr)
                return 1
            print(f"get orderConf success. topic=[{args.topic}], orderConf=[{conf}]")
        elif args.method == "put":
            if not args.value:
                print("please set orderConf with option -v.")
                return 2
            requests.put_kv_config(admin, namespace, args.topic, args.value)
            print(f"update orderConf success. topic=[{args.topic}], orderConf=[{args.value}]")
        else:
            requests.delete_kv_config(admin, namespace, args.topic)
            print(f"delete orderConf success. topic=[{args.topic}]")
    return 0


def cmd_get_namesrv_config(args) -> int:
    with open_admin(args) as admin:
        configs = requests.namesrv_configs(admin)
    if args.json:
        print_json(configs)
        return 0
    for endpoint, config in configs.items():
        print(f"============{endpoint.removeprefix('tcp://')}============")
        for key, value in sorted(config.items()):
            print(f"{key:<50s}=  {value}")
    return 0


def cmd_update_namesrv_config(args) -> int:
    with open_admin(args) as admin:
        requests.update_namesrv_config(admin, {args.key: args.value})
    print(f"update name server config success! {args.key}={args.value}")
    return 0


def _write_perm(args, writable: bool) -> int:
    with open_admin(args) as admin:
        counts = requests.set_write_perm(admin, args.broker_name, writable)
    for endpoint, count in counts.items():
        print(f"{'add' if writable else 'wipe'} write perm of broker[{args.broker_name}] in name server"
              f"[{endpoint.removeprefix('tcp://')}] OK, {count}")
    return 0


def cmd_producer_connection(args) -> int:
    with open_admin(args) as admin:
        members = {}
        for endpoint in admin.master_endpoints().values():
            for member in requests.producer_connections(admin, endpoint, args.group):
                members.setdefault(member["clientId"], member)
    rows = sorted(members.values(), key=lambda m: m["clientId"])
    if args.json:
        print_json(rows)
    else:
        new_console().print(table(f"producerConnection {args.group}", ["#ClientId", "#ClientAddr", "#Language", "#Version"],
                                  [[m["clientId"], m["clientAddr"], m["language"], m["version"]] for m in rows]))
    return 0 if rows else 1


def cmd_producer(args) -> int:
    with open_admin(args) as admin:
        table_ = requests.producer_table(admin, f"tcp://{args.broker_addr}")
    if args.json:
        print_json(table_)
        return 0
    for group, members in sorted(table_.items()):
        for m in members:
            print(f"producer group ({group}) instance : clientId={m['clientId']},remoteIP={m['remoteIP']}, "
                  f"language={m['language']}, version={m['version']}, lastUpdateTimestamp={m['lastUpdateTimestamp']}")
    return 0


def cmd_broker_consume_stats(args) -> int:
    with open_admin(args) as admin:
        stats = requests.broker_consume_stats(admin, f"tcp://{args.broker_addr}", args.order)
    rows = [(group, mq, o) for group, mq, o in stats["rows"] if o["brokerOffset"] - o["consumerOffset"] >= args.level]
    if args.json:
        print_json({"rows": [{"group": g, "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, **o}
                             for g, mq, o in rows], "totalDiff": stats["totalDiff"]})
        return 0
    new_console().print(table("brokerConsumeStats", ["#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset",
                                                     "#Consumer Offset", "#Diff", "#LastTime"],
                              [[mq.topic, g, mq.broker_name, mq.queue_id, o["brokerOffset"], o["consumerOffset"],
                                o["brokerOffset"] - o["consumerOffset"],
                                iso_ms(o["lastTimestamp"]) if o.get("lastTimestamp") else "-"] for g, mq, o in rows]))
    print(f"Diff Total: {stats['totalDiff']}")
    return 0


def _each_broker(args, request, what: str) -> int:
    with open_admin(args) as admin:
        for label, endpoint in targets(admin, args).items():
            remark = request(admin, endpoint)
            print(f"{what} on broker [{label}]: success{f' ({remark})' if remark else ''}")
    return 0


def cmd_clone_group_offset(args) -> int:
    with open_admin(args) as admin:
        for endpoint in admin.master_endpoints().values():
            requests.clone_group_offset(admin, endpoint, args.source, args.target, args.topic or "", args.offline)
    print(f"clone group offset success. srcGroup[{args.source}], destGroup=[{args.target}], topic[{args.topic or ''}]")
    return 0


def cmd_query_cq(args) -> int:
    with open_admin(args) as admin:
        if args.broker_addr:
            endpoint = f"tcp://{args.broker_addr}"
        else:
            route = admin.route(args.topic)
            first = sorted(route["brokerDatas"], key=lambda b: b["brokerName"])[0]
            endpoint = admin.master_endpoints()[first["brokerName"]]
        body = requests.query_consume_queue(admin, endpoint, args.topic, args.queue, args.index, args.count,
                                            args.group or "")
    if args.json:
        print_json(body)
        return 0
    if body.get("subscriptionData"):
        print(f"Subscription data: \n{body['subscriptionData']}")
    if body.get("filterData"):
        print(f"Filter data: \n{body['filterData']}")
    print(f"Queue data: \nmax: {body['maxQueueIndex']}, min: {body['minQueueIndex']}")
    for i, entry in enumerate(body.get("queueData") or [], args.index):
        print(f"idx: {i}\nphysicOffset={entry['physicOffset']}, physicSize={entry['physicSize']}, "
              f"tagsCode={entry['tagsCode']}")
    return 0


def cmd_consume_message_directly(args) -> int:
    with open_admin(args) as admin:
        result = requests.consume_message_directly(admin, args.msg_id, args.group, args.client_id)
    if args.json:
        print_json(result)
    else:
        print(f"ConsumeMessageDirectlyResult [order={str(result['order']).lower()}, "
              f"autoCommit={str(result['autoCommit']).lower()}, consumeResult={result['consumeResult']}, "
              f"remark={result.get('remark')}, spentTimeMills={result.get('spentTimeMills')}]")
    return 0 if result["consumeResult"] == "CR_SUCCESS" else 1


def add_parsers(sub) -> None:
    verb = verb_factory(sub)
    for name, func, help_text in (("updateKvConfig", cmd_update_kv_config, "set a key of a NameServer KV namespace"),
                                  ("deleteKvConfig", cmd_delete_kv_config, "delete a key of a NameServer KV namespace")):
        parser = verb(name, func, help_text)
        parser.add_argument("-s", "--namespace", required=True, help="e.g. ORDER_TOPIC_CONFIG")
        parser.add_argument("-k", "--key", required=True, help="the key within the namespace")
        if func is cmd_update_kv_config:
            parser.add_argument("-v", "--value", required=True, help="its value")
    order = verb("updateOrderConf", cmd_update_order_conf, "a topic's order config (routes' orderTopicConf)",
                 topic="required")
    order.add_argument("-m", "--method", required=True, choices=("get", "put", "delete"), help="what to do")
    order.add_argument("-v", "--value", help="brokerName:queueNums;... (put)")
    verb("getNamesrvConfig", cmd_get_namesrv_config, "every NameServer's settings")
    update = verb("updateNamesrvConfig", cmd_update_namesrv_config, "change a NameServer setting (live ones)")
    update.add_argument("-k", "--key", required=True, help="the namesrv.conf key, e.g. orderMessageEnable")
    update.add_argument("-v", "--value", required=True, help="its new value")
    for name, writable in (("wipeWritePerm", False), ("addWritePerm", True)):
        parser = verb(name, lambda args, w=writable: _write_perm(args, w),
                      f"{'give back' if writable else 'take away'} the write permission of a broker's routes")
        parser.add_argument("-b", "--broker-name", required=True, help="the broker's name, e.g. broker-a")
    producers = verb("producerConnection", cmd_producer_connection, "a producer group's online members")
    producers.add_argument("-g", "--group", required=True, type=producer_group_name, help="producer group")
    producers.add_argument("-t", "--topic", type=topic_name, help="accepted for mqadmin's sake: every master is asked")
    verb("producer", cmd_producer, "every producer group's members on a broker").add_argument(
        "-b", "--broker-addr", required=True, help="a broker's address, host:port")
    stats = verb("brokerConsumeStats", cmd_broker_consume_stats, "every group's lag per queue on one broker")
    stats.add_argument("-b", "--broker-addr", required=True, help="a broker's address, host:port")
    stats.add_argument("-o", "--order", type=_bool, default=False, help="orderly topics only (true/false)")
    stats.add_argument("-l", "--level", type=int, default=0, help="only queues with at least this diff")
    verb("cleanExpiredCQ", lambda args: _each_broker(args, requests.clean_expired_consume_queue, "cleanExpiredCQ"),
         "delete ConsumeQueue files below the CommitLog's floor now", where="required")
    verb("cleanUnusedTopic", lambda args: _each_broker(args, requests.clean_unused_topic, "cleanUnusedTopic"),
         "delete the ConsumeQueues of topics a broker no longer has", where="required")
    clone = verb("cloneGroupOffset", cmd_clone_group_offset, "copy a group's committed offsets to another group")
    clone.add_argument("-s", "--source", required=True, type=consumer_group_name, help="source group")
    clone.add_argument("-d", "--target", required=True, type=consumer_group_name, help="destination group")
    clone.add_argument("-t", "--topic", type=topic_name, help="only this topic (default: every topic of the source)")
    clone.add_argument("-o", "--offline", type=_bool, default=False, help="the source group is offline (true/false)")
    cq = verb("queryCq", cmd_query_cq, "ConsumeQueue entries as stored", topic="required")
    cq.add_argument("-q", "--queue", type=int, required=True, help="queue id")
    cq.add_argument("-i", "--index", type=int, required=True, help="first entry")
    cq.add_argument("-c", "--count", type=int, default=10, help="entries (default 10)")
    cq.add_argument("-b", "--broker-addr", help="a broker's address (default: the topic's first broker)")
    cq.add_argument("-g", "--group", type=consumer_group_name, help="show this group's subscription")
    direct = verb("consumeMessageDirectly", cmd_consume_message_directly,
                  "have an online consumer consume one message (mqadmin queryMsgById -g -d)")
    direct.add_argument("-i", "--msg-id", required=True, help="the message's offset message id")
    direct.add_argument("-g", "--group", required=True, type=consumer_group_name, help="consumer group")
    direct.add_argument("-d", "--client-id", required=True, help="the member's client id")

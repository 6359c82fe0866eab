"""``cluster topic``, ``send``, ``consume`` and ``query``: a client's view of the cluster."""

from __future__ import annotations

import json
import sys
import time

from cluster.cli.common import iso_ms, namesrv, new_console, open_admin, print_json, table, time_ms


def cmd_topic(args) -> int:
    with open_admin(args) as admin:
        if args.action in ("create", "update"):
            admin.create_topic(args.topic, args.queues, perm=args.perm)
            print(f"topic {args.topic}: {args.queues} queues per broker")
        elif args.action == "delete":
            admin.delete_topic(args.topic)
            print(f"topic {args.topic} deleted")
        elif args.action == "list":
            topics = admin.topic_list()
            if args.json:
                print_json(topics)
            else:
                print("\n".join(topics))
        elif args.action == "route":
            route = admin.route(args.topic)
            if args.json:
                print_json(route)
            else:
                new_console().print(table(f"route of {args.topic}", ["broker", "read", "write", "perm", "addresses"],
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
    with Producer(args.group, namesrv=namesrv(args)) as producer:
        for _ in range(args.count):
            for body in bodies:
                r = producer.send(Message(args.topic, body, tags=args.tags, keys=args.keys))
                results.append({"status": r.status.name, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
                                "broker": r.queue.broker_name, "queueId": r.queue.queue_id,
                                "queueOffset": r.queue_offset})
    if args.json:
        print_json(results)
    else:
        for r in results:
            print(f"{r['status']} msgId={r['msgId']} offsetMsgId={r['offsetMsgId']} "
                  f"{r['broker']}:{r['queueId']}@{r['queueOffset']}")
    return 0


def message_dict(m) -> dict:
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
    with PullConsumer(args.group, namesrv=namesrv(args)) as consumer:
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
                    print(json.dumps(message_dict(m)) if args.json else
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


def query_problem(args) -> str | None:
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
          f"stored={iso_ms(row['storeTimestamp'])} reconsumeTimes={row['reconsumeTimes']}")
    print(f"  body: {row['body'][:200]}")
    for track in row["tracks"]:
        print(f"  group {track['consumerGroup']}: {track['trackType']} (committed offset {track['consumerOffset']})")
    if not row["tracks"]:
        print("  no consumer group has an offset on this topic or subscribes to it")


def cmd_query(args) -> int:
    with open_admin(args) as admin:
        rows = [{**message_dict(m), "tracks": admin.message_track(m)} for m in _query_messages(admin, args)]
    if args.json:
        print_json(rows)
    else:
        for row in rows:
            _print_message(row)
    if not rows:
        print("no message found", file=sys.stderr)
        return 1
    return 0


def add_parsers(sub) -> None:
    """The subcommands topic, send, consume and query."""
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
    query.add_argument("--begin", "--begin-ms", type=time_ms, help="stored at or after: epoch ms or ISO 8601")
    query.add_argument("--end", "--end-ms", type=time_ms, help="stored at or before: epoch ms or ISO 8601")
    query.add_argument("--json", action="store_true")
    query.set_defaults(func=cmd_query)

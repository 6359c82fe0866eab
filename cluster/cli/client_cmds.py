"""``cluster topic``, ``send``, ``consume`` and ``query``: a client's view of the cluster."""

from __future__ import annotations

import json
import sys
import time

from rocketbox.cluster.protocol import CLI_CONSUMER_GROUP
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY
from rocketbox.cluster.topic_attributes import MESSAGE_TYPES, declared_message_type
from rocketbox.cluster.cli.common import (client_config, consumer_group_name, int_within, iso_ms, new_console,
                                         open_admin, print_json, print_json_line, producer_group_name, table,
                                         time_ms, topic_name)


GROUP_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%")


def cmd_topic(args) -> int:
    if args.action in ("create", "update") and args.topic.startswith(GROUP_TOPIC_PREFIXES) and not args.group_topic:
        print(f"error: {args.topic} is a consumer group's retry or dead-letter topic, which the broker makes "
              f"itself; pass --group-topic to {args.action} it anyway", file=sys.stderr)
        return 2
    with open_admin(args) as admin:
        if args.action in ("create", "update"):
            admin.create_topic(args.topic, args.queues, perm=args.perm, message_type=args.message_type)
            kind = f", message type {args.message_type}" if args.message_type else ""
            print(f"topic {args.topic}: {args.queues} queues per broker{kind}")
        elif args.action == "delete":
            # mqadmin deleteTopic says "success" for a topic no broker has; found nothing is exit 1 here.
            if args.topic not in admin.topic_list() and not admin.topic_configs(args.topic):
                print(f"error: topic {args.topic} does not exist (no NameServer route, no broker has it): "
                      f"nothing deleted", file=sys.stderr)
                return 1
            admin.delete_topic(args.topic)
            print(f"topic {args.topic} deleted")
        elif args.action == "list":
            for topic in admin.topic_list():
                print_json_line({"topic": topic}) if args.json else print(topic)
        elif args.action == "route":
            route = admin.route(args.topic)
            # The route has no attributes (RocketMQ's QueueData neither): each master's config does.
            types = {name: declared_message_type(cfg.get("attributes") or {})
                     for name, cfg in admin.topic_configs(args.topic).items()}
            if args.json:
                print_json({**route, "messageTypes": types})
            else:
                new_console().print(table(f"route of {args.topic}", ["broker", "read", "write", "perm", "type",
                                                                     "addresses"],
                                        [[q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"],
                                          types.get(q["brokerName"]) or "any",
                                          json.dumps(next((b["brokerAddrs"] for b in route["brokerDatas"]
                                                           if b["brokerName"] == q["brokerName"]), {}))]
                                         for q in route["queueDatas"]]))
    return 0


def _bodies(args):
    """(label, body) to send: the argument ``--count`` times, or each stdin line as it arrives."""
    if args.body is not None:
        for _ in range(args.count):
            yield "", args.body.encode()
        return
    for number, line in enumerate(sys.stdin.buffer, 1):
        body = line.rstrip(b"\n").removesuffix(b"\r")
        for _ in range(args.count):
            yield f"line {number}: ", body


def cmd_send(args) -> int:
    """Each result is printed as soon as its send is answered; anything but SEND_OK goes to stderr and
    makes the exit code 1 (as a failed command should), and the other lines are still sent."""
    from rocketbox.cluster.client.message import Message
    from rocketbox.cluster.client.producer import Producer
    from rocketbox.cluster.errors import ClientError
    failed = 0
    with Producer(args.group, config=client_config(args)) as producer:
        known = producer.routes.get(args.topic) is not None
        for label, body in _bodies(args):
            if not body:
                print(f"error: {label}the message body is empty (not sent)", file=sys.stderr)
                failed += 1
                continue
            try:
                r = producer.send(Message(args.topic, body, tags=args.tags, keys=args.keys))
            except ClientError as exc:
                print(f"error: {label}{exc}", file=sys.stderr)
                failed += 1
                continue
            row = {"status": r.status.name, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
                   "broker": r.queue.broker_name, "queueId": r.queue.queue_id, "queueOffset": r.queue_offset}
            ok = r.status.name == "SEND_OK"
            failed += not ok
            if not known:
                known = True
                print(f"note: topic {args.topic} did not exist; the broker created it ({r.queue.broker_name}, "
                      f"from the {AUTO_CREATE_TOPIC_KEY} template) because topic auto-create is on "
                      f"(cluster up --no-auto-create-topic turns it off)", file=sys.stderr)
            if args.json:
                print_json_line(row)
            else:
                print(f"{label}{row['status']} msgId={row['msgId']} offsetMsgId={row['offsetMsgId']} "
                      f"{row['broker']}:{row['queueId']}@{row['queueOffset']}", file=sys.stdout if ok else sys.stderr)
            sys.stdout.flush()
    return 1 if failed else 0


def message_dict(m) -> dict:
    return {"topic": m.topic, "broker": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "tags": m.tags, "keys": m.keys,
            "bornTimestamp": m.born_timestamp_ms, "storeTimestamp": m.store_timestamp_ms,
            "reconsumeTimes": m.reconsume_times, "properties": m.properties,
            "body": m.body.decode("utf-8", "replace")}


def cmd_consume(args) -> int:
    """Read messages from the start (or --from offsets) of every queue, without a consumer group commit."""
    from rocketbox.cluster.client.broker_api import PullStatus
    from rocketbox.cluster.client.consumer import PullConsumer
    shown = 0
    deadline = time.monotonic() + args.wait_s
    with PullConsumer(args.group, config=client_config(args)) as consumer:
        queues = consumer.queues(args.topic)
        offsets = {mq: 0 for mq in queues}
        if args.from_committed:
            offsets = {mq: consumer.committed_offset(mq) or 0 for mq in queues}
            with open_admin(args) as admin:
                known = args.group in admin.groups_of(args.topic)
            if not known:
                print(f"note: group {args.group} has no committed offsets on {args.topic} (it never consumed it): "
                      f"reading from each queue's first offset", file=sys.stderr)
        # Pass over every queue until nothing new comes; with --wait-s, keep polling that long.
        while shown < args.max:
            progressed = False
            for mq in queues:
                result = consumer.pull(mq, offsets[mq], min(32, args.max - shown), args.tags or "*")
                offsets[mq] = result.next_begin_offset
                if result.status == PullStatus.FOUND:
                    progressed = True
                for m in result.messages[:args.max - shown]:
                    if args.json:
                        print_json_line(message_dict(m))
                    else:
                        print(f"{m.broker_name}:{m.queue_id}@{m.queue_offset} {m.msg_id}{_tags_keys(m)} "
                              f"body={m.body[:200].decode('utf-8', 'replace')}")
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


def _tags_keys(m) -> str:
    """`` tags=.. keys=..`` for what the message has; nothing for what it has not."""
    return (f" tags={m.tags}" if m.tags else "") + (f" keys={' '.join(m.keys)}" if m.keys else "")


def query_problem(args) -> str | None:
    if not (args.id or args.msg_id or args.key or args.offset is not None):
        return "say what to look up: --id, --msg-id, --key, or --offset (with --queue)"
    if (args.msg_id or args.key or args.offset is not None) and not args.topic:
        return "--msg-id, --key and --offset need --topic"
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
    from rocketbox.cluster.client.message_lookup import messages_by_id
    from rocketbox.cluster.protocol import MessageQueue
    if args.id:
        # mqadmin's queryMsgById: an offset message id, else a UNIQ_KEY (in --topic, or in every
        # topic); with --topic, last of all a key.
        found = messages_by_id(admin, args.id, args.topic, args.max)
        if found or args.topic is None:
            return found
        return admin.query_by_key(args.topic, args.id, args.max)
    if args.msg_id:
        return admin.query_by_unique_key(args.topic, args.msg_id, args.max)
    if args.key:
        return admin.query_by_key(args.topic, args.key, args.max, args.begin or 0, args.end)
    broker = args.broker or _only_broker(admin, args.topic)
    message = admin.message_at(MessageQueue(args.topic, broker, args.queue), args.offset)
    return [message] if message is not None else []


def _print_message(row: dict) -> None:
    tags = f" tags={row['tags']}" if row["tags"] else ""
    keys = f" keys={' '.join(row['keys'])}" if row["keys"] else ""
    print(f"{row['topic']} {row['broker']}:{row['queueId']}@{row['queueOffset']} msgId={row['msgId']} "
          f"offsetMsgId={row['offsetMsgId']}{tags}{keys} "
          f"stored={iso_ms(row['storeTimestamp'])} reconsumeTimes={row['reconsumeTimes']}")
    print(f"  body: {row['body'][:200]}")
    for track in row["tracks"]:
        print(f"  group {track['consumerGroup']}: {track['trackType']} (committed offset {track['consumerOffset']})")
    if not row["tracks"]:
        print("  no consumer group has an offset on this topic or subscribes to it")


def cmd_query(args) -> int:
    with open_admin(args) as admin:
        rows = [{**message_dict(m), "tracks": admin.message_track(m)} for m in _query_messages(admin, args)]
    for row in rows:
        print_json_line(row) if args.json else _print_message(row)
    if not rows:
        print("no message found" + (" (a key needs --topic)" if args.id and not args.topic else ""), file=sys.stderr)
        return 1
    return 0


def add_parsers(sub) -> None:
    """The subcommands topic, send, consume and query."""
    topic = sub.add_parser("topic", help="create, update, list, route, delete topics")
    topic.add_argument("action", choices=("create", "update", "list", "route", "delete"), help="what to do")
    topic.add_argument("topic", nargs="?", type=topic_name, help="the topic (every action but list)")
    topic.add_argument("--queues", type=int_within(1, 1024), default=4, help="queues per broker, 1..1024")
    topic.add_argument("--perm", type=int_within(0, 7), default=6, help="4 read, 2 write (6: both)")
    topic.add_argument("--message-type", choices=MESSAGE_TYPES,
                       help="what the topic takes (RocketMQ 5's message.type; default: every type but "
                            "PRIORITY, and update keeps the type it has; PRIORITY: priority messages, the "
                            "higher priorities popped first)")
    topic.add_argument("--group-topic", action="store_true",
                       help="allow a %%RETRY%%<group> or %%DLQ%%<group> name (the broker makes those itself)")
    topic.add_argument("--json", action="store_true", help="JSON instead of text")
    topic.set_defaults(func=cmd_topic)

    send = sub.add_parser("send", help="send a message (or one per stdin line)")
    send.add_argument("topic", type=topic_name, help="the topic to send to")
    send.add_argument("body", nargs="?", help="the message body (default: one message per stdin line)")
    send.add_argument("--tags", help="the message's tag")
    send.add_argument("--keys", help="its keys, space separated (the index finds them)")
    send.add_argument("--count", type=int, default=1, help="send each body this many times (default 1)")
    send.add_argument("--group", default="CLI_PRODUCER", type=producer_group_name,
                      help="producer group (default CLI_PRODUCER)")
    send.add_argument("--json", action="store_true", help="one JSON line per send result")
    send.set_defaults(func=cmd_send)

    consume = sub.add_parser("consume", help="print messages of a topic")
    consume.add_argument("topic", type=topic_name, help="the topic to read")
    consume.add_argument("--group", default=CLI_CONSUMER_GROUP, type=consumer_group_name,
                         help=f"consumer group (default {CLI_CONSUMER_GROUP})")
    consume.add_argument("--tags", help="tag expression, e.g. TagA || TagB (default every message)")
    consume.add_argument("--max", type=int, default=100, help="stop after this many messages (default 100)")
    consume.add_argument("--wait-s", type=float, default=0.0, help="keep polling this long for new messages")
    consume.add_argument("--from-committed", action="store_true", help="start at the group's committed offsets")
    consume.add_argument("--commit", action="store_true", help="commit the group's offsets afterwards")
    consume.add_argument("--json", action="store_true", help="one JSON line per message")
    consume.set_defaults(func=cmd_consume)

    query = sub.add_parser("query", help="look a message up; shows whether each consumer group has consumed it")
    which = query.add_mutually_exclusive_group()
    which.add_argument("--id", help="offset message id or msg id (UNIQ_KEY: in --topic, else in every topic); "
                                    "with --topic, also a key")
    which.add_argument("--msg-id", help="the msg id (UNIQ_KEY) a producer gave the message; needs --topic")
    which.add_argument("--key", help="a KEYS word; needs --topic; narrow with --begin/--end/--max")
    which.add_argument("--offset", type=int, help="the queue offset; needs --topic and --queue (and --broker "
                                                  "when the topic is on several brokers)")
    query.add_argument("--topic", type=topic_name, help="the topic the message is in")
    query.add_argument("--broker", help="broker name, with --offset")
    query.add_argument("--queue", type=int, help="queue id, with --offset")
    query.add_argument("--max", type=int, default=32, help="at most this many messages by key or msg id (default 32)")
    query.add_argument("--begin", "--begin-ms", type=time_ms, help="stored at or after: epoch ms or ISO 8601")
    query.add_argument("--end", "--end-ms", type=time_ms, help="stored at or before: epoch ms or ISO 8601")
    query.add_argument("--json", action="store_true", help="one JSON line per message")
    query.set_defaults(func=cmd_query)

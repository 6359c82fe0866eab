"""A push consumer's answer to GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus): RocketMQ's
ConsumerRunningInfo, built from the consumer's live state.

``properties`` carries the consumer's settings under RocketMQ's names and its ``PROP_*`` facts;
``subscriptionSet`` its subscriptions; ``mqTable`` each assigned queue's ProcessQueueInfo (a
map keyed by MessageQueue, written as fastjson writes it). ``statusTable`` (pull and consume
RT/TPS per topic) stays empty: the client does not time its calls. ``jstack``, when the request
asks (``jstackEnable``, mqadmin consumerStatus -s), holds the stack of every thread of the
process, as Python prints them, in place of the JVM's.
"""

from __future__ import annotations

import sys
import threading
import traceback

from rocketbox.cluster.fastjson_format import dumps as fastjson_dumps, message_queue_key
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.wire_format import Command

CLIENT_VERSION = "RocketBox-0.1.0"


def thread_stacks() -> str:
    """Every thread's name and stack, innermost call last (Python's traceback format)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(f'"{names.get(ident, ident)}"\n' + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


def running_info(consumer, jstack: bool = False) -> dict:
    with consumer._queues_lock:
        queues = dict(consumer._queues)
    orderly = consumer._orderly
    mq_table = {}
    for mq, pq in sorted(queues.items(), key=lambda item: (item[0].topic, item[0].broker_name, item[0].queue_id)):
        batches = sorted(pq.in_flight)
        mq_table[message_queue_key(mq.topic, mq.broker_name, mq.queue_id)] = {
            "cachedMsgCount": pq.cached_count,
            "cachedMsgMaxOffset": pq.next_offset - 1 if pq.cached_count else 0,
            "cachedMsgMinOffset": batches[0] if batches else 0,
            "cachedMsgSizeInMiB": pq.cached_bytes // (1024 * 1024),
            "commitOffset": pq.last_committed,
            "droped": pq.dropped,   # RocketMQ's spelling
            "locked": bool(orderly is not None and orderly.lock_valid(mq)),
        }
    subscriptions = [{"classFilterMode": False, "expressionType": selector.expression_type, "subString": selector.expression,
                      "topic": topic} for topic, selector in sorted(consumer._selectors.items())]
    properties = {
        "consumerGroup": consumer.group, "messageModel": consumer.message_model,
        "consumeThreadMin": str(consumer._consume_threads), "consumeThreadMax": str(consumer._consume_threads),
        "consumeMessageBatchMaxSize": str(consumer.consume_batch_max),
        "pullThresholdForQueue": str(consumer.cached_messages_max), "maxReconsumeTimes": str(consumer.max_reconsume_times),
        "PROP_NAMESERVER_ADDR": ";".join(e.removeprefix("tcp://") for e in consumer.cfg.namesrv_endpoints),
        "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMEORDERLY": str(orderly is not None).lower(),
        "PROP_THREADPOOL_CORE_SIZE": str(consumer._consume_threads),
        "PROP_CONSUMER_START_TIMESTAMP": str(consumer.started_ms), "PROP_CLIENT_VERSION": CLIENT_VERSION,
    }
    return {"jstack": thread_stacks() if jstack else "", "mqTable": mq_table, "properties": properties, "statusTable": {},
            "subscriptionSet": subscriptions}


def answer_running_info(consumer, request: Command) -> Command:
    jstack = request.fields.get("jstackEnable") == "true"
    return request.response(ResponseCode.SUCCESS, body=fastjson_dumps(running_info(consumer, jstack)).encode())

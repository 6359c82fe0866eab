"""A push consumer's answer to CONSUME_MESSAGE_DIRECTLY (309; mqadmin queryMsgById -g -d, relayed by
the broker with the stored record as body): the consumer's listener runs on that one message and
the answer is RocketMQ's ConsumeMessageDirectlyResult, as the Java client's
ConsumeMessage*Service.consumeMessageDirectly builds it.

``consumeResult``: CR_SUCCESS, CR_LATER (RECONSUME_LATER or False; an orderly listener's
SUSPEND_CURRENT_QUEUE_A_MOMENT), CR_THROW_EXCEPTION (``remark`` says what was raised). A listener
returning None counts as success, as everywhere in this package (Java's null is CR_RETURN_NULL).
Nothing is committed or sent back: the message is consumed out of band, as in RocketMQ. The
listener runs on the thread that received the request (the client's I/O thread): an admin's rare
request, answered within the broker's 10 s.
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster.client.consume_service import ConsumeStatus
from rocketbox.cluster.client.message import decode_messages, restore_retried_topic
from rocketbox.cluster.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketbox.cluster.protocol import MessageQueue, ResponseCode, to_json_bytes
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

_LATER = (False, ConsumeStatus.RECONSUME_LATER, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT)


def answer_consume_directly(consumer, request: Command) -> Command:
    group = request.fields.get("consumerGroup", "")
    if group != consumer.group:   # the Java client's answer and wording
        return request.response(ResponseCode.SYSTEM_ERROR,
                                remark=f"The Consumer Group <{group}> not exist in this consumer")
    try:
        (message,) = decode_messages(request.body, request.fields.get("brokerName", ""))
    except ValueError as exc:
        return request.response(ResponseCode.SYSTEM_ERROR, remark=f"the body is not one stored message: {exc}")
    restore_retried_topic(message)
    orderly = consumer._orderly is not None
    result = {"order": orderly, "autoCommit": True, "consumeResult": "CR_SUCCESS", "remark": None}
    started = time.monotonic()
    try:
        if orderly:
            mq = MessageQueue(message.topic, message.broker_name, message.queue_id)
            status = consumer.listener([message], ConsumeOrderlyContext(mq, 0))
        else:
            status = consumer.listener([message])
        if status in _LATER:
            result["consumeResult"] = "CR_LATER"
    except Exception as exc:  # the listener's failure is the answer, not the client's
        log.warning("consumeMessageDirectly: the listener of %s raised on %s: %r", group, message.msg_id, exc)
        result["consumeResult"] = "CR_THROW_EXCEPTION"
        result["remark"] = f"{type(exc).__name__}: {exc}"
    result["spentTimeMills"] = int((time.monotonic() - started) * 1000)
    return request.response(ResponseCode.SUCCESS, body=to_json_bytes(result))

"""Request codes RocketMQ defines that RocketBox refuses on purpose, each with the reason a client sees.

A code nobody handles gets request_dispatch's generic "request code N is not supported by ...";
these get REQUEST_CODE_NOT_SUPPORTED with why (docs/ARCHITECTURE.md, "Doors", lists them), because
a RocketMQ tool or client may send them and its user should learn what to do instead.
"""

from __future__ import annotations

from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command

_UNUSED = ("RocketMQ defines this code, but no RocketMQ broker serves it (4.9.8 has no handler for it) "
           "and no tool sends it")

BROKER_REFUSALS: dict[int, str] = {
    RequestCode.QUERY_BROKER_OFFSET: _UNUSED,
    RequestCode.GET_TOPIC_CONFIG_LIST: _UNUSED,
    RequestCode.GET_TOPIC_NAME_LIST: _UNUSED,
    RequestCode.TRIGGER_DELETE_FILES: _UNUSED + "; deleteExpiredCommitLog (329) deletes expired files now",
    RequestCode.SUSPEND_CONSUMER: _UNUSED,
    RequestCode.RESUME_CONSUMER: _UNUSED,
    RequestCode.RESET_CONSUMER_OFFSET_IN_CONSUMER: _UNUSED + "; resetOffsetByTime (222) resets a group's offsets",
    RequestCode.RESET_CONSUMER_OFFSET_IN_BROKER: _UNUSED + "; resetOffsetByTime (222) resets a group's offsets",
    RequestCode.ADJUST_CONSUMER_THREAD_POOL: _UNUSED,
    RequestCode.WHO_CONSUME_THE_MESSAGE: _UNUSED + "; QUERY_TOPIC_CONSUME_BY_WHO (300) names a topic's groups",
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (
        "no mqadmin verb of 4.9.8 sends it (getConsumerStatus is not registered); consumerStatus "
        "(GET_CONSUMER_RUNNING_INFO 307) asks each member for its queues and offsets"),
    RequestCode.REGISTER_FILTER_SERVER: (
        "RocketMQ's filter servers (class filters) are not part of RocketBox (RocketMQ 5 dropped them): "
        "tag and SQL92 filters run in the broker"),
    RequestCode.REGISTER_MESSAGE_FILTER_CLASS: (
        "RocketMQ's filter servers (class filters) are not part of RocketBox (RocketMQ 5 dropped them): "
        "tag and SQL92 filters run in the broker"),
}


def refusal_handlers(refusals: dict[int, str]) -> dict:
    """A handler for each code that answers REQUEST_CODE_NOT_SUPPORTED with its reason."""
    def handler_for(reason: str):
        def refuse(request: Command, reply=None) -> Command:
            return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                    remark=f"request code {request.code} is refused: {reason}")
        return refuse
    return {code: handler_for(reason) for code, reason in refusals.items()}

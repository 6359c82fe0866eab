"""How the broker applies subscriptions: refusing what it cannot serve, and filtering a pull.

The expressions themselves live in ``cluster/filter`` (shared with the client).

Tags ("*" or "TagA || TagB"): the broker matches the tag hash stored in the ConsumeQueue
(no CommitLog read); the client re-checks the tag string because two tags can share a
hash (SPEC §2).

SQL92 (``expressionType`` "SQL92", RocketMQ's enablePropertyFilter): the ConsumeQueue
cannot pre-filter, so the broker reads the candidates' records and evaluates the
expression (``sql92.py``) over their properties; only matching records are answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketbox.cluster import _native
from rocketbox.cluster.filter.expressions import EXPRESSION_SQL92, EXPRESSION_TAG, is_tag_type
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, json_body
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.message.properties import decode_properties

if TYPE_CHECKING:
    from rocketbox.cluster.filter.sql92 import SqlSelector

# Queue entries one SQL92 pull reads from the CommitLog: matches may be sparse, and a pull
# that finds none still moves the consumer past everything it read.
SQL_SCAN_ENTRIES = 256
_POS, _SIZE, _QUEUE_OFFSET, _PROPS_POS, _PROPS_LEN = (
    _native.ScannedRecord._fields.index(name)
    for name in ("pos", "total_size", "queue_offset", "properties_pos", "properties_len"))


def sql_selector(expression_type: str | None, expression, property_filter_enabled: bool,
                 subject: str = "subscription") -> SqlSelector | None:
    """None for a tag subscription; the compiled selector of an SQL92 one.

    Raises ProtocolError as RocketMQ answers: SYSTEM_ERROR when the broker does not filter by
    properties, SUBSCRIPTION_PARSE_FAILED for an unknown type or an invalid expression.
    """
    if is_tag_type(expression_type):
        return None
    if expression_type != EXPRESSION_SQL92:
        raise ProtocolError(f"{subject}: expression type {expression_type!r} is unknown ({EXPRESSION_TAG} or "
                            f"{EXPRESSION_SQL92})", ResponseCode.SUBSCRIPTION_PARSE_FAILED)
    if not property_filter_enabled:
        raise ProtocolError(f"{subject}: this broker does not filter messages by {EXPRESSION_SQL92} "
                            f"(enable_property_filter is off; RocketMQ's enablePropertyFilter)")
    # The SQL92 parser (~10 ms of a broker's start) loads with the first SQL92 subscription.
    from rocketbox.cluster.filter.sql92 import SqlParseError, compile_sql
    try:
        return compile_sql(str(expression or ""))
    except SqlParseError as error:
        raise ProtocolError(f"{subject}: {error}", ResponseCode.SUBSCRIPTION_PARSE_FAILED) from None


def check_heartbeat_subscriptions(heartbeat: dict, property_filter_enabled: bool) -> None:
    """Refuse a HEART_BEAT whose consumers subscribe with an expression this broker cannot serve."""
    for consumer in heartbeat.get("consumerDataSet") or []:
        for sub in consumer.get("subscriptionDataSet") or []:
            if not is_tag_type(sub.get("expressionType")):
                sql_selector(sub.get("expressionType"), sub.get("subString"), property_filter_enabled,
                             f"group {consumer.get('groupName')}, topic {sub.get('topic')}")


class ClientConfigCheck:
    """CHECK_CLIENT_CONFIG (46): a consumer asks, before it starts, whether this broker can serve its
    subscription (the Java client's checkClientInBroker, for every non-tag subscription). As RocketMQ's
    ClientManageProcessor: a tag subscription (or none) is fine; SQL92 needs enablePropertyFilter
    (SYSTEM_ERROR "The broker does not support consumer to filter message by SQL92" otherwise) and an
    expression that compiles (SUBSCRIPTION_PARSE_FAILED with the reason)."""

    def __init__(self, cfg):
        self.cfg = cfg

    @answers_refusals
    def on_check_client_config(self, request: Command, reply=None) -> Command:
        body = json_body(request) if request.body else {}
        data = body.get("subscriptionData") if isinstance(body, dict) else None
        if isinstance(data, dict) and not is_tag_type(data.get("expressionType")):
            expression_type = str(data.get("expressionType"))
            if not self.cfg.enable_property_filter:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        remark=f"The broker does not support consumer to filter message by "
                                               f"{expression_type}")
            sql_selector(expression_type, data.get("subString"), True,
                         f"group {body.get('group')}, topic {data.get('topic')}")
        return request.response(ResponseCode.SUCCESS)


def select_records(payload: bytes, count: int, selector: SqlSelector, max_count: int) -> tuple[bytes, int, int | None]:
    """The records of ``payload`` (``count`` concatenated CommitLog records) whose properties
    match ``selector``, at most ``max_count`` of them: (records, how many, the queue offset
    to pull next when the scan stopped at ``max_count`` before the end, else None)."""
    scan = _native.scan_records(payload, 0, len(payload), max_rows=count)
    rows = scan.rows
    width = _native.SCAN_COLUMNS
    runs: list[list[int]] = []  # [start, end) of back-to-back matching records
    kept = 0
    for base in range(0, scan.count * width, width):
        pos, size = rows[base + _POS], rows[base + _SIZE]
        props_pos, props_len = rows[base + _PROPS_POS], rows[base + _PROPS_LEN]
        if not selector.matches(decode_properties(payload[props_pos:props_pos + props_len])):
            continue
        if runs and runs[-1][1] == pos:
            runs[-1][1] = pos + size
        else:
            runs.append([pos, pos + size])
        kept += 1
        if kept >= max_count:
            if base + width < scan.count * width:
                return _joined(payload, runs), kept, rows[base + _QUEUE_OFFSET] + 1
            break
    return _joined(payload, runs), kept, None


def _joined(payload: bytes, runs: list[list[int]]) -> bytes:
    if len(runs) == 1 and runs[0] == [0, len(payload)]:
        return payload
    return b"".join(payload[start:end] for start, end in runs)

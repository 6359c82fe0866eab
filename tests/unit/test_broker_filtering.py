"""The broker's subscription checks and SQL92 record selection (cluster/broker/filtering.py)."""

from __future__ import annotations

import pytest

from rocketbox.cluster.broker.filtering import check_heartbeat_subscriptions, select_records, sql_selector
from rocketbox.cluster.filter.expressions import tag_hashes_of
from rocketbox.cluster.filter.sql92 import compile_sql
from rocketbox.cluster.protocol import ProtocolError, ResponseCode
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import encode_properties
from rocketbox.cluster.message.tags import java_string_hash


def _record(queue_offset: int, **properties) -> bytes:
    return fmt.encode(queue_id=0, flag=0, queue_offset=queue_offset, phys_offset=queue_offset * 1000, sys_flag=0,
                      born_timestamp_ms=1, born_host=pack_host("127.0.0.1", 1), store_timestamp_ms=2,
                      store_host=pack_host("127.0.0.1", 2), reconsume_times=0, prepared_transaction_offset=0,
                      body=f"m{queue_offset}".encode(), topic=b"T", properties=encode_properties(properties))


def test_tag_subscriptions_match_hashes():
    assert tag_hashes_of("*") is None and tag_hashes_of("") is None
    assert tag_hashes_of("Aa || C") == {java_string_hash("Aa"), java_string_hash("C")}
    assert sql_selector(None, "Aa || C", False) is None
    assert sql_selector("TAG", "Aa || C", False) is None


def test_sql_subscriptions_need_the_setting_and_a_valid_expression():
    assert sql_selector("SQL92", "a > 1", True) is compile_sql("a > 1")
    with pytest.raises(ProtocolError) as off:
        sql_selector("SQL92", "a > 1", False)
    assert off.value.code == ResponseCode.SYSTEM_ERROR and "enable_property_filter" in str(off.value)
    with pytest.raises(ProtocolError) as bad:
        sql_selector("SQL92", "a >", True, "group G, topic T")
    assert bad.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert str(bad.value).startswith("group G, topic T: invalid SQL92 expression")
    with pytest.raises(ProtocolError) as unknown:
        sql_selector("CLASS", "x", True)
    assert unknown.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_heartbeat_checks_every_sql_subscription():
    heartbeat = {"clientID": "c", "consumerDataSet": [{"groupName": "G", "subscriptionDataSet": [
        {"topic": "T1", "subString": "*"}, {"topic": "T2", "subString": "A || B", "expressionType": "TAG"},
        {"topic": "T3", "subString": "a = 1", "expressionType": "SQL92"}]}]}
    check_heartbeat_subscriptions(heartbeat, True)
    with pytest.raises(ProtocolError, match="topic T3"):
        check_heartbeat_subscriptions(heartbeat, False)
    heartbeat["consumerDataSet"][0]["subscriptionDataSet"][2]["subString"] = "a = = 1"
    with pytest.raises(ProtocolError, match="group G, topic T3: invalid SQL92") as refused:
        check_heartbeat_subscriptions(heartbeat, True)
    assert refused.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_select_records_keeps_matching_records_whole_and_says_where_to_go_on():
    records = [_record(i, a=str(i), TAGS=f"T{i % 2}") for i in range(10)]
    payload = b"".join(records)
    even = compile_sql("TAGS = 'T0'")
    kept, count, next_offset = select_records(payload, 10, even, 32)
    assert (kept, count, next_offset) == (b"".join(records[0::2]), 5, None)
    kept, count, next_offset = select_records(payload, 10, even, 2)
    assert (kept, count, next_offset) == (records[0] + records[2], 2, 3)
    everything = compile_sql("a IS NOT NULL")
    assert select_records(payload, 10, everything, 32) == (payload, 10, None)
    assert select_records(payload, 10, everything, 10) == (payload, 10, None)  # the last one: nothing left to skip
    run = compile_sql("a BETWEEN 3 AND 5")
    assert select_records(payload, 10, run, 32) == (b"".join(records[3:6]), 3, None)
    assert select_records(payload, 10, compile_sql("a > 100"), 32) == (b"", 0, None)

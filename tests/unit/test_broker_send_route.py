"""The send handler read in order (broker/send.py): ``parse`` reads a header once into a
``SendRequest`` (the properties decoded once, and only when a route needs them), and ``_route`` sends
a message to a group's retry topic past the group's maximum to its dead-letter topic, as RocketMQ's
SendMessageProcessor.handleRetryTopic. A real service in process over a real store."""

from __future__ import annotations

from rocketbox.cluster.broker.boot import boot
from rocketbox.cluster.broker.send import parse
from rocketbox.cluster.broker.service import BrokerService
from rocketbox.cluster.config import BrokerConfig
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.protocol import RequestCode, ResponseCode, dlq_topic, retry_topic
from rocketbox.cluster.wire_format import Command
from tests.store_harness import tiny_config

GROUP = "RouteCG"


def _send_command(topic: str, body: bytes, reconsume_times: int = 0, sys_flag: int = 0, **props: str) -> Command:
    return Command(RequestCode.SEND_MESSAGE, {
        "producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "1",
        "queueId": "0", "sysFlag": str(sys_flag), "bornTimestamp": "1", "flag": "0",
        "reconsumeTimes": str(reconsume_times), "properties": properties_text([("UNIQ_KEY", body.hex()),
                                                                              *props.items()])}, body)


def test_parse_decodes_the_properties_only_for_a_route_that_reads_them():
    plain = parse(_send_command("T", b"a", KEYS="k"), lambda: 0)
    assert plain.properties is None and plain.wait_store and not plain.half
    half = parse(_send_command("T", b"b", sys_flag=4, TRAN_MSG="true", PGROUP="PG"), lambda: 0)
    assert half.half and half.properties == {"UNIQ_KEY": b"b".hex(), "TRAN_MSG": "true", "PGROUP": "PG"}
    no_wait = parse(_send_command("T", b"c", WAIT="false"), lambda: 0)
    assert not no_wait.wait_store and no_wait.properties is None   # WAIT read and cut on the text
    assert no_wait.stored_text == properties_text([("UNIQ_KEY", b"c".hex())])


def test_a_send_to_a_retry_topic_past_the_groups_maximum_goes_to_its_dead_letter_topic(tmp_path):
    service = BrokerService(boot(BrokerConfig(store=tiny_config(tmp_path / "store"))))
    try:
        service.groups.ensure(GROUP)
        service.ensure_system_topic(retry_topic(GROUP))
        limit = service.groups.retry_max_times(GROUP)
        below = service.handlers[RequestCode.SEND_MESSAGE](
            _send_command(retry_topic(GROUP), b"again", reconsume_times=limit - 1), None)
        at_limit = service.handlers[RequestCode.SEND_MESSAGE](
            _send_command(retry_topic(GROUP), b"dead", reconsume_times=limit), None)
        assert below.code == at_limit.code == ResponseCode.SUCCESS
        stored = {rec.topic: rec.body for rec in (service.store.read_record(phys) for phys in _offsets(service))}
        assert stored[retry_topic(GROUP)] == b"again" and stored[dlq_topic(GROUP)] == b"dead"
        assert service.topics.get(dlq_topic(GROUP)) is not None
    finally:
        service.shutdown()


def _offsets(service: BrokerService) -> list[int]:
    """The CommitLog offset of every record written, in order."""
    offsets, phys = [], service.store.commitlog_floor()
    for _ in range(1000):
        rec = service.store.read_record(phys)
        if rec is None:
            return offsets
        offsets.append(phys)
        phys += rec.total_size
    return offsets

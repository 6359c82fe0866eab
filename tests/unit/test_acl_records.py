"""What touching a stored record needs (acl/records.py: its real topic, as RocketMQ's properties
tell), and the caller's access the guard hands a handler (acl/guard.py ``CallerAccess``): the same
decision as the guard's own, refusals counted, nothing asked of the cluster's own processes."""

from __future__ import annotations

import pytest

from rocketbox.cluster.acl.acl_file import AclFile
from rocketbox.cluster.acl.guard import AclGuard
from rocketbox.cluster.acl.permissions import PUB, SUB
from rocketbox.cluster.acl.records import readable_records, real_topic, record_resources, require_record
from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.protocol import AccessDenied, RequestCode, ResponseCode, answers_refusals
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.wire_format import DOOR_REMOTING, Command

pytestmark = pytest.mark.timeout(60)

HALF, SCHEDULE = "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX"


@pytest.mark.parametrize("topic, properties, perm, needed", [
    ("T", {}, SUB, {"T": SUB}),
    ("T", {"REAL_TOPIC": "X", "RETRY_TOPIC": "Y"}, SUB, {"T": SUB}),     # a client's properties change nothing
    (HALF, {"REAL_TOPIC": "B"}, PUB, {"B": PUB}),                          # a half: ending it needs PUB on B
    (HALF, {"REAL_TOPIC": "B"}, SUB, {"B": SUB}),
    (HALF, {}, SUB, {HALF: SUB}),
    (SCHEDULE, {"REAL_TOPIC": "B"}, SUB, {"B": SUB}),                      # a delayed message
    (SCHEDULE, {"REAL_TOPIC": "%RETRY%G", "RETRY_TOPIC": "B"}, SUB,       # a retry waiting for its delay
     {"%RETRY%G": SUB, "B": SUB}),
    ("%RETRY%G", {"RETRY_TOPIC": "B"}, SUB, {"%RETRY%G": SUB, "B": SUB}),
    ("%RETRY%G", {}, SUB, {"%RETRY%G": SUB}),
    ("%RETRY%G_B", {"RETRY_TOPIC": "B"}, SUB, {"%RETRY%G_B": SUB, "B": SUB}),   # a pop retry
    ("%DLQ%G", {"RETRY_TOPIC": "B"}, SUB, {"%DLQ%G": SUB, "%RETRY%G": SUB, "B": SUB}),
    ("%RETRY%G", {"RETRY_TOPIC": "%RETRY%H"}, SUB, {"%RETRY%G": SUB}),
    ("RMQ_SYS_TRANS_OP_HALF_TOPIC", {}, SUB, {"RMQ_SYS_TRANS_OP_HALF_TOPIC": SUB}),
])
def test_record_resources(topic, properties, perm, needed):
    assert record_resources(topic, properties, perm) == needed


def test_real_topic():
    assert real_topic("T", {"REAL_TOPIC": "X"}) == "T"
    assert real_topic(HALF, {"REAL_TOPIC": "B"}) == "B"
    assert real_topic(SCHEDULE, {"REAL_TOPIC": "%RETRY%G", "RETRY_TOPIC": "B"}) == "B"
    assert real_topic("%RETRY%G", {"RETRY_TOPIC": "B"}) == "B" and real_topic("%RETRY%G", {}) == "%RETRY%G"


ACL = """
accounts:
  - accessKey: reader01
    secretKey: reader01-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["Mine=SUB"]
"""


def _record(topic: str, **properties) -> fmt.Record:
    return fmt.Record(0, 0, 0, 0, 0, 0, 0, 0, b"", 0, b"", 0, 0, b"", topic,
                      properties_text(list(properties.items())).encode())


class Viewer:
    """A handler that reads the records a request names, as the broker's do."""

    def __init__(self, records):
        self.records = records

    @answers_refusals
    def on_view(self, request: Command, reply=None) -> Command:
        require_record(request, self.records[0])
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_query(self, request: Command, reply=None) -> Command:
        found = readable_records(request, self.records)
        return request.response(ResponseCode.SUCCESS, body=",".join(r.topic for r in found).encode())


@pytest.fixture
def guard(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    return AclGuard(AclFile(str(path)), "test", None)


def _signed(code: int) -> Command:
    fields = sign_remoting({"offset": "0"}, b"", "reader01", "reader01-secret")
    return Command(int(code), fields, door=DOOR_REMOTING, peer_address="10.0.0.1")


def test_a_handler_checks_the_record_it_found(guard):
    viewer = Viewer([_record("Other"), _record(HALF, REAL_TOPIC="Mine")])
    handlers = guard.wrap({RequestCode.VIEW_MESSAGE_BY_ID: viewer.on_view, RequestCode.QUERY_MESSAGE: viewer.on_query})
    refused = handlers[RequestCode.VIEW_MESSAGE_BY_ID](_signed(RequestCode.VIEW_MESSAGE_BY_ID), None)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert "No permission for topic:Other: accessKey=reader01 needs SUB, has DENY" in refused.remark
    assert guard.refusals[("remoting", "authorization")] == 1
    # A query answers only what the caller may read; nothing readable is a refusal with its reason.
    assert handlers[RequestCode.QUERY_MESSAGE](_signed(RequestCode.QUERY_MESSAGE), None).body == HALF.encode()
    viewer.records = [_record("Other")]
    assert handlers[RequestCode.QUERY_MESSAGE](_signed(RequestCode.QUERY_MESSAGE), None).code == \
        ResponseCode.NO_PERMISSION
    assert guard.refusals[("remoting", "authorization")] == 2


def test_without_an_account_the_handler_checks_nothing(guard):
    """Access control off, or the cluster's own process: no access on the request, every record served."""
    viewer = Viewer([_record("Other")])
    own = Command(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"})
    assert own.access is None
    assert viewer.on_view(own).code == ResponseCode.SUCCESS
    assert viewer.on_query(own).body == b"Other"


def test_access_denied_is_no_permission():
    assert AccessDenied("why").code == ResponseCode.NO_PERMISSION

"""mqadmin's ACL verbs through the remoting door (broker/admin_acl.py): an admin
account edits the cluster's plain_acl.yml (accounts, global white addresses) and every process
follows the edit; other accounts may not; an edit that would break the file is refused whole."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command

pytestmark = pytest.mark.timeout(180)

ACL = """
accounts:
  - accessKey: aclAdmin01
    secretKey: aclAdmin01-secret
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: reader01
    secretKey: reader01-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
TOPIC = "AclAdminTopic"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    acl_file = tmp_path_factory.mktemp("acl-admin-conf") / "plain_acl.yml"
    acl_file.write_text(ACL)
    with LocalCluster(str(tmp_path_factory.mktemp("acl-admin")), acl_file=str(acl_file)) as started:
        yield started


@pytest.fixture(scope="module")
def call(cluster):
    client = RemotingRpcClient(5000)
    broker = cluster.topology.brokers[0].remoting_address

    def signed(code: int, fields: dict, account: str, body: bytes = b"") -> Command:
        return client.call(broker, Command(code, sign_remoting(fields, body, account, f"{account}-secret"), body))
    signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": TOPIC, "readQueueNums": "1", "writeQueueNums": "1",
                                                 "perm": "6"}, "aclAdmin01")
    yield signed
    client.close()


def _file(cluster) -> dict:
    with open(cluster.topology.brokers[0].acl_file) as f:
        return yaml.safe_load(f)


def _send(call, account: str) -> Command:
    header = {"a": "AclAdminPG", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    return call(RequestCode.SEND_MESSAGE_V2, header, account, b"body")


def test_an_admin_creates_an_account_every_process_follows_and_deletes_it(cluster, call):
    create = {"accessKey": "newbie01", "secretKey": "newbie01-secret", "admin": "false", "defaultTopicPerm": "PUB",
              "defaultGroupPerm": "SUB", "topicPerms": "AclOtherTopic=DENY"}
    refused = call(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, create, "reader01")
    assert refused.code == ResponseCode.NO_PERMISSION and "Need admin permission for request code=50" in refused.remark
    assert call(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, create, "aclAdmin01").code == ResponseCode.SUCCESS
    account = next(a for a in _file(cluster)["accounts"] if a["accessKey"] == "newbie01")
    assert account == {"accessKey": "newbie01", "secretKey": "newbie01-secret", "admin": False,
                       "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB", "topicPerms": ["AclOtherTopic=DENY"]}
    # The broker rereads the file within a second: the new account sends.
    wait_until(lambda: _send(call, "newbie01").code == ResponseCode.SUCCESS, 10, what="newbie01 may send")

    version = call(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, "reader01")
    assert version.code == ResponseCode.SUCCESS and version.fields["brokerName"] == "broker-a"
    counter = json.loads(version.fields["version"])["counter"]
    assert counter >= 1 and json.loads(version.fields["allAclFileVersion"]) == {
        os.path.abspath(cluster.topology.brokers[0].acl_file): json.loads(version.fields["version"])}

    assert call(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newbie01"}, "aclAdmin01").code == ResponseCode.SUCCESS
    assert all(a["accessKey"] != "newbie01" for a in _file(cluster)["accounts"])
    wait_until(lambda: _send(call, "newbie01").code == ResponseCode.NO_PERMISSION, 10, what="newbie01 refused")
    again = call(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newbie01"}, "aclAdmin01")
    assert again.code == 210 and "failed" in again.remark


def test_an_edit_that_would_break_the_file_is_refused_whole(cluster, call):
    before = _file(cluster)
    short = call(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "reader01", "secretKey": "short"},
                 "aclAdmin01")
    assert short.code == 209 and "longer than 6" in short.remark
    bad_perm = call(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "reader01", "whiteRemoteAddress": "10.10.{1,2}.*"},
                    "aclAdmin01")
    assert bad_perm.code == 209 and "refused" in bad_perm.remark
    assert _file(cluster) == before


def test_global_white_addresses(cluster, call):
    fields = {"globalWhiteAddrs": "10.10.1.*,192.168.0.1"}
    assert call(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields, "reader01").code == ResponseCode.NO_PERMISSION
    assert call(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields, "aclAdmin01").code == ResponseCode.SUCCESS
    assert _file(cluster)["globalWhiteRemoteAddresses"] == ["10.10.1.*", "192.168.0.1"]
    other = call(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {**fields, "aclFileFullPath": "/etc/other.yml"},
                 "aclAdmin01")
    assert other.code == 211 and "keeps one ACL file" in other.remark

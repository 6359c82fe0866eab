"""What a controller node takes off its Raft link (controller/raft_codec.py: never a pickle) and its secret file
(controller/secret.py), in process."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from rocketbox.cluster.controller import raft_codec
from rocketbox.cluster.controller.secret import ControllerSecretError, default_secret_path, make_secret, read_secret
from rocketbox.cluster.controller.state import ControllerState, Replica


class _RunsCode:
    def __reduce__(self):
        return os.system, ("true",)


def test_the_codec_carries_the_controller_state_and_pysyncobj_messages():
    from pysyncobj.node import TCPNode
    state = ControllerState()
    state.register("broker-a", Replica(1, "127.0.0.1:10911", "127.0.0.1:10912"))
    message = {"type": "append_entries", "term": 3, "entries": [(b"\x01payload", 7, 3)], "peers": {"a", "b"},
               "frozen": frozenset({1, 2}), "state": state, 5: None, "node": TCPNode("127.0.0.1:9921"),
               "buffer": bytearray(b"\x00\xff"), "ok": True, "lease": 1.5}
    loaded = raft_codec.loads(raft_codec.dumps(message))
    assert loaded["entries"] == message["entries"] and loaded["frozen"] == {1, 2} and loaded[5] is None
    assert loaded["state"].group("broker-a").replica(1) == Replica(1, "127.0.0.1:10911", "127.0.0.1:10912")
    assert loaded["node"] == message["node"] and loaded["buffer"] == message["buffer"]
    assert {k: loaded[k] for k in ("peers", "ok", "lease")} == {"peers": {"a", "b"}, "ok": True, "lease": 1.5}


@pytest.mark.parametrize("payload", [pickle.dumps(_RunsCode(), 2), pickle.dumps({"a": 1}, 2), b'{"o": ["Popen", {}]}',
                                     b'{"x": 1}', b'{"b": "not base64!"}', b"[" * 100_000, b'{"d": [[1]]}'])
def test_anything_else_is_refused_and_nothing_runs(payload, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(raft_codec.RaftDecodeError):
        raft_codec.loads(payload)


def test_only_the_four_classes_are_written():
    with pytest.raises(ValueError, match="does not carry"):
        raft_codec.dumps({"secret": ControllerSecretError("a class of ours not on the list")})


def test_the_secret_is_made_once_owner_only_and_read_back(tmp_path):
    path = default_secret_path(str(tmp_path / "data"))
    assert path == str(tmp_path / "data" / "controller.secret")
    make_secret(path)
    first = read_secret(path)
    assert len(first) == 64 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    make_secret(path)   # kept: every node of a cluster must hold the same one
    assert read_secret(path) == first
    assert default_secret_path(str(tmp_path / "data"), str(tmp_path / "acl" / "plain_acl.yml")) == \
        str(tmp_path / "acl" / "controller.secret")


def test_a_missing_or_malformed_secret_is_refused_with_the_file(tmp_path, caplog):
    with pytest.raises(ControllerSecretError, match="cannot read the controller secret .*missing"):
        read_secret(str(tmp_path / "missing"))
    bad = tmp_path / "bad"
    bad.write_text("not a secret\n")
    with pytest.raises(ControllerSecretError, match="not a controller secret"):
        read_secret(str(bad))
    shared = tmp_path / "shared"
    shared.write_text("ab" * 32 + "\n")
    shared.chmod(0o644)
    assert read_secret(str(shared)) == "ab" * 32
    assert "may be read by other users" in caplog.text

"""Apache RocketMQ's unmodified Java client 4.9.8 against RocketBox's remoting door (tests/java/apache.py
says where the client comes from; the tests skip and say why where it is absent)."""

from __future__ import annotations

import pytest

from tests.java.apache import run_java


@pytest.mark.parametrize("body_bytes", [100, 5 * 1024])
def test_send_and_push_consume(start_cluster, java_programs, tmp_path, body_bytes):
    """A body over 4 KiB is compressed by the Java client (sysFlag bit 0, zlib in bits 8-10)."""
    cluster = start_cluster(remoting=True)
    result = run_java(java_programs, "SendAndPush", cluster.remoting_namesrv, "JavaSendPush", "20",
                      str(body_bytes), home=tmp_path / "java")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.count("SEND_OK") == 20 and "received 20 of 20" in result.stdout

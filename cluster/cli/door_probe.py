"""Which door an address the user gave is: RocketBox's native (ZeroMQ) NameServer door, or a
RocketMQ remoting door (mqadmin's ``-n 127.0.0.1:9876`` habit), told at once rather than after a
request to the wrong door times out.

The probe sends ZMTP's 10-byte greeting signature and reads. A ZeroMQ door answers with its own
signature at once; a remoting door (RocketBox's, and Apache's Netty decoder alike) reads those
bytes as a frame length of about 4 GB, over its bound, and closes the connection. Nothing else is
sent, so neither door sees a request. An address that refuses the connection or stays silent is
left to the native client, which reports it as it does."""

from __future__ import annotations

import socket

from rocketbox.cluster.config import namesrv_endpoints

ZMTP_SIGNATURE = b"\xff" + b"\x00" * 8 + b"\x7f"
PROBE_TIMEOUT_S = 1.0


def speaks_remoting(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether ``tcp://host:port`` closed on ZMTP's greeting (a remoting door), not answered it."""
    host, port = endpoint.split("://", 1)[-1].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(ZMTP_SIGNATURE)
            answer = sock.recv(len(ZMTP_SIGNATURE))
    except ConnectionResetError:
        return True
    except (OSError, ValueError):   # refused, unreachable, silent, not host:port
        return False
    return answer == b""


def namesrv_transport(addresses: str) -> str:
    """"remoting" when the first of ``addresses`` (host:port;host:port) is a remoting door, else
    "native". One door of a list tells: a cluster's NameServers all serve the same kinds of door."""
    endpoints = namesrv_endpoints(addresses)
    return "remoting" if endpoints and speaks_remoting(endpoints[0]) else "native"

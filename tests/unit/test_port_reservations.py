"""free_ports never hands out a port another call picked within the last minute (port_reservations.py):
a CI run once started two clusters in two pytest workers on the same port between one's pick and its bind."""

import os

import pytest

from rocketbox.cluster import port_reservations
from rocketbox.cluster.topology import free_ports

pytestmark = pytest.mark.timeout(60)


def test_a_claim_holds_for_a_while_then_goes_stale():
    port = 7   # below the range free_ports picks from: no other test's port
    claim_file = os.path.join(port_reservations._directory(), str(port))
    if os.path.exists(claim_file):
        os.unlink(claim_file)   # an earlier run's, dated by its own clock
    stale = port_reservations.HOLD_S + 1
    assert port_reservations.claim(port, now=1e9)
    assert not port_reservations.claim(port, now=1e9 + 1)
    assert port_reservations.claim(port, now=1e9 + stale)


def test_two_calls_never_share_a_port():
    # 500 of the ~12,700 ports each: without the claims ~20 would be shared (free_ports only checks a bind).
    first, second = free_ports(500), free_ports(500)
    assert len(set(first)) == 500 and not set(first) & set(second)

"""A version number's name as RocketMQ's tools show it (MQVersion.getVersionDesc): the position of
a constant in its Version enum, spot-checked at each place the enum's pattern changes."""

from __future__ import annotations

import pytest

from rocketbox.cluster.mq_version import VERSION_NAMES, version_desc
from rocketbox.cluster.wire_format import VERSION


@pytest.mark.parametrize("number, name", [
    (0, "V3_0_0_SNAPSHOT"), (1, "V3_0_0_ALPHA1"), (6, "V3_0_0_BETA5"), (7, "V3_0_0_BETA6_SNAPSHOT"),
    (14, "V3_0_0_BETA9"), (15, "V3_0_0_FINAL"), (16, "V3_0_1_SNAPSHOT"), (45, "V3_0_15"),
    (46, "V3_1_0_SNAPSHOT"), (85, "V3_2_9"), (86, "V3_3_1_SNAPSHOT"), (137, "V3_5_8"), (211, "V3_9_9"),
    (212, "V4_0_0_SNAPSHOT"), (213, "V4_0_0"), (401, "V4_9_4"), (409, "V4_9_8"), (413, "V5_0_0"),
    (475, "V5_3_1"), (611, "V5_9_9"), (612, "HIGHER_VERSION"), (5000, "HIGHER_VERSION"),
])
def test_a_version_number_reads_as_rocketmqs_enum_name(number, name):
    assert version_desc(number) == name
    assert version_desc(str(number)) == name   # as a JSON body may carry it


def test_the_enum_has_rocketmqs_length_and_our_clients_read_as_4_9_4():
    assert len(VERSION_NAMES) == 613 and len(set(VERSION_NAMES)) == 613
    assert version_desc(VERSION) == "V4_9_4"


def test_what_is_no_version_number_is_shown_as_it_came():
    assert version_desc(-1) == "-1"
    assert version_desc(None) == "-"
    assert version_desc("4.9.4") == "4.9.4"

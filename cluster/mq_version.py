"""What a client's version number means: RocketMQ sends its ``MQVersion.Version`` enum's ordinal
(a frame's version field, a heartbeat's and a consumer connection's ``version``), and its tools show
the enum constant's name (``MQVersion.getVersionDesc``): 401 is V4_9_4, our own clients' number
(``wire_format.VERSION``).

The enum, derived rather than listed: V3_0_0's pre-releases first; then every release x.y.z as two
constants, its snapshot ``Vx_y_z_SNAPSHOT`` and the release ``Vx_y_z``; the releases are 3.0.1-3.0.15,
3.1.0-3.2.9, 3.3.1-3.9.9 (no x.y.0 from 3.3 to 3.9), then 4.0.0-5.9.9 in full; the last constant
is HIGHER_VERSION, which every number past the end reads as. Pure: no I/O.
"""

from __future__ import annotations

_V3_0_0_PRERELEASES = ("SNAPSHOT", "ALPHA1", *(f"BETA{n}" for n in range(1, 6)),
                       *(name for n in range(6, 10) for name in (f"BETA{n}_SNAPSHOT", f"BETA{n}")), "FINAL")
HIGHER_VERSION = "HIGHER_VERSION"


def _releases():
    yield from ((3, 0, patch) for patch in range(1, 16))
    yield from ((3, minor, patch) for minor in (1, 2) for patch in range(10))
    yield from ((3, minor, patch) for minor in range(3, 10) for patch in range(1, 10))
    yield from ((major, minor, patch) for major in (4, 5) for minor in range(10) for patch in range(10))


VERSION_NAMES = (*(f"V3_0_0_{suffix}" for suffix in _V3_0_0_PRERELEASES),
                 *(name for major, minor, patch in _releases()
                   for name in (f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}")),
                 HIGHER_VERSION)


def version_desc(ordinal) -> str:
    """The enum name of a version number (HIGHER_VERSION past the end, as RocketMQ reads it); a
    value that is no version number (negative, not a number) is returned as text, unchanged, and
    a missing one as "-"."""
    if ordinal is None:
        return "-"
    try:
        number = int(ordinal)
    except (TypeError, ValueError):
        return str(ordinal)
    if number < 0:
        return str(ordinal)
    return VERSION_NAMES[min(number, len(VERSION_NAMES) - 1)]

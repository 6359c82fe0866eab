"""One order for a broker's settings, through the CLI as a user runs it: flags > the broker.conf
given now > live changes (updateBrokerConfig) > what the data dir remembers > defaults. The
README's walk: ``up -c broker.conf`` (fileReservedTime=72), ``updateBrokerConfig -k
fileReservedTime -v 48``; a plain restart keeps 48 (as Apache's broker, whose updateBrokerConfig
rewrites its config file, does); naming the file again is the later edit, and 72 wins. ``config
show`` says each time what the broker then runs with, and where the value came from."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import PORT_FLAGS_COUNT, port_flags, run_cli, up_on_free_ports

pytestmark = pytest.mark.timeout(300)

BROKER_CONF = """\
fileReservedTime=72
deleteWhen=04
"""


def _shown(data_dir: str, *args: str) -> dict[str, tuple[str, str]]:
    """broker-a's key -> (value, source) as ``config show`` prints it."""
    text = run_cli("config", "show", *args, data_dir=data_dir).stdout
    section = text.split("# broker-a\n", 1)[1].split("\n# ", 1)[0]
    out = {}
    for line in section.splitlines():
        if line.strip():
            setting, _, source = line.partition("  ")
            key, _, value = setting.partition("=")
            out[key] = (value, source.strip())
    return out


def _running(data_dir: str, namesrv: str) -> dict[str, str]:
    answer = json.loads(run_cli("getBrokerConfig", "-n", namesrv, "-c", "DefaultCluster", "--json",
                                data_dir=data_dir).stdout)
    (config,) = answer.values()
    return config


def _down(data_dir: str) -> None:
    down = run_cli("down", data_dir=data_dir, check=False)
    assert down.returncode == 0, down.stderr


def test_a_live_change_outlives_a_restart_and_the_file_named_again_wins(tmp_path):
    data_dir = str(tmp_path / "walk")
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)

    ports, _up = up_on_free_ports(PORT_FLAGS_COUNT,
                                  lambda picked: ["up", "--detach", "-c", str(conf), *port_flags(picked)],
                                  data_dir=data_dir)
    namesrv = f"127.0.0.1:{ports[0]}"
    try:
        assert _running(data_dir, namesrv)["fileReservedTime"] == "72"
        run_cli("updateBrokerConfig", "-n", namesrv, "-c", "DefaultCluster", "-k", "fileReservedTime", "-v", "48",
                data_dir=data_dir)
        assert _running(data_dir, namesrv)["fileReservedTime"] == "48"
        shown = _shown(data_dir)
        assert shown["fileReservedTime"] == ("48", "live (updateBrokerConfig)"), shown["fileReservedTime"]
        assert shown["deleteWhen"] == ("04", f"remembered file {conf}")
        assert shown["listenPort"] == (str(ports[3]), "remembered --broker-remoting-port")
    finally:
        _down(data_dir)

    # A restart that names no file: the live change holds.
    run_cli("up", "--detach", data_dir=data_dir)
    try:
        assert _running(data_dir, namesrv)["fileReservedTime"] == "48"
    finally:
        _down(data_dir)

    # The file named again is the later edit: it wins, and up says what it replaced.
    shown = _shown(data_dir, "-c", str(conf))
    assert shown["fileReservedTime"] == ("72", f"file {conf}"), shown["fileReservedTime"]
    up = run_cli("up", "--detach", "-c", str(conf), data_dir=data_dir)
    try:
        assert ("broker-a: fileReservedTime=72 from " + str(conf) + " replaces the live change fileReservedTime=48"
                in up.stderr), up.stderr
        assert _running(data_dir, namesrv)["fileReservedTime"] == "72"
        assert _shown(data_dir)["fileReservedTime"] == ("72", f"remembered file {conf}")
    finally:
        _down(data_dir)

"""Process titles: ps shows `rocketbox: broker-a reput`, not a Python command line
carrying the child's JSON config."""

from __future__ import annotations

import os

import pytest

from rocketbox.cluster.testing import LocalCluster

pytestmark = pytest.mark.timeout(120)


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()


def test_every_process_says_what_it_is(tmp_path):
    with LocalCluster(str(tmp_path / "titles"), slaves=1) as cluster:
        children = {c["name"]: c["pid"] for c in cluster.state()["children"]}
        titles = {name: _cmdline(pid) for name, pid in children.items()}
    assert titles["namesrv-0"] == "rocketbox: namesrv-0"
    assert titles["broker-a"] == "rocketbox: broker-a"
    assert titles["broker-a-reput"] == "rocketbox: broker-a reput"
    assert titles["broker-a-s1-flush"] == "rocketbox: broker-a-s1 flush"
    assert all(title.startswith("rocketbox: ") and "config-json" not in title for title in titles.values())


def _nice_of_threads(pid: int) -> dict[int, int]:
    return {int(tid): os.getpriority(os.PRIO_PROCESS, int(tid)) for tid in os.listdir(f"/proc/{pid}/task")}


def test_the_allocate_workers_yield_the_cores(tmp_path):
    """Segment creation and preheating are work ahead of need: the allocate worker's thread (in each
    reput process) runs at nice 19, every other process and thread at the nice it was started with."""
    with LocalCluster(str(tmp_path / "nice"), slaves=1) as cluster:
        children = {c["name"]: c["pid"] for c in cluster.state()["children"]}
        nice = {name: _nice_of_threads(pid) for name, pid in children.items()}
    base = os.getpriority(os.PRIO_PROCESS, 0)
    for name in ("broker-a-reput", "broker-a-s1-reput"):
        assert sorted(nice[name].values()).count(19) == 1, nice[name]   # the allocate thread
        assert nice[name][children[name]] == base                      # the reput loop's, the main thread
    assert all(value == base for name, threads in nice.items() if not name.endswith("-reput")
               for value in threads.values()), nice

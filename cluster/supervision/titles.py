"""Process titles an operator can read in ``ps`` and ``top``: ``rocketbox: broker-a reput`` rather
than a Python command line carrying a whole JSON config. setproctitle rewrites what
/proc/PID/cmdline shows (the argv area), which is also where that JSON was visible."""

from __future__ import annotations

import os

from rocketbox.cluster.supervision import lifecycle

TITLE_PREFIX = "rocketbox: "


def child_title(child_name: str, role: str) -> str:
    """``broker-a-reput`` of role ``reput`` -> ``rocketbox: broker-a reput``; ``namesrv-0`` stays."""
    suffix = f"-{role}"
    if child_name.endswith(suffix) and len(child_name) > len(suffix):
        return f"{TITLE_PREFIX}{child_name[:-len(suffix)]} {role}"
    return f"{TITLE_PREFIX}{child_name}"


def supervisor_title(data_dir: str) -> str:
    return f"{TITLE_PREFIX}supervisor {os.path.abspath(data_dir)}"


def set_title(title: str) -> None:
    import setproctitle   # here: only our processes' entry points retitle themselves
    setproctitle.setproctitle(title)


def set_child_title(role: str) -> None:
    """The title of this role's process, named by the supervisor (its child name) or by its role."""
    set_title(child_title(os.environ.get(lifecycle.CHILD_NAME_ENV) or role, role))

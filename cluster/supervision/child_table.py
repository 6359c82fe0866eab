"""The supervisor's table of children: what to run, in what order, with which restart policy and
readiness check; checked as a whole before anything starts, and loaded from JSON by the
detached supervisor."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import signal
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from rocketbox.cluster.supervision import lifecycle


CHILD_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ReadyCheck(enum.StrEnum):
    NOTIFY = "notify"  # wait for the lifecycle readiness line
    SPAWNED = "spawned"  # ready as soon as exec succeeded (programs that do not speak the protocol)


class RestartPolicy(enum.StrEnum):
    ALWAYS = "always"
    ON_FAILURE = "on-failure"  # not after exit code 0
    NEVER = "never"


@dataclass(frozen=True)
class ChildSpec:
    """One row of the supervisor's table.

    Give either ``argv`` (the full command) or ``module`` (+ ``args``), which runs
    ``python -P -m module *args`` with the supervisor's own Python (lifecycle.python_module_command).
    ``group`` names a fate-sharing group (default: the child alone); its
    ``leader`` must come first in the group's start order. Children start in
    ``(start_order, position in the table)`` order; on first boot a later start order waits for
    the earlier ones to be ready, except for children that are not ``awaited`` (a door that
    nothing else needs to boot: it starts with its wave and holds none back).

    ``preload`` (forked roles, ``role_fork.py``): the modules the supervisor imports before it
    forks this child, shared by every child forked after; the child imports its own ``module``
    after the fork, so no later child carries that module's pages. None: ``module`` itself.
    """

    name: str
    argv: tuple[str, ...] = ()
    module: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None
    role: str = ""
    leader: bool = False
    start_order: int = 0
    awaited: bool = True
    preload: tuple[str, ...] | None = None
    ready: ReadyCheck = ReadyCheck.NOTIFY
    ready_timeout_s: float = 10.0
    restart: RestartPolicy = RestartPolicy.ALWAYS
    stop_signal: int = signal.SIGTERM
    stop_timeout_s: float = 5.0
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    # Up this long since spawn: the next restart starts from backoff_initial_s again.
    backoff_reset_after_s: float = 10.0
    cwd: str | None = None
    # Watchdog: a running child must keep the u64 (wall-clock ms, native order) at
    # ``heartbeat_offset`` of ``heartbeat_path`` fresher than ``heartbeat_timeout_s``, or it
    # is killed and restarted as if it had died (a hung process serves nobody). 0 = off.
    heartbeat_path: str | None = None
    heartbeat_offset: int = 0
    heartbeat_timeout_s: float = 0.0

    def __post_init__(self) -> None:
        # Accept lists (JSON, call sites) but keep the frozen record immutable.
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "args", tuple(self.args))
        if self.preload is not None:
            object.__setattr__(self, "preload", tuple(self.preload))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "ready", ReadyCheck(self.ready))
        object.__setattr__(self, "restart", RestartPolicy(self.restart))

    @property
    def group_name(self) -> str:
        return self.group or self.name

    @property
    def modules_before_fork(self) -> tuple[str, ...]:
        """What the supervisor imports before forking this child (a module role only)."""
        return (self.module,) if self.preload is None else self.preload

    def command(self) -> list[str]:
        if self.module:
            return lifecycle.python_module_command(self.module, *self.args)
        return list(self.argv)

    def validate(self) -> None:
        if not CHILD_NAME_PATTERN.match(self.name):
            raise ValueError(f"child name {self.name!r} must match {CHILD_NAME_PATTERN.pattern}")
        if bool(self.argv) == bool(self.module):
            raise ValueError(f"child {self.name}: give exactly one of argv and module")
        if self.preload is not None and not self.module:
            raise ValueError(f"child {self.name}: preload goes with module")
        if self.args and not self.module:
            raise ValueError(f"child {self.name}: args go with module; put them in argv")
        for label in ("ready_timeout_s", "stop_timeout_s", "backoff_initial_s", "backoff_max_s"):
            if getattr(self, label) <= 0:
                raise ValueError(f"child {self.name}: {label} must be positive")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(f"child {self.name}: backoff_max_s is below backoff_initial_s")
        for key, value in self.env.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(f"child {self.name}: env entries must be str -> str")

    def to_dict(self) -> dict:
        raw = dataclasses.asdict(self)
        raw["argv"], raw["args"] = list(self.argv), list(self.args)
        raw["preload"] = None if self.preload is None else list(self.preload)
        raw["ready"], raw["restart"] = str(self.ready), str(self.restart)
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping) -> "ChildSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown ChildSpec fields: {sorted(unknown)}")
        return cls(**raw)


def validate_table(specs: Sequence[ChildSpec]) -> None:
    """Check the table as a whole: unique names, one leader per group, leader first."""
    if not specs:
        raise ValueError("the supervisor needs at least one child")
    seen: set[str] = set()
    for spec in specs:
        spec.validate()
        if spec.name in seen:
            raise ValueError(f"child name {spec.name!r} appears twice")
        seen.add(spec.name)
    ordered = sorted(enumerate(specs), key=lambda pair: (pair[1].start_order, pair[0]))
    groups: dict[str, list[ChildSpec]] = {}
    for _, spec in ordered:
        groups.setdefault(spec.group_name, []).append(spec)
    for group, members in groups.items():
        leaders = [m.name for m in members if m.leader]
        if len(leaders) > 1:
            raise ValueError(f"group {group!r} has {len(leaders)} leaders: {leaders}")
        if leaders and members[0].name != leaders[0]:
            # The leader recovers shared state; its workers must start after it.
            raise ValueError(
                f"group {group!r}: leader {leaders[0]!r} must start before {members[0].name!r}"
            )


def load_specs(path: str) -> list[ChildSpec]:
    """A JSON list of ChildSpec objects (field names as in the dataclass)."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of child specs")
    return [ChildSpec.from_dict(item) for item in raw]

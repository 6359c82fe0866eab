"""The steps of ``make run`` as the user sees them: each one shows while it runs and says when it is done.

On a terminal a step is a spinner with its elapsed time (gone when it ends); elsewhere (a log, a
pipe) a line when it starts. Either way a line with its duration when it ends, and the durations
go to the report (``report.json`` ``phases_s``). A step that fails shows no done line: the error
that follows is the news.
"""

from __future__ import annotations

import contextlib
import time


class Phases:
    def __init__(self, console):
        self.console = console
        self.seconds: dict[str, float] = {}
        self._mark = time.monotonic()

    def done(self, name: str) -> None:
        """The step ``name`` ended now (it began when the previous one ended): recorded, not shown."""
        now = time.monotonic()
        self.seconds[name] = round(now - self._mark, 2)
        self._mark = now

    @contextlib.contextmanager
    def step(self, name: str, spinner: bool = True):
        """``with phases.step("check"):`` around a step that prints nothing of its own while it runs;
        ``spinner=False`` for one that moves this process's output (the JVM's start)."""
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._mark = time.monotonic()
        if not (spinner and self.console.is_terminal):
            self.console.print(f"{name} ...", highlight=False)
        if spinner:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                          console=self.console, transient=True) as progress:
                progress.add_task(name, total=None)
                yield
        else:
            yield
        self.done(name)
        self.console.print(f"[green]done[/green] {name} in {self.seconds[name]:.1f} s", highlight=False)

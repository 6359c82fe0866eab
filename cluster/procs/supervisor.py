"""The supervisor process: ``python -m rocketbox.cluster.procs.supervisor --data-dir D --specs children.json``.

``cluster up --detach`` and ``LocalCluster`` start it; it runs the child table with the
:class:`~cluster.supervision.arbiter.Supervisor` until a stop signal, and exits EXIT_BOOT_ERROR
when the cluster cannot boot.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Iterable

from rocketbox.cluster.file_modes import make_private, private_dir
from rocketbox.cluster.supervision.arbiter import Supervisor, log_default
from rocketbox.cluster.supervision.child_table import load_specs
from rocketbox.cluster.supervision.errors import StopRequested, SupervisorError
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR, EXIT_OK
from rocketbox.cluster.supervision.role_fork import fork_roles_enabled
from rocketbox.cluster.supervision.titles import set_title, supervisor_title


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m rocketbox.cluster.procs.supervisor --data-dir D --specs children.json``."""
    parser = argparse.ArgumentParser(prog="rocketbox.cluster.procs.supervisor", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--specs", required=True, help="JSON list of ChildSpec objects")
    parser.add_argument("--log-level", default="INFO")
    options = parser.parse_args(None if argv is None else list(argv))
    make_private()   # before anything is created: the children inherit it (file_modes.py)
    private_dir(options.data_dir)
    set_title(supervisor_title(options.data_dir))
    logging.basicConfig(level=options.log_level.upper(),
                        format="%(asctime)s supervisor[%(process)d] %(levelname)s %(message)s")
    try:
        supervisor = Supervisor(load_specs(options.specs), options.data_dir, fork_roles=fork_roles_enabled())
    except (OSError, ValueError) as exc:
        log_default.error("bad child table: %s", exc)
        return EXIT_BOOT_ERROR
    try:
        supervisor.start()
    except StopRequested:
        return EXIT_OK
    except SupervisorError as exc:
        log_default.error("%s", exc)
        return EXIT_BOOT_ERROR
    return supervisor.run_forever()


if __name__ == "__main__":
    sys.exit(main())

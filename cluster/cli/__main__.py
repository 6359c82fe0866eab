"""``python -m rocketbox.cluster.cli``: the ``cluster`` command."""

from rocketbox.cluster.cli import run

run()

"""``python -m rocketbox.cluster.cli``: the ``cluster`` command."""

import sys

from rocketbox.cluster.cli import main

sys.exit(main())

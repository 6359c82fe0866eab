"""``python -m cluster.cli``: the ``cluster`` command."""

import sys

from cluster.cli import main

sys.exit(main())

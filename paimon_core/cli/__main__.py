"""``python -m paimon_core.cli``: the ``paimon`` command."""

import sys

from paimon_core.cli.main import main

sys.exit(main())

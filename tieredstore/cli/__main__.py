"""``python -m tieredstore.cli``: the ``tieredstore`` command."""

import sys

from tieredstore.cli import main

sys.exit(main())

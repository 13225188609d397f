"""``python -m echomq``: the ``echomq`` command."""

import sys

from .cli import main

sys.exit(main())

"""``python -m eyefold`` is the ``eyefold`` command."""

import sys

from eyefold.cli import main

sys.exit(main())

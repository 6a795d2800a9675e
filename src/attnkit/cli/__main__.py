"""``python -m attnkit.cli``."""

import sys

from . import main

sys.exit(main())

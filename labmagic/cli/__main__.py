"""``python -m labmagic.cli``: the ``labmagic`` command."""

import sys

from . import main

sys.exit(main())

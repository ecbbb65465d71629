"""``python -m labmagic.child``: see :mod:`labmagic.child.worker`."""

import sys

from .worker import main

sys.exit(main())

"""``python -m ragbridge.adapters.cli`` runs the ``ragbridge`` command."""

import sys

from ragbridge.adapters.cli.main import main

sys.exit(main())

"""``python -m pytest_dlperf``: the ``dlperf`` command (:mod:`pytest_dlperf.cli`)."""

import sys

from .cli import main

sys.exit(main())

"""``python -m pytest_dlperf.worker SPEC.json``: one rank of one run (:mod:`.main`)."""

import sys

from .main import main

sys.exit(main())

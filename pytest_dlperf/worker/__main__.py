"""``python -m pytest_dlperf.worker SPEC.json``: one rank of one run (:mod:`.main`)."""

from .lifecycle import leave
from .main import main

leave(main())

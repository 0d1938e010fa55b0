"""pytest-dlperf's own tests: the plugins they use.

The fixtures and shared helpers live in ``tests/fixtures.py`` (``dlperf``, ``make_tiny_case``,
``FAST``); the private SLURM cluster and mpirun in ``tests/cluster.py``; a private PostgreSQL
server in ``tests/postgres.py``; a headless Chromium in ``tests/browser.py``.

torch, torchvision and matplotlib are imported where tests run, before the first of them
(``tests/fixtures.py``, ``pytest_runtest_setup``), not here: xdist's controller runs no test and
would spend seconds importing them before it starts its workers.
"""

import os
import sys

# The sessions, scripts and workers the tests start write the bytecode of what they import (this checkout's
# modules, an inner session's rewritten test files) and the next one reads it: where the environment says
# PYTHONDONTWRITEBYTECODE (the CI machine's does), each of the suite's hundreds of Python processes compiled the
# package again, about 0.4 s of CPU for a pytest start alone.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

pytest_plugins = ("pytester", "tests.fixtures", "tests.cluster", "tests.postgres", "tests.browser")

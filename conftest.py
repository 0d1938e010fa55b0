"""pytest-dlperf's own tests: the plugins they use.

The fixtures and shared helpers live in ``tests/fixtures.py`` (``dlperf``, ``make_tiny_case``,
``FAST``); the private SLURM cluster and mpirun in ``tests/cluster.py``; a private PostgreSQL
server in ``tests/postgres.py``; a headless Chromium in ``tests/browser.py``.
"""

# pytester's in-process runs remove the modules an inner session imported, and torch's C
# extension cannot be imported a second time in one process: import it once, out here.
import torch  # noqa: F401  isort: skip
import torchvision  # noqa: F401  isort: skip

pytest_plugins = ("pytester", "tests.fixtures", "tests.cluster", "tests.postgres", "tests.browser")

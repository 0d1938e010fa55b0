"""pytest-dlperf's own tests: the plugins they use.

The fixtures and shared helpers live in ``tests/fixtures.py`` (``dlperf``, ``make_tiny_case``,
``FAST``); the private SLURM cluster and mpirun in ``tests/cluster.py``; a private PostgreSQL
server in ``tests/postgres.py``; a headless Chromium in ``tests/browser.py``.
"""

# pytester's in-process runs remove the modules an inner session imported, and torch's C
# extension cannot be imported a second time in one process: import it once, out here.
import torch  # noqa: F401  isort: skip
import torchvision  # noqa: F401  isort: skip

# Likewise matplotlib: an inner session that imported it first had it removed after, and the next import made
# classes of its own beside the old ones that pyplot still held ("Single argument to subplot must be a
# three-digit integer, not GridSpec(1, 1)[0:1, 0:1]" in a later test of the same worker).
try:
    import matplotlib  # isort: skip

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401  isort: skip
except ImportError:  # the plot extra is not installed: its tests skip
    pass

pytest_plugins = ("pytester", "tests.fixtures", "tests.cluster", "tests.postgres", "tests.browser")

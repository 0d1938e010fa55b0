"""The pytest plugin: the options, the markers and the registries; a session with ``--dlperf-*`` options is a
plugin object of its own.

At configure the options are read and checked (:mod:`.options`); where they ask for cases, a
:class:`~.controller.session.DlperfSession` is started and registered: its hooks collect the cases, run them through
the controller's pipeline (:mod:`.controller`: kinds, launch, worker, gate, results) and write the reports.  Without
any ``--dlperf-*`` option the plugin adds no case.
"""

from __future__ import annotations

import pytest

from . import jsonio, models, options
from .cases import PRECISIONS, OptionError
from .commands import parsers
from .controller.kinds import KINDS
from .controller.session import PLUGIN_NAME, DlperfSession
from .reporting import benchmark_json
from .results.case import Status

REGISTRY = pytest.StashKey[tuple[dict, dict, dict]]()
GPU_MARKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: How the terminal shows a passed case whose verdict is not a plain pass: (letter, word, markup).
TEST_STATUS = {
    Status.IMPROVED: ("+", "IMPROVED", {"green": True, "bold": True}),
    Status.NO_BASELINE: ("?", "PASSED (no baseline)", {"green": True}),
    Status.REMOTE: ("r", "PASSED (ranks only: rank 0 reports)", {"green": True}),
    Status.DATA_ONLY: ("d", "PASSED (data-only)", {"green": True}),
    Status.INCONCLUSIVE: ("~", "PASSED (inconclusive)", {"yellow": True}),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args):
    # Models and log parsers that conftest files register belong to this session only: remember the
    # registries as they were before they loaded, and put them back at unconfigure.
    early_config.stash[REGISTRY] = (models.snapshot(), parsers.PARSERS.snapshot(), KINDS.snapshot())
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dlperf: a pytest-dlperf training-throughput case")
    config.addinivalue_line("markers", "convergence: a pytest-dlperf case that trains to a target accuracy")
    for n in GPU_MARKERS:
        config.addinivalue_line("markers", f"gpu{n}: a pytest-dlperf case on {n} GPU(s) / ranks")
    for precision in PRECISIONS:
        config.addinivalue_line("markers", f"{precision}: a pytest-dlperf case in {precision}")
    for name in models.list_models():
        config.addinivalue_line("markers", f"{name}: a pytest-dlperf case of model {name}")
    if hasattr(config, "workerinput"):
        return  # an xdist worker: cases run in the controller's session only
    if config.getoption("help") or config.getoption("version"):
        return  # help is what a user reads when the options are wrong: it never checks them
    try:
        opts = options.Options(config)
        if not opts.active:
            return
        session = DlperfSession.start(config, opts)
    except (OptionError, jsonio.DocumentError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(session, PLUGIN_NAME)
    benchmark_json.register(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(REGISTRY, None)
    if saved is not None:
        models.restore(saved[0])
        parsers.PARSERS.restore(saved[1])
        KINDS.restore(saved[2])


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if report.when != "call" or not report.passed:
        return None
    verdict = dict(report.user_properties).get("dlperf_verdict")
    if verdict in TEST_STATUS:
        letter, word, markup = TEST_STATUS[Status(verdict)]
        return "passed", letter, (word, markup)
    return None

"""The pytest plugin: hook implementations only, each delegating to the module that does the work.

The data path, one folder or module each: options (:mod:`.options`) -> cases (:mod:`.collect`) ->
the controller (:mod:`.controller`: the session and its case kinds) -> launch (:mod:`.launch`) -> worker
(:mod:`.worker`) -> gate (:mod:`.gate`) -> results (:mod:`.results`) -> baseline (:mod:`.baseline`) ->
reports (:mod:`.controller.outputs`, :mod:`.reporting`, :mod:`.history`).  Without any ``--dlperf-*``
option the plugin adds no case.
"""

from __future__ import annotations

import signal

import pytest

from . import ab, collect, jsonio, models, options
from .baseline import machines
from .cases import PRECISIONS, OptionError
from .commands import parsers, trust
from .controller import bisect, outputs
from .controller.kinds import KINDS
from .controller.session import SESSION, DlperfSession
from .controller import history as history_hooks
from .launch import process
from .reporting import benchmark_json
from .results.case import Status

REGISTRY = pytest.StashKey[tuple[dict, dict, dict]]()
OUTPUTS = pytest.StashKey[outputs.Outputs]()
OLD_SIGTERM = pytest.StashKey[object]()
GPU_MARKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: How the terminal shows a passed case whose verdict is not a plain pass: (letter, word, markup).
TEST_STATUS = {
    Status.IMPROVED: ("+", "IMPROVED", {"green": True, "bold": True}),
    Status.NO_BASELINE: ("?", "PASSED (no baseline)", {"green": True}),
    Status.REMOTE: ("r", "PASSED (ranks only: rank 0 reports)", {"green": True}),
    Status.DATA_ONLY: ("d", "PASSED (data-only)", {"green": True}),
    Status.INCONCLUSIVE: ("~", "PASSED (inconclusive)", {"yellow": True}),
}


def _session(config: pytest.Config) -> DlperfSession | None:
    """The active dlperf session; None without ``--dlperf-*`` options and in xdist workers."""
    session = config.stash.get(SESSION, None)
    return session if session is not None and session.options.active else None


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
        if opts.active:
            opts.check_not_distributed(config)
            opts.check_outputs()
        baseline = machines.load(opts.baseline_path, opts.device, opts.baseline_record,
                                 config.rootpath) if opts.baseline_path else None
        history = history_hooks.check(opts, config.rootpath) if opts.active else None
        references = history_hooks.save_references(opts, config.rootpath) if opts.active else None
    except (OptionError, jsonio.DocumentError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION] = DlperfSession(config, opts, baseline, history=history, history_references=references)
    if opts.active and opts.against and not config.getoption("collectonly"):
        try:  # before any case runs: the reference can run the worker, or one line says what it lacks
            if opts.save_baseline:
                raise OptionError("--dlperf-against: an A/B session judges two environments against each other, and "
                                  "saves no baseline; expected --dlperf-save-baseline in a session of its own")
            config.stash[SESSION].ab = ab.start(opts.against, opts.against_seed, config.rootpath,
                                                not opts.no_fork_server)
        except OptionError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[OUTPUTS] = outputs.Outputs()
    if opts.active:
        benchmark_json.register(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION, None)
    if session is not None:
        ab.stop(session.ab)
    saved = config.stash.get(REGISTRY, None)
    if saved is not None:
        models.restore(saved[0])
        parsers.PARSERS.restore(saved[1])
        KINDS.restore(saved[2])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    dlperf = _session(config)
    if dlperf is not None:
        collect.collect_into(session, config, items, collect.build_cases(dlperf.options, dlperf.baseline))
        # Before any case runs, at any verbosity (-q shows no header): each command refused, in one line.
        tr = config.pluginmanager.get_plugin("terminalreporter")
        for line in trust.baseline_refusals(dlperf.baseline, dlperf.options.trust).values():
            if tr is not None:
                tr.write_line(f"dlperf: {line}", yellow=True)


def pytest_report_header(config: pytest.Config) -> list[str]:
    dlperf = _session(config)
    if dlperf is None:
        return []
    return outputs.header_lines(dlperf) + ab.header_lines(dlperf.ab)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    # Between the test phases pytest's output capture is suspended: a line here reaches the terminal.
    dlperf = _session(item.config)
    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    if dlperf is not None and tr is not None and isinstance(item, collect.DlperfItem):
        warning = dlperf.gpu_sized_warning(item.case)
        if warning:
            tr.ensure_newline()
            tr.write_line(warning, yellow=True)
    return (yield)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if report.when != "call" or not report.passed:
        return None
    verdict = dict(report.user_properties).get("dlperf_verdict")
    if verdict in TEST_STATUS:
        letter, word, markup = TEST_STATUS[Status(verdict)]
        return "passed", letter, (word, markup)
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    if _session(session.config) is not None:
        session.config.stash[OLD_SIGTERM] = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    config = session.config
    old = config.stash.get(OLD_SIGTERM, None)
    if old is not None:
        signal.signal(signal.SIGTERM, old)
    process.kill_all_live()
    dlperf = _session(config)
    if dlperf is not None and not outputs.write_outputs(dlperf, config.stash[OUTPUTS], exitstatus):
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # an output the job asked for is missing
    if dlperf is not None and dlperf.options.bisect_exit:
        history = config.stash[OUTPUTS].history
        gate_failed = bool(dlperf.options.history_gate and history and history.gate_failures)
        session.exitstatus = bisect.bisect_exit((r.verdict for r in dlperf.results if r.verdict is not None),
                                                session.exitstatus, gate_failed)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    dlperf = _session(config)
    if dlperf is not None:
        outputs.terminal_summary(dlperf, config.stash[OUTPUTS], terminalreporter)


def _sigterm_to_interrupt(signum, frame):
    process.kill_all_live()
    raise KeyboardInterrupt("SIGTERM")

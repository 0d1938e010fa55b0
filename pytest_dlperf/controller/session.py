"""The session: the plugin object of a pytest run with ``--dlperf-*`` options.

The plugin (:mod:`pytest_dlperf.plugin`) reads the options at configure and, where they ask for cases, starts a
:class:`DlperfSession` (:meth:`DlperfSession.start`: the baseline loaded, the history checked, an A/B session's
reference environment started, all before any case runs) and registers it with pytest's plugin manager, as
pytest-xdist registers its ``DSession``.  Its methods are the hooks of a session that runs cases: it collects them
(:mod:`.collection`), warns before a case sized for a GPU runs on a CPU, turns SIGTERM into an interrupt, and at
the end writes the outputs and the terminal summary (:mod:`.outputs`).  Its :class:`~.pipeline.Pipeline` runs and
judges the cases; the items it collects are handed that pipeline, so nothing looks the session up.
"""

from __future__ import annotations

import dataclasses

import signal

import pytest

from .. import ab
from ..baseline import machines, named
from ..commands import trust
from ..launch import process
from . import bisect, collection, coverage, outputs
from . import history as history_hooks
from .pipeline import Pipeline

#: The name the session is registered under (``config.pluginmanager.get_plugin(PLUGIN_NAME)``).
PLUGIN_NAME = "dlperf-session"


class DlperfSession:
    """The cases of one pytest session, as a registered plugin: its hooks collect, run and report them."""

    def __init__(self, config: pytest.Config, pipeline: Pipeline):
        self.config = config
        self.pipeline = pipeline
        self.outputs = outputs.Outputs()
        self.old_sigterm = None
        #: Selected cases that cannot be measured here, skipped under ``--dlperf-allow-missing`` (:mod:`.coverage`).
        self.gaps: list[coverage.Gap] = []
        #: Lines of pytest's header this session adds (``--dlperf-against last-good`` before any night passed).
        self.header: list[str] = []

    @classmethod
    def start(cls, config: pytest.Config, options) -> DlperfSession:
        """The session of ``options`` (active ones: the caller checks): its baseline loaded, its history checked,
        an A/B session's reference started.  Raises :class:`~pytest_dlperf.cases.OptionError` or
        :class:`~pytest_dlperf.jsonio.DocumentError` with one line that says what is wrong, before any case runs."""
        options.check_not_distributed(config)
        options.check_outputs()
        named.check_given(config)  # --dlperf-machine "": refused, not read as no name
        baseline = machines.load(options.baseline_path, options.device, options.baseline_record,
                                 config.rootpath, options.machine) if options.baseline_path else None
        history = history_hooks.check(options, config.rootpath)
        pipeline = Pipeline(config, options, baseline, history=history,
                            history_references=history_hooks.save_references(options, config.rootpath))
        session = cls(config, pipeline)
        if options.against and not config.getoption("collectonly"):
            # The reference can run the worker, or one line says what it lacks.
            given: str | None = options.against
            chosen: str | None = None
            if given == history_hooks.LAST_GOOD:
                given, chosen = history_hooks.last_good(history, options.history_url, options.baseline_path)
            if given is not None:
                started = ab.start(given, options.against_seed, config.rootpath, not options.no_fork_server)
                pipeline.ab = dataclasses.replace(started, chosen=chosen)
            elif chosen:  # no night has passed here yet: this one is judged against the baseline alone
                session.header.append(chosen)
        return session

    @property
    def options(self):
        return self.pipeline.options

    # -- the hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        pipeline = self.pipeline
        cases = collection.build_cases(pipeline.options, pipeline.baseline)
        collection.collect_into(session, config, items, cases, pipeline)
        # Before any case runs, at any verbosity (-q shows no header): each command refused, in one line.
        tr = config.pluginmanager.get_plugin("terminalreporter")
        for line in trust.baseline_refusals(pipeline.baseline, pipeline.options.trust).values():
            if tr is not None:
                tr.write_line(f"dlperf: {line}", yellow=True)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After -m and -k have selected the cases, before any runs: a session that gates measures them all.
        pipeline = self.pipeline
        if self.config.getoption("collectonly") or not coverage.gates(pipeline.options, pipeline.baseline):
            return
        cases = [item.case for item in session.items if isinstance(item, collection.DlperfItem)]
        self.gaps = coverage.gaps(cases, pipeline.missing_reason)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.gaps and not pipeline.options.allow_missing:
            if tr is not None:
                tr.ensure_newline()
                for line in coverage.refusal(self.gaps).splitlines():
                    tr.write_line(line, red=True)
            pytest.exit(f"dlperf: {len(self.gaps)} selected case(s) cannot be measured here; none ran",
                        returncode=pytest.ExitCode.TESTS_FAILED)
        # Before any case runs: a case whose sessions drift too far apart here for its saved baseline to decide.
        for line in filter(None, map(pipeline.references.undecidable, cases)):
            if tr is not None:
                tr.write_line(f"dlperf: {line}", yellow=True)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return outputs.header_lines(self.pipeline) + ab.header_lines(self.pipeline.ab) + self.header

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        # Between the test phases pytest's output capture is suspended: a line here reaches the terminal.
        tr = item.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and isinstance(item, collection.DlperfItem):
            warning = self.pipeline.gpu_sized_warning(item.case)
            if warning:
                tr.ensure_newline()
                tr.write_line(warning, yellow=True)
        return (yield)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.old_sigterm = signal.signal(signal.SIGTERM, sigterm_to_interrupt)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        if self.old_sigterm is not None:
            signal.signal(signal.SIGTERM, self.old_sigterm)
        process.kill_all_live()
        if not outputs.write_outputs(self.pipeline, self.outputs, exitstatus):
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED  # an output the job asked for is missing
        if self.judged_nothing() and coverage.under_ci() and not self.options.allow_missing:
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a gate that judged nothing is no green night
        if self.options.bisect_exit:
            history = self.outputs.history
            gate_failed = bool(self.options.history_gate and history and history.gate_failures)
            session.exitstatus = bisect.bisect_exit((r.verdict for r in self.pipeline.results
                                                     if r.verdict is not None), session.exitstatus, gate_failed)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
        pipeline = self.pipeline
        if self.gaps and pipeline.options.allow_missing:
            terminalreporter.write_line(coverage.allowed_line(self.gaps), yellow=True)
        if self.judged_nothing():
            selection = pipeline.baseline.selection if pipeline.baseline is not None else None
            red = coverage.under_ci() and not pipeline.options.allow_missing
            terminalreporter.write_line(coverage.nothing_line(pipeline.results, bool(
                selection is not None and selection.how == "none")) + (" (CI: the session fails)" if red else ""),
                red=red, yellow=not red)
        outputs.terminal_summary(pipeline, self.outputs, terminalreporter)

    def judged_nothing(self) -> bool:
        """Whether this session gates, ran to its end, and judged no case against anything (:mod:`.coverage`)."""
        pipeline = self.pipeline
        return (coverage.gates(pipeline.options, pipeline.baseline) and bool(pipeline.results)
                and coverage.judged_nothing(pipeline.results))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        ab.stop(self.pipeline.ab)


def sigterm_to_interrupt(signum, frame):
    """SIGTERM (a CI job's timeout) as Ctrl-C: the live workers killed, the session's outputs still written."""
    process.kill_all_live()
    raise KeyboardInterrupt("SIGTERM")

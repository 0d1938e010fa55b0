"""What a case kind reads from its session, and the one interface every case kind has.

A session (:class:`~pytest_dlperf.controller.session.DlperfSession`) is a :class:`Context`: the options,
the baseline (a file's, else the case's history), where each case's runs go and how they start, the
live display and the results recorded so far.  A case kind (:class:`CaseKind`: throughput,
convergence, time-to-train command) gets a :class:`Context` and never the session module, so the
session can dispatch to the kinds without a kind calling back into it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from .. import baseline as baseline_mod
from ..cases import Case
from ..launch import forkserver, threads
from ..launch.launchers import get_launcher
from ..launch.workers import CaseError, RemoteRankZero, RunParams
from ..models import ModelSpec
from ..reporting.live import LiveProgress
from ..results.case import CaseResult, Expected
from .batchsearch import Searches
from .device import DeviceChoice

if TYPE_CHECKING:
    from ..history.hooks import HistoryBaselines
    from ..options import Options

T = TypeVar("T")
#: A case's properties for JUnit XML and the terminal's status letters (the test's ``user_properties``).
Properties = list[tuple[str, object]]


@dataclasses.dataclass
class ScalingReferences:
    """The 1-rank figures a session measured for scaling (``-m gpu8`` alone), once per config."""

    figures: dict[Case, float | None] = dataclasses.field(default_factory=dict)
    errors: dict[Case, str] = dataclasses.field(default_factory=dict)


class Context:
    """One pytest session's state that every case kind reads: options, baselines, runs and results."""

    def __init__(self, config: pytest.Config, options: Options, baseline: baseline_mod.Baseline | None, *,
                 history: HistoryBaselines | None = None, history_references: HistoryBaselines | None = None):
        self.config = config
        self.options = options
        self.baseline = baseline
        #: --dlperf-baseline-from-history: each case's last sessions, the baseline where a file gives none.
        self.history = history
        #: --dlperf-save-baseline with --dlperf-history: the cases' last sessions, whose host probes a baseline
        #: being saved is compared with.
        self.history_references = history_references
        self.results: list[CaseResult] = []
        self.launcher = get_launcher(options.launcher, options.launcher_args, **(
            {"nnodes": options.nnodes, "endpoint": options.rdzv_endpoint, "node_rank": options.node_rank,
             "join_timeout": options.rdzv_timeout}
            if options.launcher == "torchrun" else {}))
        self.searches = Searches(max_memory=options.max_memory, max_trials=options.max_batch_trials)
        self.references = ScalingReferences()
        self.live = LiveProgress(config)
        self._workdir: Path | None = None
        self._device_choice: DeviceChoice | None = None

    # -- where and how cases run

    @property
    def device_choice(self) -> DeviceChoice:
        """Probed on first use (importing torch), not at configure time: ``pytest --co`` stays fast."""
        if self._device_choice is None:
            self._device_choice = DeviceChoice.probe(self.options.device)
        return self._device_choice

    @property
    def probed_device(self) -> str | None:
        """The device, if a case has asked for it yet (None: not probed)."""
        return None if self._device_choice is None else self._device_choice.kind

    @property
    def device(self) -> str:
        return self.device_choice.kind

    @property
    def workdir_if_made(self) -> Path | None:
        return self._workdir

    @property
    def workdir(self) -> Path:
        """This session's folder of worker specs, logs and results (``--dlperf-log-dir``, else basetemp)."""
        if self._workdir is None:
            if self.options.log_dir:
                base = Path(self.options.log_dir)
            else:
                # pytest has no public accessor of the session's TempPathFactory outside fixtures.
                factory = getattr(self.config, "_tmp_path_factory", None)
                base = factory.getbasetemp() / "dlperf" if factory else Path(".dlperf")
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            self._workdir = base / f"session-{stamp}-{os.getpid()}"
            self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    def case_dir(self, case: Case) -> Path:
        """The case's folder in the session's: its id, with anything that is no plain name character
        replaced, so that a setting's text (``x=../../etc``) cannot lead out of the log folder."""
        name = re.sub(r"[^A-Za-z0-9_.+=-]", "_", case.id).replace("..", "__")
        return self.workdir / name

    def cpu_threads(self, case: Case, entry: baseline_mod.Entry | None) -> threads.Chosen | None:
        """The intra-op threads of each of the case's CPU ranks, and where the count comes from
        (:func:`pytest_dlperf.launch.threads.choose`); None on GPUs, whose ranks get no count."""
        if self.device != "cpu":
            return None
        here = self.launcher.ranks_per_node(case.gpus)
        recorded = entry.cpu_threads if entry is not None else None
        if recorded is None and entry is not None and entry.threads_as_before:
            recorded = threads.as_before(here)
        return threads.choose(self.options.cpu_threads, recorded, here)

    def threads_mismatch(self, case: Case, entry: baseline_mod.Entry | None) -> str | None:
        """Where ``--dlperf-cpu-threads`` gives a CPU case another count than its judged baseline entry was measured
        with, the one line that fails it (:func:`pytest_dlperf.launch.threads.mismatch`); else None."""
        option = self.options.cpu_threads
        chosen = self.cpu_threads(case, entry) if option is not None and entry and not entry.unjudged else None
        return threads.mismatch(case.id, option, chosen, entry.cpu_threads is not None) if chosen else None

    def params_for(self, case: Case, entry: baseline_mod.Entry | None) -> RunParams:
        """Step counts: the option, else the entry's, else the baseline defaults', else the built-in defaults;
        the CPU ranks' threads (:meth:`cpu_threads`)."""
        opts = self.options
        defaults = dict(baseline_mod.STEP_DEFAULTS)
        if self.baseline is not None:
            defaults.update(self.baseline.step_defaults)
        if entry is not None:
            defaults.update(entry.overrides)
        chosen = {k: getattr(opts, k) if getattr(opts, k) is not None else defaults[k]
                  for k in baseline_mod.STEP_DEFAULTS}
        cpu = self.cpu_threads(case, entry)
        return RunParams(device=self.device, runs=opts.runs, timeout=opts.timeout, launcher=opts.launcher,
                         peak_tflops=opts.peak_tflops, telemetry=not opts.no_telemetry,
                         data_dir=opts.data_dir, data_workers=opts.data_workers, data_only=opts.data_only,
                         malloc=opts.malloc, fork_server=forkserver.uses_server(opts.start, self.device),
                         share_gpus=bool(opts.share_gpus), dist_backend=opts.dist_backend,
                         cpu_threads=cpu.threads if cpu is not None else None, **chosen)

    # -- what a case is judged against

    def expected(self, entry: baseline_mod.Entry | None, unit: str, case: Case | None = None) -> Expected | None:
        if entry is None or entry.unjudged:  # a baseline file wins; else the case's history, if asked for
            return self.history.expected(case, unit, self.options.tolerance) if self.history and case else None
        return entry.expected(unit, self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE)

    def tolerance(self, entry: baseline_mod.Entry | None) -> float:
        """The entry's tolerance, else ``--dlperf-tolerance``, else the default."""
        if entry is not None and entry.tolerance is not None:
            return entry.tolerance
        return self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE

    def gate_minimum(self, entry: baseline_mod.Entry | None, key: str, from_option: float | None) -> float | None:
        """A gate's minimum (``key``: a baseline field): the entry's, else the baseline defaults', else the option's."""
        if entry is not None and getattr(entry, key) is not None:
            return getattr(entry, key)
        if self.baseline is not None and key in self.baseline.defaults:
            return self.baseline.defaults[key]
        return from_option

    def cpu_isa(self) -> str | None:
        """This machine's CPU instruction set (:func:`pytest_dlperf.environment.cpu_isa`; collected once)."""
        from .. import environment

        return (environment.collect(self.config.rootpath).get("host") or {}).get("cpu_isa")

    def host_cpu(self) -> str | None:
        """This host's CPU model (:func:`pytest_dlperf.environment.collect`; collected once)."""
        from .. import environment

        return (environment.collect(self.config.rootpath).get("host") or {}).get("cpu")

    # -- running a case's runs

    def start(self, case: Case, nodeid: str, unit: str, params: RunParams) -> CaseResult:
        """The case's record, in the session's results from now on (an interrupted case is recorded too)."""
        result = CaseResult(id=case.id, nodeid=nodeid, case=case, unit=unit, parameters=params.to_dict())
        self.results.append(result)
        return result

    @contextlib.contextmanager
    def watching(self, label: str, unit: str) -> Iterator[Callable[..., None]]:
        """The live display while runs go on: yields their ``on_progress``; the display ends with the runs."""
        self.live.start()
        try:
            yield functools.partial(self.live.update, label, unit, 0)
        finally:
            self.live.finish()

    def measured(self, result: CaseResult, properties: Properties, measure: Callable[[], T], *,
                 remote: Callable[[list[int]], str] | None = None, relabel: Callable[[str], str] = str) -> T | None:
        """``measure()``'s value.  A run that failed (:class:`CaseError`) is recorded as an error (``relabel``: its
        message as the case says it) and raised as the test's failure.  With ``remote``, a run whose rank 0 ran on
        another node (:class:`RemoteRankZero`) records the case as remote, ``remote(ranks)`` its message, and
        gives None.  Either way the case's duration is recorded."""
        started = time.monotonic()
        try:
            return measure()
        except RemoteRankZero as part:
            if remote is None:
                raise
            result.record_remote(remote(part.ranks), part.runs, properties)
            return None
        except CaseError as exc:
            raise result.record_error(relabel(exc.message), exc.runs, properties) from None
        finally:
            result.record_end(started)


class CaseKind:
    """A kind of case the controller runs: which cases are its (:meth:`applies`), and how one is measured,
    judged and recorded (:meth:`run`, which raises :class:`~pytest_dlperf.results.case.CaseFailed` when it failed)."""

    #: The kind's name (a registry key).
    name = ""

    def applies(self, case: Case, spec: ModelSpec) -> bool:
        raise NotImplementedError

    def run(self, ctx: Context, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
            properties: Properties) -> None:
        raise NotImplementedError

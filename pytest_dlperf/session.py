"""The session: run one case (its runs, largest batch and scaling reference) and record it.

:class:`DlperfSession` is created once per pytest session by the plugin; for each case it
decides whether it can run here (:meth:`DlperfSession.skip_reason`), searches the largest
batch (:mod:`.batchsearch`), measures one fresh run at a time until the runs decide
(:mod:`.sequential`, :mod:`.evidence`), judges every gate (:mod:`.verdict`) and records a
typed :class:`~pytest_dlperf.results.CaseResult` for the outputs (:mod:`.outputs`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import os
import re
import statistics
import time
from pathlib import Path

import pytest

from . import baseline as baseline_mod
from . import data, models
from .batchsearch import Searches
from .cases import Case
from .device import DeviceChoice, gpu_sized_warning
from .launch.launchers import get_launcher
from .measurers import measurer_for, runner_for
from .options import DEFAULTS, Options
from .reporting import benchmark_json, junit
from .reporting.live import LiveProgress
from .results import CaseFailed, CaseResult, Expected, Scaling, Status, telemetry_summaries
from .launch.workers import Attempt, CaseError, RemoteRankZero, RunParams
from .gate.sequential import SAVE_RUNS, Budget, Evidence, measure_until_decided
from .gate.verdict import (ONE_RANK_DDP, PLAIN_PROCESS, Verdict, compose_message, judge_evidence, scaling, scaling_message, utilization_gate)


class DlperfSession:
    """One pytest session's cases: options, baseline, and the results recorded so far."""

    def __init__(self, config: pytest.Config, options: Options, baseline: baseline_mod.Baseline | None):
        self.config = config
        self.options = options
        self.baseline = baseline
        self.results: list[CaseResult] = []
        self.launcher = get_launcher(options.launcher, options.launcher_args, **(
            {"nnodes": options.nnodes, "endpoint": options.rdzv_endpoint, "node_rank": options.node_rank,
             "join_timeout": options.rdzv_timeout}
            if options.launcher == "torchrun" else {}))
        self.searches = Searches(max_memory=options.max_memory, max_trials=options.max_batch_trials)
        self._references: dict[Case, float | None] = {}  # 1-rank figures measured for scaling
        self._reference_errors: dict[Case, str] = {}
        self._workdir: Path | None = None
        self._device_choice: DeviceChoice | None = None
        self.live = LiveProgress(config)
        self.history = None  # --dlperf-baseline-from-history: a history.hooks.HistoryBaselines
        # --dlperf-save-baseline with --dlperf-history: the cases' last sessions, for the host probes a saved
        # baseline is compared with (a history.hooks.HistoryBaselines)
        self.history_references = None

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

    def skip_reason(self, case: Case) -> str | None:
        spec = models.get_model_spec(case.model)
        missing = spec.missing_requirements()
        if missing:
            return missing[0]
        backend = data.backend_of(case.settings_dict)
        if self.options.data_only and (case.converges or runner_for(case, spec) is not None):
            return "--dlperf-data-only times data loaders; a convergence case trains to a target"
        if self.options.data_only and backend == data.SYNTHETIC:
            return ("--dlperf-data-only times a data loader; this case's data is synthetic "
                    "(set data=torchvision or data=dali)")
        no_loader = data.missing_module(backend)
        if no_loader:
            return no_loader
        choice = self.device_choice
        if choice.kind == "cuda" and not choice.cuda_count:
            return "CUDA not available"
        unavailable = self.launcher.unavailable()
        if unavailable:
            return unavailable
        reach = self.launcher.reach(choice.kind, choice.cuda_count)
        if reach is not None and case.gpus > reach:
            if choice.kind == "cuda":
                return f"needs {case.gpus} GPUs, {reach} visible"
            return f"needs {case.gpus} ranks, the {self.launcher.name} launcher reaches {reach}"
        if case.searches_batch:
            return self.max_batch_skip_reason()
        return None

    def max_batch_skip_reason(self) -> str | None:
        """Why a ``batch_size: "max"`` case cannot run here, or None."""
        if self.device == "cpu" and self.options.max_memory is None:
            return ("batch size max on the CPU needs --dlperf-max-memory: without a cap the search would grow "
                    "into swap and the kernel's OOM killer")
        if self.options.launcher == "torchrun" and self.options.nnodes > 1:
            return "batch size max is searched by one controller: not in a torchrun job across nodes"
        return None

    def params_for(self, entry: baseline_mod.Entry | None) -> RunParams:
        """Step counts: the option, else the entry's, else the baseline defaults', else :data:`DEFAULTS`."""
        opts = self.options
        defaults = dict(DEFAULTS)
        if self.baseline is not None:
            defaults.update({k: v for k, v in self.baseline.defaults.items() if k in DEFAULTS})
        if entry is not None:
            defaults.update(entry.overrides)
        chosen = {k: getattr(opts, k) if getattr(opts, k) is not None else defaults[k] for k in DEFAULTS}
        return RunParams(device=self.device, runs=opts.runs, timeout=opts.timeout, launcher=opts.launcher,
                         peak_tflops=opts.peak_tflops, telemetry=not opts.no_telemetry,
                         data_dir=opts.data_dir, data_workers=opts.data_workers, data_only=opts.data_only,
                         malloc=opts.malloc, **chosen)

    def expected(self, entry: baseline_mod.Entry | None, unit: str, case: Case | None = None) -> Expected | None:
        if entry is None or entry.unjudged:  # a baseline file wins; else the case's history, if asked for
            return self.history.expected(case, unit, self.options.tolerance) if self.history and case else None
        return entry.expected(unit, self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE)

    def cpu_isa(self) -> str | None:
        """This machine's CPU instruction set (:func:`pytest_dlperf.environment.cpu_isa`; collected once)."""
        from . import environment

        return (environment.collect(self.config.rootpath).get("host") or {}).get("cpu_isa")

    def gate_minimum(self, entry: baseline_mod.Entry | None, key: str, from_option: float | None) -> float | None:
        """A gate's minimum (``key``: a baseline field): the entry's, else the baseline defaults', else the option's."""
        if entry is not None and getattr(entry, key) is not None:
            return getattr(entry, key)
        if self.baseline is not None and key in self.baseline.defaults:
            return self.baseline.defaults[key]
        return from_option

    def gpu_sized_warning(self, case: Case) -> str | None:
        """Why a case sized for a GPU may be slow here (:func:`pytest_dlperf.device.gpu_sized_warning`), or None."""
        return gpu_sized_warning(case, self.options.device, self.device)

    # -- the scaling reference

    def scaling_reference(self, case: Case, params: RunParams) -> tuple[float, str, str | None] | None:
        """The 1-rank throughput of the same config, where it comes from and how it was measured: measured
        in this session (a plain process, or a one-rank DDP job under a launcher that starts ranks), else
        the baseline's, else measured now (a plain process)."""
        for result in reversed(self.results):
            if result.measured and result.case.gpus == 1 and result.case.same_config(case):
                return result.throughput, "this session", ONE_RANK_DDP if result.ranks else PLAIN_PROCESS
        entry = self.baseline.reference(case) if self.baseline is not None else None
        if entry is not None:
            return entry.throughput, "baseline", None
        return self.measured_reference(case, params)

    def measured_reference(self, case: Case, params: RunParams) -> tuple[float, str, str | None] | None:
        """No 1-rank figure in the session or the baseline (``-m gpu8`` alone): measure one.

        Once per config and session, as a single local process with the case's step counts;
        it is not a test of its own.  A reference that cannot be measured leaves the case
        without scaling figures, and says so.
        """
        one = self.searches.at_chosen_batch(case.with_gpus(1), self.device)
        if one not in self._references:
            try:
                spec = models.get_model_spec(one.model)
                attempt = measurer_for(spec)(one, spec, dataclasses.replace(params, runs=1,
                                  launcher="local"), self.case_dir(case) / "reference", get_launcher("local"))
                self._references[one] = attempt.summary.median
            except CaseError as exc:
                self._references[one] = None
                self._reference_errors[one] = exc.message.splitlines()[0]
        figure = self._references[one]
        return (figure, "measured for scaling", PLAIN_PROCESS) if figure is not None else None

    def judge_attempt(self, case: Case, entry: baseline_mod.Entry | None, attempt: Attempt, evidence: Evidence,
                      params: RunParams) -> tuple[Verdict, Scaling | None]:
        verdict = judge_evidence(self.searches.label(case, self.device), evidence, attempt.unit,
                                 self.expected(entry, attempt.unit, case), require_baseline=self.options.require_baseline,
                                 inconclusive=self.options.inconclusive, max_runs=self.options.max_runs)
        reference = self.scaling_reference(case, params) if case.gpus > 1 else None
        if reference is None:
            return verdict, None
        minimum = self.gate_minimum(entry, "min_scaling_efficiency", self.options.min_efficiency)
        figure = evidence.estimate.value if evidence.estimate is not None else attempt.summary.median
        value, source, kind = reference
        return verdict, scaling(figure, case.gpus, value, source, minimum, kind)

    def measure_runs(self, case: Case, measured: Case, spec, params: RunParams, entry: baseline_mod.Entry | None,
                     result: CaseResult) -> tuple[Attempt, Evidence]:
        """One fresh run at a time until the evidence decides the case (:mod:`.sequential`)."""
        opts, one_run = self.options, dataclasses.replace(params, runs=1)
        expected = self.expected(entry, spec.unit, case)
        budget = Budget(opts.runs, 1 if opts.data_only else opts.max_runs, opts.max_seconds, opts.max_interference,
                        opts.bandwidth_drop(self.device), opts.core_drop(self.device))

        done: list[dict] = []

        def measure_one(index: int) -> Attempt:
            self.live.start()
            shown = functools.partial(self.live.update, self.searches.label(case, self.device), spec.unit, 0)
            try:
                attempt = measurer_for(spec)(measured, spec, one_run, self.case_dir(case), self.launcher,
                                             on_progress=shown, first_index=index)
            except CaseError as exc:
                exc.runs = done + exc.runs  # every run of the case, for the results
                raise
            finally:
                self.live.finish()
            done.extend(attempt.runs)
            return attempt

        def more(attempt: Attempt, evidence: Evidence) -> bool:
            scale = None if opts.data_only else self.judge_attempt(case, entry, attempt, evidence, params)[1]
            return scale is not None and scale.failed

        # The baseline's own runs: a file entry's medians, or the history's figures (its last sessions).
        own = expected.figures if expected is not None and expected.figures else (entry.runs if entry else ())
        # A baseline being saved measures SAVE_RUNS counted runs (or --dlperf-runs), re-measuring its busy runs
        # within the budget: one saved on a disturbed machine would poison every later verdict against it.
        wanted = (opts.runs if opts.runs_given else SAVE_RUNS) if opts.save_baseline and not opts.data_only else 0
        if wanted and not opts.max_runs_given:  # room to re-measure its busy runs
            budget = dataclasses.replace(budget, max_runs=max(budget.max_runs, wanted + wanted // 2))
        attempt, evidence = measure_until_decided(measure_one, expected, own, budget, more, counted_runs=wanted,
                                                  probe_runs=entry.probe_runs if entry is not None else None)
        result.attempts.append(attempt.to_dict())
        result.evidence = None if opts.data_only else evidence.to_dict()
        return attempt, evidence

    # -- running a case

    def record_skip(self, case: Case, nodeid: str, reason: str) -> None:
        self.results.append(CaseResult(id=case.id, nodeid=nodeid, case=case, verdict=Status.SKIPPED, message=reason))

    def run_case(self, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
                 properties: list[tuple[str, object]]) -> None:
        """Measure, judge and record a case; raise :class:`CaseFailed` when it failed.

        ``entry``: its baseline entry, if any; ``properties``: the test's ``user_properties``,
        which JUnit XML and the terminal's status letters read.
        """
        spec = models.get_model_spec(case.model)
        runner = runner_for(case, spec)  # judged by a time to train: pytest_dlperf.convergence, commands.train_time
        if runner is not None:
            return runner(self, case, entry, nodeid, properties)
        params = self.params_for(entry)
        started = time.monotonic()
        result = CaseResult(id=case.id, nodeid=nodeid, case=case, unit=spec.unit, parameters=params.to_dict())
        self.results.append(result)
        try:
            measured = case
            if case.searches_batch:
                measured, result.max_batch = self.searches.resolve(case, spec, params,
                                                                   self.case_dir(case) / "max-batch")
            attempt, evidence = self.measure_runs(case, measured, spec, params, entry, result)
            if not self.options.data_only:
                verdict, scale = self.judge_attempt(case, entry, attempt, evidence, params)
        except RemoteRankZero as part:
            # A torchrun job across nodes: rank 0's node measures, gates and reports.
            result.attempts.append({"throughput": None, "runs": part.runs})
            result.verdict = Status.REMOTE
            result.message = (f"{case.id}: rank(s) {', '.join(map(str, part.ranks))} of {case.gpus} ran on this "
                              "node; the node of rank 0 reports")
            properties.append(("dlperf_verdict", Status.REMOTE.value))
            return
        except CaseError as exc:
            raise result.record_error(self.searches.relabel(exc.message, case, self.device), exc.runs,
                                      properties) from None
        finally:
            result.record_end(started)

        if self.options.data_only:
            self._record_data_only(entry, result, attempt)
            properties.extend(junit.data_only_properties(result.data))
            return
        self._record_judged(case, entry, result, attempt, verdict, scale)
        properties.extend(junit.properties(result))
        benchmark_json.add_case(self.config, result)
        if result.verdict is Status.FAIL:
            raise CaseFailed(result.message)

    def _record_judged(self, case: Case, entry: baseline_mod.Entry | None, result: CaseResult,
                       last: Attempt, verdict: Verdict, scale: Scaling | None) -> None:
        """The runs' figures and every gate's verdict, in ``result``."""
        result.telemetry = last.telemetry()
        minimum = self.gate_minimum(entry, "min_gpu_utilization", self.options.min_gpu_utilization)
        gate = utilization_gate(case.id, case.gpus, minimum, telemetry_summaries(result), self.options.no_telemetry)
        compiled = compile_seconds(last)
        loader = last.data()
        ranks = last.ranks()
        expected = self.expected(entry, last.unit, case)
        mismatch = (self.baseline.device_mismatch(last.device, self.cpu_isa()) if expected is not None and entry
                    else None)
        notes = [entry.unjudged] if entry is not None and entry.unjudged else []
        notes += [f"compile {compiled:.1f} s, outside the measured windows"] if compiled is not None else []
        notes += last.warnings
        notes += [f"input: {data.describe(loader, last.unit)}"] if loader is not None else []
        notes += [note for note in (last.straggler(ranks), mismatch) if note]
        if scale is not None:
            scaling_note = scaling_message(case.id, scale, last.unit)
        elif case.gpus > 1:
            reason = self._reference_errors.get(case.with_gpus(1), "?")
            scaling_note = f"no scaling figures: the 1-rank reference failed: {reason}"
        else:
            scaling_note = None
        failed = verdict.failed or (scale is not None and scale.failed) or (gate is not None and gate.failed)
        result.judged = True
        result.verdict = Status.FAIL if failed else verdict.status
        result.throughput_verdict = Status.INCONCLUSIVE if verdict.inconclusive else verdict.status
        result.message = compose_message(verdict, scale, scaling_note, gate, notes)
        estimate = (result.evidence or {}).get("estimate")
        result.throughput = estimate["value"] if estimate else last.summary.median
        result.stats, result.difference = last.summary.to_dict(), verdict.difference
        result.device, result.ranks, result.scaling = last.device, ranks, scale
        result.flops, result.data, result.compile_seconds = last.flops(case.gpus), loader, compiled
        result.gpu_utilization_gate, result.hardware_mismatch, result.baseline = gate, mismatch, expected

    def _record_data_only(self, entry: baseline_mod.Entry | None, result: CaseResult, attempt: Attempt) -> None:
        """``--dlperf-data-only``: the loader's figures, a data-only verdict, never a baseline judgement.

        ``throughput`` stays None, so the loader's figure can never be saved as a baseline,
        taken as a 1-rank scaling reference or judged; it lives in ``result.data``.
        """
        loader = attempt.data()
        expected = self.expected(entry, attempt.unit, result.case)
        message = data.data_only_message(result.case.id, loader, attempt.unit,
                                         expected.throughput if expected is not None else None)
        result.verdict, result.message = Status.DATA_ONLY, "; ".join([message, *attempt.warnings])
        result.data, result.stats, result.device = loader, attempt.summary.to_dict(), attempt.device
        result.ranks, result.telemetry = attempt.ranks(), attempt.telemetry()


def compile_seconds(attempt: Attempt) -> float | None:
    """The median compile time of the attempt's runs (``timing.compile_seconds``); None when not compiled."""
    seconds = [run["timing"]["compile_seconds"] for run in attempt.runs if "compile_seconds" in run["timing"]]
    return statistics.median(seconds) if seconds else None


def params_summary(results: list[CaseResult]) -> dict[str, int | None]:
    """Each step count shared by every measured case of the session (None where they differ)."""
    params = [r.parameters for r in results if r.parameters]
    out: dict[str, int | None] = {}
    for key in DEFAULTS:
        values = {p[key] for p in params}
        out[key] = values.pop() if len(values) == 1 else None
    return out


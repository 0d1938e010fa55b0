"""Throughput cases: fresh runs until the evidence decides, every gate judged, the case recorded.

A throughput case is measured by the function registered for its spec's type (:data:`MEASURERS`): a
model our worker trains (:func:`pytest_dlperf.launch.workers.measure`) or a command's logged steps
(:func:`pytest_dlperf.commands.measure.measure`).  Both take ``(case, spec, params, workdir, launcher,
on_progress, first_index)`` and return the runs' records, so every throughput case is judged alike:

1. a ``batch_size: "max"`` case first searches its batch (:mod:`.batchsearch`);
2. one fresh run at a time until the runs decide (:mod:`pytest_dlperf.gate.sequential`);
3. the throughput gate (:func:`pytest_dlperf.gate.verdict.judge_evidence`), the scaling gate against a
   1-rank reference (this session's, the baseline's, else one measured now) and the utilization gate;
4. the case's record: figures, gates, one message (:func:`pytest_dlperf.gate.verdict.compose_message`).

``--dlperf-data-only`` measures the loader alone: one run, a data-only verdict, never a baseline's.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from pathlib import Path

from .. import baseline as baseline_mod
from .. import data, models
from ..cases import Case
from ..commands import measure as command_measure
from ..commands.spec import CommandSpec
from ..gate.sequential import SAVE_RUNS, Budget, Evidence, measure_until_decided, unsaved_reason
from ..gate.verdict import (ONE_RANK_DDP, PLAIN_PROCESS, Verdict, compose_message, judge_evidence, never_decided,
                            scaling, scaling_message, utilization_gate)
from ..launch import workers
from ..launch.launchers import Launcher, get_launcher
from ..launch.workers import CaseError, RunParams
from ..models import ModelSpec
from ..registry import Registry
from ..reporting import benchmark_json, junit
from ..results.case import CaseFailed, CaseResult, Scaling, Status
from ..results.runs import Attempt, RunRecord
from ..results import host_bound
from ..results.telemetry import gpu_utilizations, telemetry_summaries
from .context import CaseKind, Context, Properties

#: ``measure(case, spec, params, workdir, launcher, on_progress=None, first_index=0) -> list[RunRecord]``
Measure = Callable[..., list[RunRecord]]
#: The measure function of each spec type, by the type's name; a spec's most specific type wins (:func:`measurer_for`).
MEASURERS: Registry[Measure] = Registry("measure function")
MEASURERS.add(ModelSpec.__name__, workers.measure)
MEASURERS.add(CommandSpec.__name__, command_measure.measure)


def measurer_for(spec: ModelSpec) -> Measure:
    """The measure function of ``spec``'s most specific registered type."""
    for kind in type(spec).__mro__:
        if kind.__name__ in MEASURERS:
            return MEASURERS[kind.__name__]
    raise TypeError(f"no measure function for a {type(spec).__name__}")


def measure_attempt(case: Case, spec: ModelSpec, params: RunParams, workdir: Path, launcher: Launcher,
                    **progress) -> Attempt:
    """``params.runs`` runs of ``case`` by its spec's measure function, as one :class:`Attempt`."""
    return Attempt.from_runs(measurer_for(spec)(case, spec, params, workdir, launcher, **progress), spec.unit)


class ThroughputKind(CaseKind):
    """Every case not judged by a time to train: its throughput, against its baseline."""

    name = "throughput"

    def applies(self, case: Case, spec: ModelSpec) -> bool:
        return True

    def run(self, ctx: Context, case: Case, entry: baseline_mod.Entry | None, nodeid: str,
            properties: Properties) -> None:
        spec = models.get_model_spec(case.model)
        params = ctx.params_for(case, entry)
        result = ctx.start(case, nodeid, spec.unit, params)

        def measure() -> tuple[Attempt, Evidence, tuple[Verdict, Scaling | None] | None]:
            measured = case
            if case.searches_batch:
                measured, result.max_batch = ctx.searches.resolve(case, spec, params, ctx.case_dir(case) / "max-batch")
            attempt, evidence = measure_runs(ctx, case, measured, spec, params, entry, result)
            # Judged inside the case's time: a 1-rank reference may still be measured (measured_reference).
            judged = None if ctx.options.data_only else judge_attempt(ctx, case, entry, attempt, evidence, params)
            return attempt, evidence, judged

        def remote(ranks: list[int]) -> str:  # a torchrun job across nodes: rank 0's node measures, gates, reports
            return f"{case.id}: rank(s) {', '.join(map(str, ranks))} of {case.gpus} ran on this node; the node of " \
                   "rank 0 reports"

        done = ctx.measured(result, properties, measure, remote=remote,
                            relabel=lambda message: ctx.searches.relabel(message, case, ctx.device))
        if done is None:
            return
        attempt, evidence, judged = done
        if judged is None:  # --dlperf-data-only
            record_data_only(ctx, entry, result, attempt)
            properties.extend(junit.data_only_properties(result.data))
            return
        verdict, scale = judged
        record_judged(ctx, case, entry, result, attempt, evidence, verdict, scale)
        if ctx.options.save_baseline:  # the quiet runs an entry needs: never more than --dlperf-max-runs allows
            refuse_to_save(result, evidence, min(saved_runs(ctx.options), ctx.options.max_runs))
        properties.extend(junit.properties(result))
        benchmark_json.add_case(ctx.config, result)
        if result.verdict is Status.FAIL:
            raise CaseFailed(result.message)


def measure_runs(ctx: Context, case: Case, measured: Case, spec: ModelSpec, params: RunParams,
                 entry: baseline_mod.Entry | None, result: CaseResult) -> tuple[Attempt, Evidence]:
    """One fresh run at a time until the evidence decides the case (:mod:`pytest_dlperf.gate.sequential`)."""
    opts, one_run = ctx.options, dataclasses.replace(params, runs=1)
    expected = ctx.expected(entry, spec.unit, case)
    budget = Budget(opts.runs, 1 if opts.data_only else opts.max_runs, opts.max_seconds, opts.max_interference,
                    opts.bandwidth_drop(ctx.device), opts.core_drop(ctx.device))
    done: list[RunRecord] = []

    def measure_one(index: int) -> Attempt:
        with ctx.watching(ctx.searches.label(case, ctx.device), spec.unit) as shown:
            try:
                attempt = measure_attempt(measured, spec, one_run, ctx.case_dir(case), ctx.launcher,
                                          on_progress=shown, first_index=index)
            except CaseError as exc:
                exc.runs = done + exc.runs  # every run of the case, for the results
                raise
        done.extend(attempt.runs)
        return attempt

    def more(attempt: Attempt, evidence: Evidence) -> bool:
        scale = None if opts.data_only else judge_attempt(ctx, case, entry, attempt, evidence, params)[1]
        return scale is not None and scale.failed

    # The baseline's own runs: a file entry's medians, or the history's figures (its last sessions).
    own = expected.figures if expected is not None and expected.figures else (entry.runs if entry else ())
    # A baseline being saved measures SAVE_RUNS counted runs (or --dlperf-runs), re-measuring its busy runs
    # within the budget: one saved on a disturbed machine would poison every later verdict against it.
    wanted = saved_runs(opts) if opts.save_baseline and not opts.data_only else 0
    if wanted and not opts.max_runs_given:  # room to re-measure its busy runs
        budget = dataclasses.replace(budget, max_runs=max(budget.max_runs, wanted + wanted // 2))
    # The drift between sessions the interval carries: the history's, where there is a store, else the prior.
    drift = ctx.history.drift(case.id, expected.tolerance) if ctx.history is not None and expected else None
    attempt, evidence = measure_until_decided(measure_one, expected, own, budget, more,
                                              counted_runs=wanted, spacing=save_spacing(opts, wanted),
                                              probe_runs=entry.probe_runs if entry is not None else None, drift=drift)
    result.attempts.append(attempt.record())
    result.evidence = None if opts.data_only else evidence
    return attempt, evidence


def judge_attempt(ctx: Context, case: Case, entry: baseline_mod.Entry | None, attempt: Attempt,
                  evidence: Evidence, params: RunParams) -> tuple[Verdict, Scaling | None]:
    """The throughput verdict and, for several ranks, the scaling figures against the 1-rank reference."""
    opts = ctx.options
    verdict = judge_evidence(ctx.searches.label(case, ctx.device), evidence, attempt.unit,
                             ctx.expected(entry, attempt.unit, case), require_baseline=opts.require_baseline,
                             inconclusive=opts.inconclusive, max_runs=opts.max_runs)
    if ctx.history is not None:  # a night that never decides is not green forever
        verdict = never_decided(verdict, ctx.history.inconclusive_streak(case.id), opts.inconclusive_nights)
    reference = scaling_reference(ctx, case, params, entry) if case.gpus > 1 else None
    if reference is None:
        return verdict, None
    minimum = ctx.gate_minimum(entry, "min_scaling_efficiency", opts.min_efficiency)
    figure = evidence.estimate.value if evidence.estimate is not None else attempt.summary.median
    value, source, kind = reference
    shared = ctx.device_choice.shared(case.gpus, bool(opts.share_gpus))
    return verdict, scaling(figure, case.gpus, value, source, minimum, kind, shared)


def scaling_reference(ctx: Context, case: Case, params: RunParams,
                      entry: baseline_mod.Entry | None = None) -> tuple[float, str, str | None] | None:
    """The 1-rank throughput of the same config, where it comes from and how it was measured: measured
    in this session (a plain process, or a one-rank DDP job under a launcher that starts ranks), else
    the baseline's, else measured now (a plain process; ``entry``: the case's, for its CPU threads)."""
    for result in reversed(ctx.results):
        if result.measured and result.case.gpus == 1 and result.case.same_config(case):
            return result.throughput, "this session", ONE_RANK_DDP if result.ranks else PLAIN_PROCESS
    one_rank = ctx.baseline.reference(case) if ctx.baseline is not None else None
    if one_rank is not None:
        return one_rank.throughput, "baseline", None
    return measured_reference(ctx, case, params, entry)


def measured_reference(ctx: Context, case: Case, params: RunParams,
                       entry: baseline_mod.Entry | None = None) -> tuple[float, str, str | None] | None:
    """No 1-rank figure in the session or the baseline (``-m gpu8`` alone): measure one.

    Once per config and session, as a single local process with the case's step counts;
    it is not a test of its own, on as many CPU threads as a 1-rank case of the case's entry gets
    (:meth:`~.context.Context.cpu_threads`).  A reference that cannot be measured leaves the case
    without scaling figures, and says so.
    """
    one = ctx.searches.at_chosen_batch(case.with_gpus(1), ctx.device)
    references = ctx.references
    cpu = ctx.cpu_threads(one, entry)
    threads = cpu.threads if cpu is not None else None
    if one not in references.figures:
        try:
            attempt = measure_attempt(one, models.get_model_spec(one.model),
                                      dataclasses.replace(params, runs=1, launcher="local", cpu_threads=threads),
                                      ctx.case_dir(case) / "reference", get_launcher("local"))
            references.figures[one] = attempt.summary.median
        except CaseError as exc:
            references.figures[one] = None
            references.errors[one] = exc.message.splitlines()[0]
    figure = references.figures[one]
    return (figure, "measured for scaling", PLAIN_PROCESS) if figure is not None else None


def record_judged(ctx: Context, case: Case, entry: baseline_mod.Entry | None, result: CaseResult, last: Attempt,
                  evidence: Evidence, verdict: Verdict, scale: Scaling | None) -> None:
    """The runs' figures and every gate's verdict, in ``result``."""
    result.telemetry = last.telemetry()
    minimum = ctx.gate_minimum(entry, "min_gpu_utilization", ctx.options.min_gpu_utilization)
    gate = utilization_gate(case.id, case.gpus, minimum, telemetry_summaries(result), ctx.options.no_telemetry)
    compiled = compile_seconds(last)
    loader = last.data()
    ranks = last.ranks()
    expected = ctx.expected(entry, last.unit, case)
    mismatch = (ctx.baseline.device_mismatch(last.device, ctx.cpu_isa()) if expected is not None and entry
                else None)
    notes = [entry.unjudged] if entry is not None and entry.unjudged else []
    notes += [f"compile {compiled:.1f} s, outside the measured windows"] if compiled is not None else []
    notes += last.warnings
    notes += [f"input: {data.describe(loader, last.unit)}"] if loader is not None else []
    notes += [note for note in (last.straggler(ranks), mismatch) if note]
    bound = host_bound.assess(gpu_utilizations(telemetry_summaries(result)), [run.timing for run in last.runs], last.windows,
                              ctx.options.host_bound_below, ctx.host_cpu()) if last.device.get("type") == "cuda" else None
    notes += [bound.line()] if bound is not None and bound.bound else []
    if expected is not None and entry is not None:
        notes += [note for note in (baseline_mod.start_mismatch(entry.start, last.start),
                                    baseline_mod.compile_mismatch(entry.compile, last.compile),
                                    baseline_mod.host_cpu_mismatch(entry.host_cpu, ctx.host_cpu())) if note]
    if scale is not None:
        scaling_note = scaling_message(case.id, scale, last.unit)
    elif case.gpus > 1:
        reason = ctx.references.errors.get(case.with_gpus(1), "?")
        scaling_note = f"no scaling figures: the 1-rank reference failed: {reason}"
    else:
        scaling_note = None
    failed = verdict.failed or (scale is not None and scale.failed) or (gate is not None and gate.failed)
    result.judged = True
    result.verdict = Status.FAIL if failed else verdict.status
    result.throughput_verdict = Status.INCONCLUSIVE if verdict.inconclusive else verdict.status
    result.message = compose_message(verdict, scale, scaling_note, gate, notes)
    result.throughput = evidence.estimate.value if evidence.estimate is not None else last.summary.median
    result.stats, result.difference = last.summary.to_dict(), verdict.difference
    result.device, result.ranks, result.scaling = last.device, ranks, scale
    result.flops, result.data, result.compile_seconds = last.flops(case.gpus), loader, compiled
    result.gpu_utilization_gate, result.hardware_mismatch, result.baseline = gate, mismatch, expected
    result.start, result.host_bound, result.compile = last.start, bound, last.compile


def saved_runs(opts) -> int:
    """Counted runs a baseline being saved measures: ``--dlperf-runs`` where given, else ``SAVE_RUNS``."""
    return opts.runs if opts.runs_given else SAVE_RUNS


def save_spacing(opts, wanted: int) -> float:
    """The least seconds between the starts of a saved case's runs: ``--dlperf-save-span`` (SAVE_SPAN) over its
    ``wanted`` counted runs, so that the baseline is the figure of a host over time, not of one moment of it."""
    return opts.save_span / (wanted - 1) if wanted > 1 and opts.save_span else 0.0


def refuse_to_save(result: CaseResult, evidence: Evidence, wanted: int) -> None:
    """A case measured for a baseline with too few quiet runs fails, and the save leaves it out (``unsaved``)."""
    reason = unsaved_reason(evidence, wanted)
    if reason is None:
        return
    result.unsaved, result.verdict = reason, Status.FAIL
    result.message = f"FAIL {result.id}: {reason}" + (f"\n  {result.message}" if result.message else "")


def record_data_only(ctx: Context, entry: baseline_mod.Entry | None, result: CaseResult, attempt: Attempt) -> None:
    """``--dlperf-data-only``: the loader's figures, a data-only verdict, never a baseline judgement.

    ``throughput`` stays None, so the loader's figure can never be saved as a baseline,
    taken as a 1-rank scaling reference or judged; it lives in ``result.data``.
    """
    loader = attempt.data()
    expected = ctx.expected(entry, attempt.unit, result.case)
    message = data.data_only_message(result.case.id, loader, attempt.unit,
                                     expected.throughput if expected is not None else None)
    result.verdict, result.message = Status.DATA_ONLY, "; ".join([message, *attempt.warnings])
    result.data, result.stats, result.device = loader, attempt.summary.to_dict(), attempt.device
    result.ranks, result.telemetry = attempt.ranks(), attempt.telemetry()


def compile_seconds(attempt: Attempt) -> float | None:
    """The median compile time of the attempt's runs (``timing.compile_seconds``); None when not compiled."""
    seconds = [run.timing["compile_seconds"] for run in attempt.runs if "compile_seconds" in run.timing]
    return statistics.median(seconds) if seconds else None

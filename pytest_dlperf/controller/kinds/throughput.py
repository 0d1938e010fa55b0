"""Throughput cases: fresh runs until the evidence decides, every gate judged.

A throughput case is measured by the function registered for its spec's type
(:data:`pytest_dlperf.controller.runner.MEASURERS`): a model our worker trains
(:func:`pytest_dlperf.launch.workers.measure`) or a command's logged steps
(:func:`pytest_dlperf.commands.measure.measure`), so every throughput case is judged alike.
:class:`ThroughputKind`'s two methods:

* ``measure``: a ``batch_size: "max"`` case first searches its batch (:mod:`.batchsearch`); then one fresh run
  at a time until the runs decide (:mod:`pytest_dlperf.gate.sequential`); then its figures, the scaling figures
  against a 1-rank reference (this session's, the baseline's, else one measured now) and the utilization gate;
* ``judge``: the throughput gate (:func:`pytest_dlperf.gate.verdict.judge_evidence`) and the other gates and
  notes, as one judgement (:func:`pytest_dlperf.gate.verdict.combine`).

``--dlperf-data-only`` measures the loader alone instead (:mod:`.data_only`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping

from ... import baseline as baseline_mod
from ... import data
from ...gate import attribution, far
from ...gate.policy import Policy
from ...gate.sequential import SAVE_RUNS, Budget, Evidence, measure_until_decided
from ...gate.verdict import combine, judge_evidence, scaling, scaling_message, utilization_gate
from ...results import host_bound
from ...results.case import Scaling
from ...results.judgement import Gate, GateName, Judgement, Reason, Status, Why
from ...results.runs import Attempt, RunRecord
from ...results.telemetry import gpu_utilizations, telemetry_summaries
from ...worker.phases import shared
from . import Measurement, Plan
from ..references import CaseReference
from ..runner import Runner


@dataclasses.dataclass(frozen=True)
class Judged:
    """What a throughput case's ``judge`` reads besides its figures: its label, its notes and the scaling
    part of its message."""

    label: str
    scaling_note: str | None
    notes: tuple[str, ...]
    #: Where its step's time went against its baseline's (:mod:`pytest_dlperf.gate.attribution`): said on a FAIL
    #: or an IMPROVED, which it explains; None without phases on both sides.
    shift: attribution.Shift | None = None
    #: A multi-rank case's scaling loss in parts, and per rank (:func:`pytest_dlperf.gate.attribution.scaling_parts`,
    #: :func:`~pytest_dlperf.gate.attribution.rank_parts`): said where its scaling gate failed.
    parts: tuple[str, ...] = ()


class ThroughputKind:
    """Every case not judged by a time to train: its throughput, against its baseline."""

    def measure(self, plan: Plan, runner: Runner) -> Measurement:
        case, params = plan.case, plan.params
        measured, max_batch = case, None
        if case.searches_batch:
            measured, max_batch = runner.searches.resolve(case, plan.spec, params, plan.folder / "max-batch")
        attempt, evidence = measure_runs(plan, runner, measured)
        scale = scaling_of(plan, runner, attempt, evidence)
        return figures_of(plan, runner, attempt, evidence, scale, max_batch)

    def judge(self, measurement: Measurement, reference: CaseReference, policy: Policy) -> Judgement:
        judged: Judged = measurement.value
        verdict = judge_evidence(judged.label, measurement.evidence, measurement.unit, measurement.baseline,
                                 require_baseline=policy.require_baseline, max_runs=policy.max_runs)
        moved = judged.shift is not None and verdict.status in (Status.FAIL, Status.IMPROVED)
        notes = (judged.shift.line(), *judged.notes) if moved else judged.notes
        if judged.parts and measurement.scaling is not None and measurement.scaling.failed:
            notes = (*judged.parts, *notes)
        return combine(verdict, measurement.scaling, judged.scaling_note, measurement.gpu_utilization_gate, notes)


def measure_runs(plan: Plan, runner: Runner, measured: Case) -> tuple[Attempt, Evidence]:
    """One fresh run at a time until the evidence decides the case (:mod:`pytest_dlperf.gate.sequential`)."""
    opts, case, reference = runner.options, plan.case, plan.reference
    # A run far slower than the baseline allows is cut short (pytest_dlperf.gate.far); never a run being saved, nor
    # with dlperf_max_interference off: a cut needs a machine known to be quiet, and with the busy rule off a slow
    # run may be the machine's (a loaded test host's runs were cut one at a time and left a slowdown undecided).
    expected = reference.expected
    cut = far.rule(expected.throughput, expected.tolerance, opts.max_interference) \
        if expected is not None and not plan.save and opts.max_interference is not None else None
    one_run = dataclasses.replace(plan.params, runs=1, far=cut)
    budget = Budget(opts.runs, opts.max_runs, opts.max_interference,
                    opts.bandwidth_drop(runner.device), opts.core_drop(runner.device))
    done: list[RunRecord] = []

    # The host's own speed after each run, in a process of its own (pytest_dlperf.gate.host): on the CPU, with the
    # busy rule on, for a save and against a save that kept it.
    probing = runner.device == "cpu" and opts.max_interference is not None and \
        (plan.save or (expected is not None and bool(expected.host_runs)))

    def measure_one(index: int) -> Attempt:
        runs = runner.runs(measured, plan.spec, one_run, plan.folder, label=runner.label(case), unit=plan.spec.unit,
                           first_index=index, before=done)
        for run in runs if probing else ():
            run.host_probe = runner.probe_host()
        done.extend(runs)
        return Attempt.from_runs(runs, plan.spec.unit)

    def more(attempt: Attempt, evidence: Evidence) -> bool:
        scale = scaling_of(plan, runner, attempt, evidence)
        return scale is not None and scale.failed

    # A baseline being saved measures SAVE_RUNS counted runs (or --dlperf-runs), re-measuring its busy runs
    # within the budget: one saved on a disturbed machine would poison every later verdict against it.
    wanted = saved_runs(opts) if plan.save else 0
    if wanted and not opts.max_runs_given:  # room to re-measure its busy runs
        budget = dataclasses.replace(budget, max_runs=max(budget.max_runs, wanted + wanted // 2))
    entry = plan.reference.entry
    return measure_until_decided(measure_one, reference.expected, reference.own_runs, budget, more,
                                 counted_runs=wanted, spacing=save_spacing(opts, wanted),
                                 probe_runs=entry.probe_runs if entry is not None else None, drift=reference.drift)


def scaling_of(plan: Plan, runner: Runner, attempt: Attempt, evidence: Evidence) -> Scaling | None:
    """For several ranks, the scaling figures against the 1-rank reference; None for one rank, or where the
    reference could not be measured."""
    case = plan.case
    found = plan.reference.scaling(plan.params) if case.gpus > 1 else None
    if found is None:
        return None
    figure = evidence.estimate.value if evidence.estimate is not None else attempt.summary.median
    value, source, kind = found
    shared = runner.device_choice.shared(case.gpus, bool(runner.options.share_gpus))
    return scaling(figure, case.gpus, value, source, plan.reference.minimums["min_scaling_efficiency"], kind, shared)


def figures_of(plan: Plan, runner: Runner, last: Attempt, evidence: Evidence, scale: Scaling | None,
               max_batch) -> Measurement:
    """The runs' figures, the utilization gate and the notes of a throughput case."""
    case, entry, opts = plan.case, plan.reference.entry, runner.options
    expected = plan.reference.expected
    telemetry = last.telemetry()
    summaries = telemetry_summaries({"telemetry": telemetry})
    gate = utilization_gate(case.id, case.gpus, plan.reference.minimums["min_gpu_utilization"], summaries,
                            opts.no_telemetry)
    compiled = compile_seconds(last)
    loader, ranks = last.data(), last.ranks()
    phases = attribution.of_runs(last.runs, {f.index for f in evidence.counted})
    host = host_facts(runner)
    mismatch = (plan.reference.baseline.device_mismatch(last.device, host.get("cpu_isa"))
                if expected is not None and entry and plan.reference.baseline is not None else None)
    notes = [entry.unjudged] if entry is not None and entry.unjudged else []
    notes += [f"compile {compiled:.1f} s, outside the measured windows"] if compiled is not None else []
    notes += last.warnings
    notes += [f"input: {data.describe(loader, last.unit)}"] if loader is not None else []
    notes += [note for note in (last.straggler(ranks), mismatch) if note]
    bound = host_bound.assess(gpu_utilizations(summaries), [run.timing for run in last.runs], last.windows,
                              opts.host_bound_below, host.get("cpu")) if last.device.get("type") == "cuda" else None
    notes += [bound.line()] if bound is not None and bound.bound else []
    if expected is not None and entry is not None:
        notes += [note for note in (baseline_mod.start_mismatch(entry.start, last.start),
                                    baseline_mod.compile_mismatch(entry.compile, last.compile),
                                    baseline_mod.host_cpu_mismatch(entry.host_cpu, host.get("cpu"))) if note]
    if scale is not None:
        scaling_note = scaling_message(case.id, scale, last.unit)
    elif case.gpus > 1:
        scaling_note = f"no scaling figures: the 1-rank reference failed: {plan.reference.scaling_error()}"
    else:
        scaling_note = None
    return Measurement(
        last.unit, [last.record()], throughput=evidence.estimate.value if evidence.estimate is not None else
        last.summary.median, stats=last.summary.to_dict(), baseline=expected, device=last.device, ranks=ranks,
        telemetry=telemetry, flops=last.flops(case.gpus), data=loader, compile_seconds=compiled, start=last.start,
        compile=last.compile, max_batch=max_batch, scaling=scale, gpu_utilization_gate=gate,
        hardware_mismatch=mismatch, host_bound=bound, evidence=evidence, phases=phases,
        value=Judged(runner.label(case), scaling_note, tuple(notes),
                     shift(phases, expected.phases if expected is not None else None),
                     scaling_parts(case.gpus, phases, plan.reference.one_rank_phases(), last.runs, evidence)
                     if scale is not None else ()))


def scaling_parts(ranks: int, phases, one_rank, runs, evidence: Evidence) -> tuple[str, ...]:
    """A multi-rank case's scaling loss in parts against its 1-rank reference, and per rank (the lines a failed
    scaling gate says, :mod:`pytest_dlperf.gate.attribution`)."""
    per_rank = attribution.of_ranks(runs, {f.index for f in evidence.counted})
    return tuple(line for line in (attribution.scaling_parts(ranks, phases, one_rank),
                                   attribution.rank_parts(per_rank)) if line)


def shift(now: Mapping[str, float] | None, then: Mapping[str, float] | None) -> attribution.Shift | None:
    """Where the step's time went against the baseline's, on the phases both timed (a command's log may give
    fewer than the worker, or other ones: :func:`pytest_dlperf.worker.phases.shared`)."""
    both = shared(now, then)
    return attribution.compare(*both) if both is not None else None


def host_facts(runner: Runner) -> dict:
    """This host's CPU model and instruction set (:func:`pytest_dlperf.environment.collect`; collected once)."""
    from ... import environment

    return environment.collect(runner.config.rootpath).get("host") or {}


def saved_runs(opts) -> int:
    """Counted runs a baseline being saved measures: ``--dlperf-runs`` where given, else ``SAVE_RUNS``."""
    return opts.runs if opts.runs_given else SAVE_RUNS


def save_spacing(opts, wanted: int) -> float:
    """The least seconds between the starts of a saved case's runs: ``dlperf_save_span`` (SAVE_SPAN) over its
    ``wanted`` counted runs, so that the baseline is the figure of a host over time, not of one moment of it."""
    return opts.save_span / (wanted - 1) if wanted > 1 and opts.save_span else 0.0


def compile_seconds(attempt: Attempt) -> float | None:
    """The median compile time of the attempt's runs (``timing.compile_seconds``); None when not compiled."""
    seconds = [run.timing["compile_seconds"] for run in attempt.runs if "compile_seconds" in run.timing]
    return statistics.median(seconds) if seconds else None

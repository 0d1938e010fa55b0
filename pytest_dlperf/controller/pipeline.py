"""The cases of a session: whether a case can run here, which kind runs it, and the one tail every kind shares.

:class:`Pipeline` is made once per pytest session by the session (:mod:`.session`).  It holds three services: the
:class:`~.runner.Runner` (device, launcher, work folder, run parameters), the :class:`~.references.References`
(what a case is judged against) and the session's results, and the session's
:class:`~pytest_dlperf.gate.policy.Policy`.  For each case it decides whether the case can run here
(:meth:`Pipeline.skip_reason`) and runs it (:meth:`Pipeline.run_case`): the case's kind measures and judges
(:mod:`.kinds`); the pipeline turns a failed run into ERROR and a remote rank's into REMOTE, settles the judgement by
its policies once, refuses an unquiet case of a baseline being saved, profiles it where ``--dlperf-profile`` says
(:func:`profile_case`), and builds the case's result once, frozen (an interrupted case's too), with the test's
properties and pytest-benchmark's files.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from .. import baseline as baseline_mod
from .. import data, models
from ..ab import AB
from ..cases import Case
from ..gate import nights
from ..gate import policy as policies
from ..gate.sequential import unsaved_reason
from ..launch.workers import CaseError, RemoteRankZero
from ..launch.workers import measure as worker_measure
from ..reporting import benchmark_json, junit, verdicts
from ..reporting.explain import headline
from ..results.case import CaseFailed, CaseResult, Status
from ..results.judgement import Judgement, Reason, Why
from ..worker.operators import Profile
from .device import gpu_sized_warning
from .kinds import Measurement, Plan, Registered, kind_of
from .kinds import builtin as builtin_kinds
from .references import References
from .runner import Runner, measurer_for

#: A case's properties for JUnit XML and the terminal's status letters (the test's ``user_properties``).
Properties = list[tuple[str, object]]


class Pipeline:
    """One pytest session's cases: whether each can run here, the kind that runs it, and their results."""

    #: ``--dlperf-against``: the A/B session (:mod:`pytest_dlperf.ab`), set by the session; None: a session as ever.
    ab: AB | None = None

    def __init__(self, config: pytest.Config, options, baseline: baseline_mod.Baseline | None, *,
                 history=None, history_references=None):
        self.config = config
        self.options = options
        self.baseline = baseline
        self.runner = Runner(config, options)
        self.results: list[CaseResult] = []
        self.references = References(options, baseline, self.runner, self.results, history=history,
                                     history_references=history_references)
        self.policy = policies.Policy(options.inconclusive, bool(options.require_baseline),
                                      options.inconclusive_nights, options.max_runs)

    # -- which kind, and whether here

    def kind_for(self, case: Case, spec: models.ModelSpec) -> Registered:
        """The kind that runs ``case``: an A/B session's pairs or ``--dlperf-data-only``'s loader for a
        throughput case, else the first registered kind whose predicate holds."""
        found = kind_of(case, spec)
        if found.throughput and self.ab is not None:
            return builtin_kinds.paired(self.ab)
        if found.throughput and self.options.data_only:
            return builtin_kinds.DATA_ONLY
        return found

    def skip_reason(self, case: Case) -> str | None:
        """Why ``case`` is not run in this session: the session's mode does not run it (:meth:`mode_skip_reason`),
        or it cannot be measured here (:meth:`missing_reason`); None: it runs."""
        return self.mode_skip_reason(case) or self.missing_reason(case)

    def mode_skip_reason(self, case: Case) -> str | None:
        """Why an A/B or a ``--dlperf-data-only`` session does not run ``case``: a choice, not a gap."""
        spec = models.get_model_spec(case.model)
        return builtin_kinds.mode_skip_reason(case, kind_of(case, spec), self.ab is not None, self.options.data_only)

    def missing_reason(self, case: Case) -> str | None:
        """Why ``case`` cannot be measured here (a gap in a session that gates: :mod:`.coverage`), or None."""
        spec = models.get_model_spec(case.model)
        if getattr(spec, "refused", None):  # a baseline's command from a file not trusted
            return spec.refused
        missing = spec.missing_requirements()
        if missing:
            return missing[0]
        no_loader = data.missing_module(data.backend_of(case.settings_dict))
        if no_loader:
            return no_loader
        return self.gpu_baseline_on_cpu() or self.reach_skip_reason(case)

    def gpu_baseline_on_cpu(self) -> str | None:
        """Why a GPU baseline's cases do not train here: ``--dlperf-device auto`` found no CUDA (a broken driver, a
        lost GPU), and a night of CPU training judged against GPU figures would be no verdict.  None where the
        baseline is not a GPU's, CUDA is here, or the user asked for the CPU (``--dlperf-device cpu``)."""
        measured = self.baseline.measured_on if self.baseline is not None else None
        if not measured or measured[0] != "cuda" or self.options.device != "auto" or self.runner.device == "cuda":
            return None
        return (f"the baseline was measured on {measured[1] or 'a GPU'} and CUDA is not available here: its cases "
                "do not train on the CPU (give --dlperf-device cpu to train them here anyway)")

    def reach_skip_reason(self, case: Case) -> str | None:
        """Why this machine cannot run ``case``'s ranks, or its batch search, or None."""
        choice, launcher = self.runner.device_choice, self.runner.launcher
        if choice.kind == "cuda" and not choice.cuda_count:
            return "CUDA not available"
        unavailable = launcher.unavailable()
        if unavailable:
            return unavailable
        reach = launcher.reach(choice.kind, choice.cuda_count)
        if choice.kind == "cuda" and self.options.share_gpus:
            reach = None  # the ranks share the visible GPUs (--dlperf-share-gpus)
        if reach is not None and case.gpus > reach:
            if choice.kind == "cuda":
                return f"needs {case.gpus} GPUs, {reach} visible"
            return f"needs {case.gpus} ranks, the {launcher.name} launcher reaches {reach}"
        if case.searches_batch:
            return self.max_batch_skip_reason()
        return None

    def max_batch_skip_reason(self) -> str | None:
        """Why a ``batch_size: "max"`` case cannot run here, or None."""
        if self.runner.device == "cpu" and self.options.max_memory is None:
            return ("batch size max on the CPU needs --dlperf-max-memory: without a cap the search would grow "
                    "into swap and the kernel's OOM killer")
        if self.options.launcher == "torchrun" and self.options.nnodes > 1:
            return "batch size max is searched by one controller: not in a torchrun job across nodes"
        return None

    def gpu_sized_warning(self, case: Case) -> str | None:
        """Why a case sized for a GPU may be slow here (:func:`pytest_dlperf.controller.device.gpu_sized_warning`),
        or None."""
        return gpu_sized_warning(case, self.options.device, self.runner.device)

    # -- the tail every kind shares

    def record_skip(self, case: Case, nodeid: str, reason: str) -> None:
        judgement = Judgement.of(Status.SKIPPED, reason)
        self.results.append(CaseResult.of(case, nodeid, judgement, verdicts.render(judgement)))

    def plan(self, case: Case, entry: baseline_mod.Entry | None) -> Plan:
        """The case's plan: its run parameters, label, folder and reference, resolved once."""
        spec = models.get_model_spec(case.model)
        reference = self.references.for_case(case, entry, spec.unit)
        params = self.runner.params_for(case, entry, reference.step_defaults)
        save = bool(self.options.save_baseline) and not self.options.data_only
        return Plan(case, spec, params, self.runner.label(case), self.runner.case_dir(case), reference, save)

    def run_case(self, case: Case, entry: baseline_mod.Entry | None, nodeid: str, properties: Properties) -> None:
        """Measure, judge and record a case through its kind; raise :class:`~pytest_dlperf.results.case.CaseFailed`
        when it failed.  ``entry``: its baseline entry, if any; ``properties``: the test's ``user_properties``,
        which JUnit XML and the terminal's status letters read.  The case's result is built once, when it is done;
        a case interrupted (Ctrl-C, SIGTERM) is recorded as an error, so the JSON and the report say what happened."""
        plan = self.plan(case, entry)
        registered = self.kind_for(case, plan.spec)
        started = time.monotonic()
        outcome: Outcome | None = None
        profiled: Profile | None = None
        try:
            outcome = self.measure_and_judge(plan, registered)
            if profile_wanted(self.options.profile, registered, plan, outcome.judgement, outcome.measurement):
                judgement, profiled = profile_case(plan, self.runner, outcome.judgement, outcome.measurement)
                outcome = dataclasses.replace(outcome, judgement=judgement)
        finally:
            if outcome is None:
                outcome = Outcome(Measurement(plan.spec.unit), Judgement.of(
                    Status.ERROR, f"{case.id}: interrupted before the case finished", Why.ERROR))
            result = CaseResult.of(case, nodeid, outcome.judgement, verdicts.render(outcome.judgement),
                                   outcome.measurement, unit=plan.spec.unit, parameters=plan.params.to_dict(),
                                   duration=time.monotonic() - started, unsaved=outcome.unsaved, profile=profiled)
            self.results.append(result)
        properties.extend(junit.properties(result))
        if result.measured:
            benchmark_json.add_case(self.config, result)
        if result.failed:
            raise CaseFailed(result.message)

    def measure_and_judge(self, plan: Plan, registered: Registered) -> Outcome:
        """The kind's two methods, then the session's policies: what :meth:`run_case` records."""
        case = plan.case
        try:
            mismatch = self.runner.threads_mismatch(case, plan.reference.entry)
            if mismatch is not None:
                raise CaseError(mismatch, None, [])
            measurement = registered.kind.measure(plan, self.runner)
            judgement = registered.kind.judge(measurement, plan.reference, self.policy)
        except RemoteRankZero as part:  # a torchrun job across nodes: rank 0's node measures, gates, reports
            ranks = ", ".join(map(str, part.ranks))
            line = f"{case.id}: rank(s) {ranks} of {case.gpus} ran on this node; the node of rank 0 reports"
            return Outcome(Measurement.of_runs(plan.spec.unit, part.runs), Judgement.of(Status.REMOTE, line))
        except CaseError as exc:
            judgement = Judgement.of(Status.ERROR, exc.message, Why.ERROR)
            label = self.runner.label(case)  # after the search: a "max" batch case's runs name the batch it chose
            if label != case.id:
                judgement = judgement.adding(Reason(f"the run of {label}"))
            return Outcome(Measurement.of_runs(plan.spec.unit, exc.runs), judgement)
        judgement = policies.settle(judgement, self.policy, plan.reference.streak,
                                    self.nights_together(plan, measurement, judgement), plan.spec.unit)
        unsaved = None
        if plan.save and measurement.evidence is not None:  # never more quiet runs than --dlperf-max-runs allows
            unsaved = unsaved_reason(measurement.evidence, min(builtin_kinds.saved_runs(self.options),
                                                               self.options.max_runs))
            if unsaved is not None:
                judgement = policies.refuse(judgement, case.id, unsaved)
        return Outcome(measurement, judgement, unsaved)

    def nights_together(self, plan: Plan, measurement: Measurement, judgement: Judgement) -> nights.Nights | None:
        """Where the never-deciding rule would fail this undecided case: its last undecided nights and tonight's
        runs judged together (:mod:`pytest_dlperf.gate.nights`); else None."""
        ref, evidence = plan.reference, measurement.evidence
        if ref.streak is None or ref.streak + 1 < self.policy.nights or not judgement.undecided or evidence is None \
                or ref.expected is None or not ref.undecided_runs:
            return None
        return nights.with_tonight(ref.undecided_runs, evidence, ref.expected.throughput, ref.own_runs,
                                   ref.expected.tolerance, ref.drift)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a case's run comes to: what was measured, how it was judged, and why a baseline being saved leaves it
    out (None: it does not)."""

    measurement: Measurement
    judgement: Judgement
    unsaved: str | None = None


#: The kind whose cases are profiled (an A/B session's paired kind and --dlperf-data-only's are others).
PROFILED_KIND = "throughput"


def profile_wanted(when: str, registered: Registered, plan: Plan, judgement: Judgement,
                   measurement: Measurement) -> bool:
    """Whether ``--dlperf-profile WHEN`` profiles this case: a measured case our worker trains (a command's trainer
    is not ours to profile, an A/B case has two environments), every one (``on``) or one that failed
    (``failing``)."""
    if when == "off" or registered.name != PROFILED_KIND or measurement.throughput is None:
        return False
    if measurer_for(plan.spec) is not worker_measure:
        return False
    return when == "on" or judgement.status is Status.FAIL


def profile_case(plan: Plan, runner: Runner, judgement: Judgement,
                 measurement: Measurement) -> tuple[Judgement, Profile | None]:
    """``--dlperf-profile``: run the case once more under torch.profiler, beside its timed runs and never counted
    (:mod:`pytest_dlperf.worker.profiling`).  Returns the judgement, with a line naming the operators that changed
    most against its baseline entry's table (saved with ``--dlperf-profile``) on a FAIL or an IMPROVED, or saying
    why there is no profile; and the profile (None where the run failed)."""
    case = plan.case
    if case.searches_batch and measurement.max_batch and measurement.max_batch.get("chosen"):
        case = case.with_batch(measurement.max_batch["chosen"])
    params = dataclasses.replace(plan.params, runs=1, profile=True, far=None)
    folder = plan.folder / "profile"
    try:
        runs = runner.runs(case, plan.spec, params, folder, label=f"{plan.label} (profile)", unit=plan.spec.unit)
    except (CaseError, RemoteRankZero):
        return judgement.adding(Reason(f"not profiled: the profiled run failed (its log: {folder})")), None
    found = runs[-1].profile if runs else None
    if not found:
        return judgement.adding(Reason(f"not profiled: the profiled run wrote no table (its log: {folder})")), None
    profile = Profile.from_dict(found)
    entry = plan.reference.entry
    if judgement.status in (Status.FAIL, Status.IMPROVED) and entry is not None and entry.profile:
        line = headline(profile, Profile.from_dict(entry.profile), slower=judgement.status is Status.FAIL)
        if line is not None:
            judgement = judgement.adding(Reason(line))
    return judgement, profile

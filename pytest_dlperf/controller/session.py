"""The session: whether a case can run here, which kind runs it, and the one tail every kind shares.

:class:`DlperfSession` is created once per pytest session by the plugin.  It holds three services: the
:class:`~.runner.Runner` (device, launcher, work folder, run parameters), the :class:`~.references.References`
(what a case is judged against) and its results, and the session's :class:`~pytest_dlperf.gate.policy.Policy`.
For each case it decides whether the case can run here (:meth:`DlperfSession.skip_reason`) and runs it
(:meth:`DlperfSession.run_case`): the case's kind measures and judges (:mod:`.kinds`); the session records the
case from its start, turns a failed run into ERROR and a remote rank's into REMOTE, settles the judgement by its
policies once, refuses an unquiet case of a baseline being saved, and records the result, the test's properties
and pytest-benchmark's files.
"""

from __future__ import annotations

import time

import pytest

from .. import baseline as baseline_mod
from .. import data, models
from ..ab import AB
from ..cases import Case
from ..gate import policy as policies
from ..gate.sequential import unsaved_reason
from ..launch.workers import CaseError, RemoteRankZero
from ..reporting import benchmark_json, junit, verdicts
from ..results.case import CaseFailed, CaseResult, Status
from ..results.judgement import Judgement, Reason, Why
from .device import gpu_sized_warning
from .kinds import Measurement, Plan, Registered, kind_of
from .kinds import builtin as builtin_kinds
from .references import References
from .runner import Runner

#: A case's properties for JUnit XML and the terminal's status letters (the test's ``user_properties``).
Properties = list[tuple[str, object]]


class DlperfSession:
    """One pytest session's cases: whether each can run here, the kind that runs it, and their results."""

    #: ``--dlperf-against``: the A/B session (:mod:`pytest_dlperf.ab`), set by the plugin; None: a session as ever.
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

    # -- what the outputs read

    @property
    def history(self):
        return self.references.history

    @property
    def history_references(self):
        return self.references.history_references

    @property
    def device_choice(self):
        return self.runner.device_choice

    @property
    def probed_device(self) -> str | None:
        return self.runner.probed_device

    @property
    def device(self) -> str:
        return self.runner.device

    @property
    def workdir(self):
        return self.runner.workdir

    @property
    def workdir_if_made(self):
        return self.runner.workdir_if_made

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
        spec = models.get_model_spec(case.model)
        if getattr(spec, "refused", None):  # a baseline's command from a file not trusted
            return spec.refused
        missing = spec.missing_requirements()
        if missing:
            return missing[0]
        registered = kind_of(case, spec)
        why = builtin_kinds.mode_skip_reason(case, registered, self.ab is not None, self.options.data_only)
        if why:
            return why
        no_loader = data.missing_module(data.backend_of(case.settings_dict))
        if no_loader:
            return no_loader
        return self.reach_skip_reason(case)

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
        if self.device == "cpu" and self.options.max_memory is None:
            return ("batch size max on the CPU needs --dlperf-max-memory: without a cap the search would grow "
                    "into swap and the kernel's OOM killer")
        if self.options.launcher == "torchrun" and self.options.nnodes > 1:
            return "batch size max is searched by one controller: not in a torchrun job across nodes"
        return None

    def gpu_sized_warning(self, case: Case) -> str | None:
        """Why a case sized for a GPU may be slow here (:func:`pytest_dlperf.controller.device.gpu_sized_warning`),
        or None."""
        return gpu_sized_warning(case, self.options.device, self.device)

    # -- the tail every kind shares

    def record_skip(self, case: Case, nodeid: str, reason: str) -> None:
        result = CaseResult(id=case.id, nodeid=nodeid, case=case)
        result.record(Judgement.of(Status.SKIPPED, reason), verdicts.render)
        self.results.append(result)

    def plan(self, case: Case, entry: baseline_mod.Entry | None) -> Plan:
        """The case's plan: its run parameters, label, folder and reference, resolved once."""
        spec = models.get_model_spec(case.model)
        reference = self.references.for_case(case, entry, spec.unit)
        params = self.runner.params_for(case, entry, reference.step_defaults)
        save = bool(self.options.save_baseline) and not self.options.data_only
        return Plan(case, spec, entry, params, self.runner.label(case), self.runner.case_dir(case), reference, save)

    def run_case(self, case: Case, entry: baseline_mod.Entry | None, nodeid: str, properties: Properties) -> None:
        """Measure, judge and record a case through its kind; raise :class:`~pytest_dlperf.results.case.CaseFailed`
        when it failed.  ``entry``: its baseline entry, if any; ``properties``: the test's ``user_properties``,
        which JUnit XML and the terminal's status letters read.  A case whose ``dlperf_cpu_threads`` is not its
        entry's count fails before it runs (:meth:`~.runner.Runner.threads_mismatch`)."""
        plan = self.plan(case, entry)
        registered = self.kind_for(case, plan.spec)
        result = CaseResult(id=case.id, nodeid=nodeid, case=case, unit=plan.spec.unit,
                            parameters=plan.params.to_dict())
        self.results.append(result)  # an interrupted case is recorded too
        started = time.monotonic()
        try:
            self.measure_and_judge(plan, registered, result, properties)
        finally:
            result.record_end(started)

    def measure_and_judge(self, plan: Plan, registered: Registered, result: CaseResult,
                          properties: Properties) -> None:
        """The kind's two methods, then the session's policies, then the record (:meth:`run_case`)."""
        case = plan.case
        try:
            mismatch = self.runner.threads_mismatch(case, plan.entry)
            if mismatch is not None:
                raise CaseError(mismatch, None, [])
            measurement = registered.kind.measure(plan, self.runner)
            judgement = registered.kind.judge(measurement, plan.reference, self.policy)
        except RemoteRankZero as part:  # a torchrun job across nodes: rank 0's node measures, gates, reports
            ranks = ", ".join(map(str, part.ranks))
            line = f"{case.id}: rank(s) {ranks} of {case.gpus} ran on this node; the node of rank 0 reports"
            self.record(result, Measurement.of_runs(plan.spec.unit, part.runs), Judgement.of(Status.REMOTE, line),
                        properties)
            return
        except CaseError as exc:
            judgement = Judgement.of(Status.ERROR, exc.message, Why.ERROR)
            label = self.runner.label(case)
            if label != case.id:  # a "max" batch case's runs name the batch its search chose
                judgement = judgement.adding(Reason(f"the run of {label}"))
            self.record(result, Measurement.of_runs(plan.spec.unit, exc.runs), judgement, properties)
            raise CaseFailed(result.message) from None
        judgement = policies.settle(judgement, self.policy, plan.reference.streak)
        if plan.save and measurement.evidence is not None:  # never more quiet runs than --dlperf-max-runs allows
            refused = unsaved_reason(measurement.evidence, min(builtin_kinds.saved_runs(self.options),
                                                               self.options.max_runs))
            if refused is not None:
                result.unsaved = refused
                judgement = policies.refuse(judgement, case.id, refused)
        self.record(result, measurement, judgement, properties)
        if result.failed:
            raise CaseFailed(result.message)

    def record(self, result: CaseResult, measurement: Measurement, judgement: Judgement,
               properties: Properties) -> None:
        """The case's figures and judgement in its result, its test's properties, and pytest-benchmark's files."""
        result.record(judgement, verdicts.render, measurement)
        properties.extend(junit.properties(result))
        if result.measured:
            benchmark_json.add_case(self.config, result)


#: The session of a pytest run with ``--dlperf-*`` options, set by the plugin at configure.
SESSION = pytest.StashKey[DlperfSession]()

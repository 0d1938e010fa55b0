"""The session: whether a case can run here, and which case kind runs it.

:class:`DlperfSession` is created once per pytest session by the plugin.  For each case it decides
whether it can run here (:meth:`DlperfSession.skip_reason`) and hands it to its kind (:data:`KINDS`,
first match): a convergence case (:mod:`.convergence`), a time-to-train command (:mod:`.command`), else
a throughput case (:mod:`.throughput`: a model our worker trains, or a command's logged steps).  Each
kind measures, judges and records a typed :class:`~pytest_dlperf.results.case.CaseResult` in the session's
results, which the outputs read at the end (:mod:`.outputs`).
"""

from __future__ import annotations

import pytest

from .. import baseline as baseline_mod
from .. import data, models
from ..ab import AB
from ..ab.kind import PairedKind
from ..cases import Case
from ..models import ModelSpec
from ..registry import Registry
from ..results.case import CaseResult, Status
from .command import TimeToTrainKind
from .context import CaseKind, Context, Properties
from .convergence import ConvergenceKind
from .device import gpu_sized_warning
from .throughput import ThroughputKind

#: The case kinds, in the order they are asked whether a case is theirs: the last takes every case.
KINDS: Registry[CaseKind] = Registry("case kind")
for _kind in (ConvergenceKind(), TimeToTrainKind(), ThroughputKind()):
    KINDS.add(_kind.name, _kind)


def kind_of(case: Case, spec: ModelSpec) -> CaseKind:
    """The kind that runs ``case``: the first of :data:`KINDS` it applies to."""
    return next(kind for kind in KINDS.values() if kind.applies(case, spec))


class DlperfSession(Context):
    """One pytest session's cases: whether each can run here, and the kind that runs it."""

    #: ``--dlperf-against``: the A/B session (:mod:`pytest_dlperf.ab`), set by the plugin; None: a session as ever.
    ab: AB | None = None

    def skip_reason(self, case: Case) -> str | None:
        spec = models.get_model_spec(case.model)
        if getattr(spec, "refused", None):  # a baseline's command from a file not trusted
            return spec.refused
        missing = spec.missing_requirements()
        if missing:
            return missing[0]
        if self.ab is not None:
            unpaired = ab_skip_reason(case, kind_of(case, spec), self.options.data_only)
            if unpaired:
                return unpaired
        backend = data.backend_of(case.settings_dict)
        if self.options.data_only and not isinstance(kind_of(case, spec), ThroughputKind):
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
        if choice.kind == "cuda" and self.options.share_gpus:
            reach = None  # the ranks share the visible GPUs (--dlperf-share-gpus)
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

    def gpu_sized_warning(self, case: Case) -> str | None:
        """Why a case sized for a GPU may be slow here (:func:`pytest_dlperf.controller.device.gpu_sized_warning`),
        or None."""
        return gpu_sized_warning(case, self.options.device, self.device)

    def record_skip(self, case: Case, nodeid: str, reason: str) -> None:
        self.results.append(CaseResult(id=case.id, nodeid=nodeid, case=case, verdict=Status.SKIPPED, message=reason))

    def run_case(self, case: Case, entry: baseline_mod.Entry | None, nodeid: str, properties: Properties) -> None:
        """Measure, judge and record a case through its kind; raise :class:`~pytest_dlperf.results.case.CaseFailed`
        when it failed.  ``entry``: its baseline entry, if any; ``properties``: the test's ``user_properties``,
        which JUnit XML and the terminal's status letters read.  A case whose ``--dlperf-cpu-threads`` is not its
        entry's count fails before it runs (:meth:`~.context.Context.threads_mismatch`)."""
        spec = models.get_model_spec(case.model)
        mismatch = self.threads_mismatch(case, entry)
        if mismatch is not None:
            raise self.start(case, nodeid, spec.unit, self.params_for(case, entry)).record_error(mismatch, [],
                                                                                                 properties)
        kind = PairedKind(self.ab) if self.ab is not None else kind_of(case, spec)
        kind.run(self, case, entry, nodeid, properties)


def ab_skip_reason(case: Case, kind: CaseKind, data_only: bool) -> str | None:
    """Why an A/B session (``--dlperf-against``) does not run ``case``, or None: it compares the throughput of
    cases of a fixed batch."""
    if not isinstance(kind, ThroughputKind):
        return f"--dlperf-against compares throughput; this is a {kind.name} case"
    if case.searches_batch:
        return "--dlperf-against compares a fixed batch: batch size max is not searched in an A/B session"
    if data_only:
        return "--dlperf-against compares training throughput, not --dlperf-data-only"
    return None


#: The session of a pytest run with ``--dlperf-*`` options, set by the plugin at configure.
SESSION = pytest.StashKey[DlperfSession]()

"""Collection: the cases of a session, checked, as pytest items under one ``dlperf`` collector.

Cases come from the baseline's entries and from the matrix options (``--dlperf-model`` x
``--dlperf-precision`` x ``--dlperf-batch-size`` x ``--dlperf-gpus``); :func:`build_cases`
checks each against its model (settings, unit, data backend) before any case runs.  Each
becomes a :class:`DlperfItem` with the markers ``dlperf``, ``gpu<N>``, its precision and its
model, so its node id reads ``dlperf::<case id>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .. import baseline as baseline_mod
from .. import commands, convergence, data, models
from ..cases import Case, check_settings, matrix
from ..commands import trust
from ..commands.train_time import judged_by_time
from ..results.case import CaseFailed
from .pipeline import Pipeline

if TYPE_CHECKING:
    from ..options import Options

CaseEntry = tuple[Case, "baseline_mod.Entry | None"]


def build_cases(options: Options, baseline: baseline_mod.Baseline | None) -> list[CaseEntry]:
    """The baseline's cases, then the matrix cases it has no entry for; raises ``pytest.UsageError``."""
    out: list[CaseEntry] = []
    if baseline is not None:
        givers = baseline.command_givers()
        refused = trust.command_refusals(givers, options.trust) if givers else {}
        try:
            commands.register_entries(((e, e.command, _where(baseline, e, "command", "")) for e in baseline.entries
                                       if e.command is not None), refused)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        out.extend((entry.case, entry) for entry in baseline.entries)
    try:
        extra = matrix(options.models, options.precisions, options.batch_sizes, options.gpus,
                       lambda name: models.get_model_spec(name).batch_size, options.settings)
    except models.UnknownModelError as exc:
        raise pytest.UsageError(f"--dlperf-model: {exc}") from None
    known = {case for case, _ in out}
    out.extend((case, None) for case in map(baseline_mod.plain_case, extra) if case not in known)
    for case, entry in out:
        _check_case(case, entry, baseline)
    check_data([(case, entry) for case, entry in out if not case.converges], baseline, options.data_dir)
    try:
        convergence.check_cases(out, baseline, options.convergence_data)
    except (ValueError, data.DataError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return out


def _where(baseline: baseline_mod.Baseline | None, entry: baseline_mod.Entry | None, field: str,
           option: str) -> str:
    """Where a case came from, for its usage errors: ``FILE: $.cases[3].FIELD`` or the option."""
    if entry is not None and baseline is not None:
        return f"{entry.file or baseline.path}: $.cases[{entry.index}].{field}"
    return option


def _check_case(case: Case, entry: baseline_mod.Entry | None, baseline: baseline_mod.Baseline | None) -> None:
    try:
        spec = models.get_model_spec(case.model)
    except models.UnknownModelError as exc:
        raise pytest.UsageError(f"{_where(baseline, entry, 'model', '--dlperf-model')}: {exc}") from None
    try:
        check_settings(case.settings_dict, spec.defaults, _where(baseline, entry, "settings", "--dlperf-set"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    problem = commands.case_problem(case, spec)
    if problem:
        raise pytest.UsageError(f"{_where(baseline, entry, 'model', '--dlperf-model')}: {case.id}: {problem}")
    figure = _figure_problem(case, entry, spec)
    if figure:
        raise pytest.UsageError(f"{_where(baseline, entry, figure[0], '')}: {case.id}: {figure[1]}")
    too_big = _too_big(case, spec)
    if too_big:
        raise pytest.UsageError(f"{_where(baseline, entry, 'settings', '--dlperf-set')}: {case.id}: {too_big}")
    if entry is not None and entry.unit and entry.unit != spec.unit:
        raise pytest.UsageError(f"{_where(baseline, entry, 'unit', '')}: {entry.unit!r} does not match "
                                f"model {case.model!r}, which reports {spec.unit!r}")


def _figure_problem(case: Case, entry: baseline_mod.Entry | None, spec: models.ModelSpec) -> tuple[str, str] | None:
    """(field, why) where an entry's figure is not its case's: a throughput for a time-to-train command, a
    time to target without a target for anything else."""
    if entry is None or case.converges:
        return None
    timed = judged_by_time(case, spec)
    if timed and entry.throughput is not None:
        return "throughput", (f"{case.model!r} is a time-to-train command (figure 'time_to_train'): its entries give "
                              "time_to_target (seconds, run_start to run_stop), not a throughput")
    if not timed and (entry.time_to_target is not None or entry.seeds is not None):
        field = "time_to_target" if entry.time_to_target is not None else "seeds"
        return field, (f"{field} without a target is a time-to-train command's; {case.model!r} is not one (a "
                       "command registered with figure 'time_to_train'); a built-in convergence case needs a target "
                       "and a budget")
    return None


def check_data(cases: list[CaseEntry], baseline: baseline_mod.Baseline | None, data_dir: str | None) -> None:
    """Usage errors for the ``data`` setting: an image-classification model, a data dir in the
    ImageFolder layout (:func:`pytest_dlperf.data.check_case`)."""
    for case, entry in cases:
        settings = case.settings_dict
        backend = data.backend_of(settings)
        where = _where(baseline, entry, "settings.data", f"--dlperf-set data={backend}")
        spec = models.get_model_spec(case.model)
        try:
            data.check_case(case.id, backend, spec, spec.settings(settings), data_dir, where)
        except data.DataError as exc:
            raise pytest.UsageError(str(exc)) from None


def markers_of(case: Case) -> list[str]:
    """The case's markers (:attr:`Case.markers`); a time-to-train command case's add ``convergence``."""
    spec = models.get_model_spec(case.model)
    timed = not case.converges and judged_by_time(case, spec)
    return [*case.markers, "convergence"] if timed else case.markers


def collect_into(session: pytest.Session, config: pytest.Config, items: list, cases: list[CaseEntry],
                 pipeline: Pipeline) -> None:
    """Add the cases to ``items`` through pytest's collect protocol, fewer ranks first; ``pipeline`` runs them."""
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    for name in sorted({name for case, _ in cases for name in markers_of(case)} - known):
        config.addinivalue_line("markers", f"{name}: a pytest-dlperf marker")
    # Collect through the regular protocol, so the terminal counts the cases as
    # collected and other plugins see a collect report for them.
    collector = DlperfCollector.from_parent(session, name="dlperf", nodeid="dlperf", cases=cases,
                                            pipeline=pipeline)
    rep = collector.ihook.pytest_make_collect_report(collector=collector)
    collector.ihook.pytest_collectreport(report=rep)
    if rep.failed:
        raise pytest.UsageError(f"dlperf: cannot collect the cases: {rep.longreprtext}")
    # Fewer ranks first: an N-rank case's speedup is measured against this session's 1-rank case.
    items.extend(sorted(rep.result, key=lambda item: item.case.gpus))


class DlperfCollector(pytest.Collector):
    """The parent of all cases, so that their node ids read ``dlperf::<case id>``."""

    def __init__(self, *, cases: list[CaseEntry], pipeline: Pipeline, **kwargs):
        super().__init__(**kwargs)
        self.cases = cases
        self.pipeline = pipeline

    def collect(self):
        return [DlperfItem.from_parent(self, name=case.id, case=case, entry=entry, pipeline=self.pipeline)
                for case, entry in self.cases]


class DlperfItem(pytest.Item):
    """One case as a test: its setup skips it where it cannot run, its run measures and judges it."""

    def __init__(self, *, case: Case, entry: baseline_mod.Entry | None, pipeline: Pipeline, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        self.entry = entry
        self.pipeline = pipeline
        for name in markers_of(case):
            self.add_marker(getattr(pytest.mark, name))

    def setup(self) -> None:
        reason = self.pipeline.skip_reason(self.case)
        if reason:
            self.pipeline.record_skip(self.case, self.nodeid, reason)
            # Reported at the case, not at this line of the plugin.  pytest has no public way to
            # skip from Item.setup at the item's location: a skip marker would have to be added
            # at collection, which would probe the device (import torch) for `pytest --co` too.
            raise pytest.skip.Exception(reason, _use_item_location=True)

    def runtest(self) -> None:
        self.pipeline.run_case(self.case, self.entry, self.nodeid, self.user_properties)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        # A case has no source line: skip reports (-rs) name it by its node id.
        return self.config.rootpath / self.nodeid, 0, f"dlperf {self.case.id}"


def input_bytes(spec: models.ModelSpec, settings: dict[str, Any], batch_size: int) -> int | None:
    """The bytes of one batch of the case's input: a built-in ``make_batch``'s by arithmetic
    (:func:`pytest_dlperf.models.batch_bytes`: no torch in the controller), any other's made on the meta
    device (nothing allocated); None when its settings or ``make_batch`` cannot tell."""
    try:
        counted = models.batch_bytes(spec.make_batch, batch_size, settings)
    except Exception:  # noqa: BLE001 - settings the model rejects: the worker says why, not this estimate
        return None
    if counted is not None:
        return counted
    import torch

    try:
        batch = spec.make_batch(batch_size, settings, torch.device("meta"))
    except Exception:  # noqa: BLE001 - a custom make_batch that needs real memory: not estimated
        return None
    tensors = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, list | tuple) else [batch]
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _too_big(case: Case, spec: models.ModelSpec) -> str | None:
    """Why one batch of the case's input cannot fit this machine (its memory, or its largest GPU's)."""
    if not isinstance(case.batch_size, int):
        return None
    size = input_bytes(spec, spec.settings(case.settings_dict), case.batch_size)
    if size is None:
        return None
    import psutil

    from ..environment import gpu_info

    room = max([psutil.virtual_memory().total] + [d.get("memory_bytes") or 0 for d in gpu_info().get("devices", [])])
    if size <= room:
        return None
    return (f"one batch of input is {size / 2**30:,.0f} GiB, more than this machine's memory or any of its GPUs' "
            f"({room / 2**30:,.0f} GiB): check the settings and the batch size")

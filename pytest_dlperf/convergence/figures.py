"""A convergence run's figures, and their median over the case's runs (each with its own seed)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..gate.stats import summarize


@dataclasses.dataclass(frozen=True)
class RunFigures:
    """What one run (one seed) reached: the worker result's ``convergence`` (``docs/worker-result.md``)."""

    seed: int
    metric: str
    target: float | None  # None: the script's own (a time-to-train command case, pytest_dlperf.commands.train_time)
    reached: bool
    stopped: str  # target, epochs, seconds or diverged; a command's: success, or why it did not succeed
    seconds_to_target: float | None
    epochs_to_target: float | None
    samples_to_target: int | None
    final: float | None  # the metric at the last evaluation
    seconds: float  # the whole run: training and evaluations
    samples: int | None  # None: not known (a command's log that does not say)
    epochs: float | None
    throughput: float | None  # samples / seconds over the whole run
    curve: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunFigures:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["curve"] = tuple(data.get("curve") or ())
        values.setdefault("seed", 0)
        return cls(**values)


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known and len(known) == len(values) else None


def pooled(runs: Sequence[RunFigures]) -> dict[str, Any]:
    """The case's figures over its runs: medians where every run has the figure, each run's own, the
    spread of the times to target (:func:`pytest_dlperf.gate.stats.summarize`, as the throughput's windows)."""
    first = runs[0]
    times = [r.seconds_to_target for r in runs]
    reached = [t for t in times if t is not None]
    return {
        "metric": first.metric, "target": first.target, "runs": len(runs),
        "reached": sum(r.reached for r in runs),
        "seconds_to_target": _median(times),
        "epochs_to_target": _median([r.epochs_to_target for r in runs]),
        "samples_to_target": _median([r.samples_to_target for r in runs]),
        "final": _median([r.final for r in runs]),
        "throughput": _median([r.throughput for r in runs]),
        "stats": summarize(reached).to_dict() if reached else None,
        "per_run": [{**dataclasses.asdict(r), "curve": [dict(p) for p in r.curve]} for r in runs],
    }

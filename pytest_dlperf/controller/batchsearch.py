"""``batch_size: "max"``: the largest per-device batch that trains without running out of memory.

The seeds report such cases as ``BS=max_144``.  The controller searches once per config
(model, precision, settings, device and memory cap; not the GPU count, so the 1-GPU and
N-GPU cases of a config train the same per-device batch) and then measures the case at
the batch it found.

**A trial** (:func:`search`'s ``trial(batch)``) is one short fresh worker run on one
device: a warm-up step and one window of two steps (:data:`TRIAL_STEPS`), enough for the
optimizer's state and the allocator to reach their peak.  It answers :data:`OK` or
:data:`OOM`; any other failure is :data:`ERROR`, with its message, and ends the search:
the case fails with that message.  A trial that runs out of memory is no failure.

**The search** starts at the model's default batch (``ModelSpec.batch_size``):

1. it doubles while trials fit, up to the first batch that runs out of memory; if the
   default already runs out of memory it halves until one fits (batch 1 out of memory
   ends the search with an error);
2. then it bisects between the largest batch that fit and the smallest that did not,
   until they are at most ``max(1, fit // 16)`` apart (:func:`resolution`): the chosen
   batch is then within 1/16 (6%) of the largest that fits, where a training's
   throughput hardly changes any more, at about four trials;
3. a bisection point is rounded down to a multiple of 8 when that keeps it strictly
   inside the interval: batches that are multiples of 8 suit tensor cores and read as
   the batches people publish (144, not 147).

It never tries more than ``max_trials`` batches (:data:`MAX_TRIALS`) nor a batch above
``max_batch`` (:data:`MAX_BATCH`); at either limit it keeps the largest batch that fit
and says why it stopped.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from ..cases import MAX_BATCH_TRIALS
from ..launch.launchers import get_launcher
from ..launch.workers import CaseError, FailureKind, measure
from ..protocol import ValueEnum


class Outcome(ValueEnum):
    """What a trial answers: it trained, it ran out of memory, or it failed otherwise."""

    OK = "ok"
    OOM = "oom"
    ERROR = "error"


OK, OOM, ERROR = Outcome.OK, Outcome.OOM, Outcome.ERROR
MAX_TRIALS = MAX_BATCH_TRIALS
MAX_BATCH = 65536
# Steps of one trial: warm-up, then one window (worker.windows.time_windows's warmup_steps, steps, repeats).
TRIAL_STEPS = {"warmup_steps": 1, "steps": 2, "repeats": 1}

# Why a search stopped.
RESOLVED = "resolution reached"
TRIAL_LIMIT = "trial limit reached"
BATCH_LIMIT = "batch limit reached"
FAILED = "a trial failed"


@dataclasses.dataclass(frozen=True)
class Trial:
    """One batch tried: its outcome (ok, oom or error), seconds and, for an error, the message."""

    batch_size: int
    outcome: Outcome
    seconds: float
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"batch_size": self.batch_size, "outcome": Outcome(self.outcome).value, "seconds": round(self.seconds, 3)}
        if self.message is not None:
            out["message"] = self.message
        return out


@dataclasses.dataclass
class SearchResult:
    """The search's outcome: ``chosen`` is None when it failed (``error`` says why)."""

    start: int
    chosen: int | None
    trials: list[Trial]
    stopped: str
    error: str | None = None

    @property
    def smallest_oom(self) -> int | None:
        """The smallest batch that ran out of memory (None: none did)."""
        sizes = [t.batch_size for t in self.trials if t.outcome == OOM]
        return min(sizes) if sizes else None

    def to_dict(self) -> dict[str, Any]:
        return {"requested": "max", "chosen": self.chosen, "start": self.start, "stopped": self.stopped,
                "smallest_oom": self.smallest_oom, "trials": [t.to_dict() for t in self.trials],
                "error": self.error}


def resolution(fits: int) -> int:
    """How far apart the largest batch that fit and the smallest that did not may end: 1/16 of it."""
    return max(1, fits // 16)


def midpoint(fits: int, oom: int) -> int:
    """The next batch between ``fits`` and ``oom``: their middle, down to a multiple of 8 when that stays inside."""
    middle = (fits + oom) // 2
    rounded = middle - middle % 8
    return rounded if fits < rounded < oom else middle


class _Stop(Exception):
    """A trial that failed, or a limit: ends the search."""

    def __init__(self, reason: str, error: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.error = error


class _Trials:
    """Runs and records trials, within the trial limit."""

    def __init__(self, trial: Callable[[int], tuple[Outcome, str | None]], max_trials: int,
                 clock: Callable[[], float]):
        self.trial = trial
        self.max_trials = max_trials
        self.clock = clock
        self.done: list[Trial] = []

    def fits(self, batch: int) -> bool:
        """Try ``batch``: True when it trained, False when it ran out of memory."""
        if len(self.done) >= self.max_trials:
            raise _Stop(TRIAL_LIMIT)
        started = self.clock()
        outcome, message = self.trial(batch)
        self.done.append(Trial(batch, outcome, self.clock() - started, message if outcome != OK else None))
        if outcome == ERROR:
            raise _Stop(FAILED, f"the trial at batch size {batch} failed: {message}")
        return outcome == OK


def _bracket(trials: _Trials, start: int, max_batch: int) -> tuple[int, int | None]:
    """Double from ``start`` while it fits (halve while it does not): (largest fit, smallest oom or None)."""
    batch = min(start, max_batch)
    if trials.fits(batch):
        while batch < max_batch:
            bigger = min(2 * batch, max_batch)
            if not trials.fits(bigger):
                return batch, bigger
            batch = bigger
        return batch, None
    while batch > 1:
        smaller = batch // 2
        if trials.fits(smaller):
            return smaller, batch
        batch = smaller
    raise _Stop(FAILED, f"out of memory even at batch size 1: {trials.done[-1].message}")


def search(trial: Callable[[int], tuple[Outcome, str | None]], start: int, *, max_batch: int = MAX_BATCH,
           max_trials: int = MAX_TRIALS, clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """The largest batch for which ``trial(batch)`` answers ``(OK, None)``, as the module describes.

    ``trial`` answers ``(OK, None)``, ``(OOM, message)`` or ``(ERROR, message)``.
    """
    trials = _Trials(trial, max_trials, clock)
    try:
        fits, oom = _bracket(trials, max(1, start), max_batch)
        if oom is None:
            raise _Stop(BATCH_LIMIT)
        while oom - fits > resolution(fits):
            middle = midpoint(fits, oom)
            if trials.fits(middle):
                fits = middle
            else:
                oom = middle
        stopped, error = RESOLVED, None
    except _Stop as stop:
        stopped, error = stop.reason, stop.error
    # The largest batch that fit: the lower end of the bisection, or where a limit stopped it.
    fits = max((t.batch_size for t in trials.done if t.outcome == OK), default=None)
    if error is None and fits is None:
        error = f"no batch fit within {max_trials} trials"
    return SearchResult(start, None if error else fits, trials.done, stopped, error)


def config_key(case, device: str, max_memory: int | None) -> tuple:
    """What a search result is cached by: the case without its GPU count, the device and the cap."""
    return case.model, case.precision, case.settings, device, max_memory


class Searches:
    """A session's ``batch_size: "max"`` searches, run once per config and reused by its cases.

    Each trial is one run of :func:`pytest_dlperf.launch.workers.measure` with a local launcher.
    """

    def __init__(self, *, max_memory: int | None, max_trials: int):
        self.max_memory = max_memory
        self.max_trials = max_trials
        self._results: dict[tuple, SearchResult] = {}

    def key(self, case, device: str) -> tuple:
        return config_key(case, device, self.max_memory)

    def resolve(self, case, spec, params, folder) -> tuple[Any, dict[str, Any]]:
        """``case`` at the largest batch that fits, and the search's record (``max_batch`` in the results).

        Raises the measure function's error (a :class:`~pytest_dlperf.launch.workers.CaseError`) with
        kind ``"max-batch"`` when the search failed: a trial that crashed, or batch 1 out of memory.
        """
        key = self.key(case, params.device)
        cached = key in self._results
        if not cached:
            self._results[key] = self._search(case, spec, params, folder)
        result = self._results[key]
        record = dict(result.to_dict(), memory_cap=self.max_memory, cached=cached)
        if result.chosen is None:
            raise CaseError(f"{case.id}: batch size max: {result.error}", FailureKind.MAX_BATCH, [])
        return case.with_batch(result.chosen), record

    def _search(self, case, spec, params, folder) -> SearchResult:
        """Short fresh workers on one device.  Only the trials run under ``--dlperf-max-memory``:
        the case is then measured at the chosen batch without the cap (its allocator settings
        would slow every step)."""
        trial_params = dataclasses.replace(params, runs=1, launcher="local", max_memory=self.max_memory,
                                           **TRIAL_STEPS)

        def trial(batch: int) -> tuple[Outcome, str | None]:
            one = case.with_gpus(1).with_batch(batch)
            try:
                measure(one, spec, trial_params, folder / f"bs{batch}", get_launcher("local"))
            except CaseError as exc:
                return (OOM if exc.kind is FailureKind.OOM else ERROR), exc.message
            return OK, None

        return search(trial, spec.batch_size, max_trials=self.max_trials)

    def at_chosen_batch(self, case, device: str):
        """A ``"max"`` case at the batch its config's search chose (other cases as they are)."""
        result = self._results.get(self.key(case, device)) if case.searches_batch else None
        return case.with_batch(result.chosen) if result is not None and result.chosen else case

    def label(self, case, device: str) -> str:
        """The case's id for messages, with a ``"max"`` batch as the seeds write it: ``... (bs=max_144)``."""
        chosen = self.at_chosen_batch(case, device)
        return f"{case.id} (bs=max_{chosen.batch_size})" if chosen is not case else case.id

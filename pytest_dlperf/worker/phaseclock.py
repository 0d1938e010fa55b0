"""Timing the phases of a training step inside the measured windows (the figures: :mod:`.phases`).

A step records a *mark* at its start and after each of its phases (data, forward, backward, optimizer: 5 a step,
:meth:`.training.TrainingStep.__call__`); on several ranks DDP's communication hook records one more when the last
gradient bucket is ready, just before its all-reduce starts (:func:`time_comm`).  A mark is a ``time.perf_counter()``
on the CPU (:class:`HostClock`) and a CUDA event recorded on the step's stream on a GPU (:class:`CudaClock`): the
events come from a pool made (and recorded once) before the first window, are recorded without any
synchronization, and are read after the window's own one.  A phase is the time between two marks, summed over the
window's steps and divided by them; the gaps between steps (the loop) are no phase's.

On a GPU the marks time the device's stream: a phase is the time the stream took from the mark before to the mark
after it, so where the host falls behind (a host-bound step), the time the device waits for work counts in the
phase whose work it waits for.

**Exposed communication** (``comm``).  DDP all-reduces each gradient bucket as soon as backward has computed it, so
most of the communication runs under the rest of the backward's computation.  The hook's mark is taken when the
last bucket (``GradBucket.is_last()``: the first layers' gradients) is ready: backward's computation is over and only
its wait for the all-reduces remains, which DDP's end of backward makes (a blocking wait on the CPU's gloo, a
stream wait on NCCL).  ``backward`` is the time up to that mark and ``comm`` from it to the end of
``loss.backward()``: the all-reduce time the computation did not hide, with DDP's last bookkeeping (no gradient
copy: the gradients are views into the buckets).  A bucket's all-reduce that ends during the computation costs
nothing here, even if it slowed the computation it ran beside (shared memory bandwidth, a GPU's SMs): that
contention is in ``backward``.  The hook is DDP's own all-reduce hook (``allreduce_hook``: divide, all-reduce,
the same arithmetic as DDP's built-in one) with the mark before it.

Cost: every mark is a few host operations (a perf_counter and an append; an event record), timed before the windows
(:meth:`Clock.prepare`); where a step's marks would cost more than :data:`.phases.COST_LIMIT` of a step of the
warm-up (or of the first window, without a warm-up), the clock is off for the run and the result says so
(:class:`.phases.PhaseTiming`).
"""

from __future__ import annotations

import math
import time
from typing import Any

from .phases import COST_LIMIT, PhaseTiming, Phases

#: A step's own marks: its start and the end of data, forward, backward and optimizer.
MARKS = 5
#: Marks timed, in rounds, to find one's cost.
COST_MARKS, COST_ROUNDS = 200, 5


class Clock:
    """A step's marks in one window (:meth:`open`, :meth:`mark`, :meth:`ready`, then :meth:`close`), and whether
    they are worth their cost (:meth:`prepare`)."""

    timer = ""

    def __init__(self) -> None:
        self.on = False  # inside a window
        self.comm = False  # DDP's hook marks when the last all-reduce starts
        self.off: str | None = None
        self.mark_seconds: float | None = None
        self.cost: float | None = None

    @property
    def marks_per_step(self) -> int:
        return MARKS + self.comm

    def prepare(self, steps: int, step_seconds: float | None) -> None:
        """Before the first window: make what a window's ``steps`` steps record, time a mark and, where a step's
        seconds are known (the warm-up's), decide whether the phases are worth their cost."""
        self._pool(steps)
        best = math.inf
        for _ in range(COST_ROUNDS):
            self._reset()
            count = min(COST_MARKS, self._capacity(steps))
            start = time.perf_counter()
            for _ in range(count):
                self.mark()
            best = min(best, (time.perf_counter() - start) / count)
        self._reset()
        self._settle()
        self.mark_seconds = best
        if step_seconds:
            self.decide(step_seconds)

    def decide(self, step_seconds: float) -> None:
        """Off for the run where a step's marks cost more than :data:`COST_LIMIT` of ``step_seconds``."""
        self.cost = self.marks_per_step * (self.mark_seconds or 0.0) / step_seconds
        if self.cost > COST_LIMIT:
            self.off = (f"timing phases would cost {self.cost:.1%} of a step ({self.marks_per_step} marks of "
                        f"{self.mark_seconds * 1e6:.1f} us in a step of {step_seconds * 1e3:.3g} ms), over "
                        f"{COST_LIMIT:.0%}")

    def open(self) -> None:
        """A window starts: its marks are recorded from here."""
        self._reset()
        self.on = True

    def mark(self) -> None:
        raise NotImplementedError

    def ready(self) -> None:
        """The last gradient bucket is ready, its all-reduce about to start (DDP's hook, :func:`time_comm`)."""
        raise NotImplementedError

    def close(self, steps: int, seconds: float) -> dict[str, float] | None:
        """After the window's synchronization: its phases in seconds per step (:meth:`.phases.Phases.to_dict`),
        or None where it was not timed (off, a step that did not mark; a clock that could not be read costs the
        run its phases, with the reason in :attr:`off`)."""
        if not self.on:
            return None
        self.on = False
        try:
            phases = self._phases(steps, seconds)
        except Exception as exc:  # noqa: BLE001 - a clock that cannot be read costs the phases, not the run
            self.off = f"phases not read: {type(exc).__name__}: {str(exc).strip()[:300]}"
            return None
        if self.cost is None:  # no warm-up: the first window's steps say what the marks cost
            self.decide(seconds / steps)
        return None if phases is None or self.off else phases.to_dict()

    def tally(self, steps: int, seconds: float) -> Phases | None:
        """Outside the windows (the warm-up's steps, :class:`Tally`): the phases of the ``steps`` steps marked since
        :meth:`open`, read after a synchronization; None where they cannot be read.  Unlike :meth:`close`, it never
        decides what the marks cost (that is the windows' question)."""
        self.on = False
        try:
            return self._phases(steps, seconds)
        except Exception:  # noqa: BLE001 - a clock that cannot be read costs the progress its phases, not the run
            return None

    def _phases(self, steps: int, seconds: float) -> Phases | None:
        marks, readies = self._recorded()
        if len(marks) != MARKS * steps:
            return None
        span = self._span
        data = forward = backward = optimizer = waited = 0.0
        timed = self.comm and len(readies) == steps
        for i in range(steps):
            begin, fetched, forwarded, backwarded, stepped = marks[MARKS * i:MARKS * (i + 1)]
            data += span(begin, fetched)
            forward += span(fetched, forwarded)
            backward += span(forwarded, backwarded)
            optimizer += span(backwarded, stepped)
            if timed:
                wait = span(readies[i], backwarded)
                timed = 0.0 <= wait <= span(forwarded, backwarded)
                waited += wait
        comm = waited if timed else None
        return Phases.within(seconds / steps, data=data / steps, forward=forward / steps,
                             backward=(backward - (comm or 0.0)) / steps, optimizer=optimizer / steps,
                             comm=None if comm is None else comm / steps)

    def timing(self) -> PhaseTiming:
        """The result's ``phase_timing``."""
        return PhaseTiming(self.timer, self.marks_per_step, self.mark_seconds or 0.0, self.cost, self.off)

    # what a kind of clock records, and how it reads two marks
    def _pool(self, steps: int) -> None:
        pass

    def _capacity(self, steps: int) -> int:
        return COST_MARKS

    def _settle(self) -> None:
        pass

    def _reset(self) -> None:
        raise NotImplementedError

    def _recorded(self) -> tuple[list[Any], list[Any]]:
        raise NotImplementedError

    def _span(self, first: Any, second: Any) -> float:
        raise NotImplementedError


class HostClock(Clock):
    """Marks from the host's ``time.perf_counter()``: the CPU's clock."""

    timer = "perf_counter"

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[float] = []
        self.readies: list[float] = []

    def mark(self) -> None:
        self.stamps.append(time.perf_counter())

    def ready(self) -> None:
        if self.on:
            self.readies.append(time.perf_counter())

    def _reset(self) -> None:
        self.stamps.clear()
        self.readies.clear()

    def _recorded(self) -> tuple[list[float], list[float]]:
        return self.stamps, self.readies

    def _span(self, first: float, second: float) -> float:
        return second - first


class CudaClock(Clock):
    """Marks from CUDA events on the step's stream (the device's current stream when the clock is made), from a
    pool made before the first window: a mark records the pool's next event, and nothing waits for it."""

    timer = "cuda-events"

    def __init__(self, device) -> None:
        import torch

        super().__init__()
        self.device = device
        self.stream = torch.cuda.current_stream(device)
        self.events: list[Any] = []
        self.ready_events: list[Any] = []
        self.next = self.next_ready = 0

    def mark(self) -> None:
        self.events[self.next].record(self.stream)
        self.next += 1

    def ready(self) -> None:
        import torch

        if self.on and self.next_ready < len(self.ready_events):
            self.ready_events[self.next_ready].record(torch.cuda.current_stream(self.device))
            self.next_ready += 1

    def _pool(self, steps: int) -> None:
        """Events for a window's marks, each recorded once here (a CUDA event is made at its first record)."""
        import torch

        def made(count: int) -> list[Any]:
            return [torch.cuda.Event(enable_timing=True) for _ in range(count)]

        self.events += made(MARKS * steps - len(self.events))
        self.ready_events += made(steps - len(self.ready_events))
        for event in (*self.events, *self.ready_events):
            event.record(self.stream)

    def _capacity(self, steps: int) -> int:
        return min(COST_MARKS, len(self.events))

    def _settle(self) -> None:
        self.stream.synchronize()

    def _reset(self) -> None:
        self.next = self.next_ready = 0

    def _recorded(self) -> tuple[list[Any], list[Any]]:
        return self.events[:self.next], self.ready_events[:self.next_ready]

    def _span(self, first: Any, second: Any) -> float:
        return first.elapsed_time(second) / 1e3


class Tally:
    """The phases of a run's steps so far, for its progress file: the warm-up's steps after its first, marked in
    chunks of :data:`CHUNK_STEPS` read at a synchronization of their own, then each window's phases as it closes;
    pooled into one window-like record (:meth:`record`: steps, seconds, seconds per step of each phase).  A run the
    controller cuts short far off its baseline writes no windows: this record is what it says of where its time went
    (:mod:`pytest_dlperf.gate.far`).  Nothing here runs inside a window; a step without a clock tallies nothing."""

    def __init__(self, step, marked: bool = True) -> None:
        self.step = step
        self.clock: Clock | None = getattr(step, "clock", None) if marked else None
        self.steps = self.marked = self.chunk = 0
        self.seconds = 0.0
        self.sums: dict[str, float] = {}
        self.start = 0.0

    def begin(self, steps: int) -> None:
        """After the warm-up's first step and its synchronization: the next ``steps`` steps are marked, read in
        chunks of at most :data:`CHUNK_STEPS` (a CUDA clock's events for one chunk made now)."""
        self.chunk = min(CHUNK_STEPS, steps)
        if self.clock is not None and self.chunk > 0:
            self.clock._pool(self.chunk)
            self._open()

    def __call__(self) -> None:
        """One warm-up step, marked where there is a clock (read once :data:`CHUNK_STEPS` are)."""
        if self.clock is None or not self.clock.on:
            self.step()
            return
        self.step(self.clock.mark)
        self.marked += 1
        if self.marked >= self.chunk:
            self.read()

    def read(self) -> None:
        """Synchronize and add the steps marked since the last read (then mark on)."""
        if self.clock is None or not self.clock.on:
            return
        if self.marked:
            self.step.sync()
            seconds = time.perf_counter() - self.start
            phases = self.clock.tally(self.marked, seconds)
            if phases is not None:
                self._add(self.marked, seconds, phases)
        self._open()

    def end(self) -> None:
        """The warm-up is over: add what was marked since the last read, and mark no more."""
        self.read()
        if self.clock is not None:
            self.clock.on = False
            self.clock._reset()

    def window(self, window: dict[str, Any]) -> None:
        """Add a window (as :func:`~pytest_dlperf.worker.windows.time_windows` made it) that has phases."""
        phases = Phases.from_window(window)
        if phases is not None:
            self._add(window["steps"], window["seconds"], phases)

    def record(self) -> dict[str, Any] | None:
        """The steps tallied so far as one window (``steps``, ``seconds``, ``phases``: seconds per step of each
        phase), None before any."""
        if not self.steps:
            return None
        return {"steps": self.steps, "seconds": self.seconds,
                "phases": {name: total / self.steps for name, total in self.sums.items()}}

    def _open(self) -> None:
        self.marked = 0
        self.clock.open()
        self.start = time.perf_counter()

    def _add(self, steps: int, seconds: float, phases: Phases) -> None:
        named = phases.named()
        if self.steps and set(named) != set(self.sums):  # the ranks' all-reduce timed in some chunks only
            return
        self.steps += steps
        self.seconds += seconds
        for name, value in named.items():
            self.sums[name] = self.sums.get(name, 0.0) + value * steps


#: Warm-up steps marked between two reads of a :class:`Tally` (a synchronization each).
CHUNK_STEPS = 16


def make(device) -> Clock:
    """The clock of a step on ``device``: CUDA events on a GPU, the host's clock elsewhere."""
    return CudaClock(device) if device.type == "cuda" else HostClock()


def timed_allreduce(clock: Clock, bucket):  # no annotations: DDP checks them (a Future[Tensor], a GradBucket)
    """DDP's communication hook: DDP's own all-reduce (``allreduce_hook``), after a mark where ``bucket`` is the
    last of the step (:meth:`Clock.ready`)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if bucket.is_last():
        clock.ready()
    return default_hooks.allreduce_hook(None, bucket)


def time_comm(model, clock: Clock) -> None:
    """Mark the start of the last all-reduce of each step of a DDP ``model`` (:func:`timed_allreduce`); any other
    model is left alone.  Before the model's first step."""
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(model, DistributedDataParallel):
        model.register_comm_hook(clock, timed_allreduce)
        clock.comm = True

"""The timed part of a run: the warm-up, then the measured windows, each between two device synchronizations.

:func:`time_windows` warms up (:func:`warm_up`) and times ``repeats`` windows of ``steps`` steps; a window's
throughput is its samples over its elapsed seconds (total over total, never a mean of per-step rates).  A step with a
clock marks its phases in each window (:mod:`.phaseclock`), and the warm-up's steps after the first for the
progress file (:class:`.phaseclock.Tally`).  :func:`compile_steps` runs a ``torch.compile``d model's first two
steps, before all of it.  Nothing here imports torch: a step brings its own (``__call__`` and ``sync``).
"""

from __future__ import annotations

import time
from typing import Any

from . import phaseclock


def time_windows(step, *, warmup_steps: int, steps: int, repeats: int, samples_per_step: int,
                 on_progress=None, barrier=None, sampler=None,
                 between=None) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Warm up, then time ``repeats`` windows of ``steps`` steps; returns windows and timings.

    With ``barrier`` (several ranks), every window starts on all ranks together.

    ``sampler`` (a :class:`~pytest_dlperf.worker.telemetry.Telemetry`) is started after the warm-up, once the device
    is synchronized and before the first window's barrier (so a slow NVML start on one rank does not skew the ranks'
    first window), and stopped right after the last window's synchronization.  Neither call is inside a window.

    ``between()`` is called after each window but the last, once every rank's window is over (a barrier) and before
    the next one's barrier: the memory probe of :class:`~pytest_dlperf.worker.interference.Interference`, which must
    not slow a rank still inside its window.  With ``between``, the last window is followed by that barrier too,
    before ``sampler.stop()`` probes once more.

    ``on_progress(step_seconds, remaining_steps, **where)`` (a :class:`ProgressFile`) is told the time of a step
    after the first step, after the warm-up and after the first window, so the controller can set a time limit that
    fits the case; and where the worker is (phase, warm-up steps and windows done, the last window's figure, the
    phases so far), during the warm-up at most once a second and after each window, never inside one.

    A ``step`` with a ``clock`` (:class:`~pytest_dlperf.worker.phaseclock.Clock`) marks its phases in each window
    (unless the clock, prepared after the warm-up, is off); they are read after the window's synchronization."""
    report = on_progress or (lambda *args, **where: None)
    measured_total = steps * repeats
    marks: dict[str, float] = {"first_step": time.time()}
    tally = phaseclock.Tally(step)
    step_seconds = warm_up(step, warmup_steps, measured_total, report, tally) if warmup_steps else None
    report(None, measured_total, phase="measuring", warmup_done=warmup_steps, windows_done=0)
    marks["warmup_done"] = time.time()
    clock = getattr(step, "clock", None)  # a TrainingStep's: the phases of its steps (worker/phaseclock.py)
    if clock is not None:
        clock.prepare(steps, step_seconds)
    windows = []
    for index in range(repeats):
        step.sync()
        if index == 0 and sampler is not None:
            sampler.start()
        if barrier is not None:
            barrier()
        start = time.perf_counter()
        run_steps(step, steps, clock)
        step.sync()
        seconds = time.perf_counter() - start
        samples = samples_per_step * steps
        phases = clock.close(steps, seconds) if clock is not None else None  # read after the synchronization
        windows.append({"steps": steps, "samples": samples, "seconds": seconds, "throughput": samples / seconds,
                        **({"phases": phases} if phases is not None else {})})
        tally.window(windows[-1])
        report(seconds / steps if index == 0 else None, measured_total - steps * (index + 1),
               windows_done=index + 1, last_throughput=samples / seconds, phase_window=tally.record())
        if between is not None:
            if barrier is not None:
                barrier()  # no rank probes while another is still inside its window
            if index + 1 < repeats:
                between()
    if sampler is not None:
        sampler.stop()
    marks["measured_done"] = time.time()
    return windows, marks


def run_steps(step, steps: int, clock) -> None:
    """A window's ``steps`` steps; with a ``clock`` that is on, each marks its phases."""
    if clock is None or clock.off:
        for _ in range(steps):
            step()
        return
    clock.open()
    mark = clock.mark
    for _ in range(steps):
        step(mark)


def warm_up(step, warmup_steps: int, measured_total: int, report, tally=None) -> float | None:
    """``warmup_steps`` steps, telling ``report`` the first step's time, then where the warm-up is at most once a
    second, then the time of a step of its second half (past autotuning and allocator growth), which it returns
    (None for a warm-up of one step).

    ``tally`` (a :class:`~.phaseclock.Tally`) marks the phases of the steps after the first, and each report
    after the first carries them (``phase_window``): what a run cut short in its warm-up says of where its time
    went.  Reading them synchronizes the device; the warm-up is not timed but for its second half's step time."""
    tally = tally or phaseclock.Tally(step, marked=False)
    start = time.perf_counter()
    step()
    step.sync()
    shown = time.perf_counter()
    report(shown - start, warmup_steps - 1 + measured_total, phase="warm-up", warmup_done=1)
    half = max(1, warmup_steps // 2)
    tally.begin(warmup_steps - 1)
    t_half = time.perf_counter()
    for i in range(1, warmup_steps):
        if i == half:
            tally.read()
            step.sync()
            t_half = time.perf_counter()
        tally()
        if time.perf_counter() - shown >= 1.0:
            tally.read()
            shown = time.perf_counter()
            report(None, warmup_steps - 1 - i + measured_total, warmup_done=i + 1, phase_window=tally.record())
    tally.end()
    step.sync()
    if warmup_steps < 2:
        return None
    step_seconds = (time.perf_counter() - t_half) / (warmup_steps - half)
    report(step_seconds, measured_total, phase_window=tally.record())
    return step_seconds


def compile_steps(step, on_progress=None) -> dict[str, float]:
    """Run the steps that compile a ``torch.compile``d model, outside warm-up and windows: the first compiles, the
    second runs the compiled code; ``compile_seconds`` is the first's time minus the second's."""
    started = time.time()
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        step()
        step.sync()
        seconds.append(time.perf_counter() - start)
    if on_progress is not None:
        on_progress(seconds[1])
    return {"started": started, "compile_seconds": max(0.0, seconds[0] - seconds[1]),
            "compile_steps_seconds": sum(seconds)}

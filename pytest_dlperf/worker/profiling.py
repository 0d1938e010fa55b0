"""A profiled run's steps under ``torch.profiler``: the table of :mod:`.operators` and a Chrome trace.

A run whose spec says ``profile`` (``--dlperf-profile``) warms up as a timed run does, then profiles
:data:`~.operators.STEPS` steps after one step the profiler warms up on (``torch.profiler.schedule``), records every
operator's self time (the device's on a GPU, the host's on a CPU) and writes the trace to ``trace-rank{RANK}.json`` in
the run's folder.  Its one window is the profiled steps' time, profiling included: the controller never counts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .operators import STEPS, Profile, table

#: The profiler's own record of each step (``ProfilerStep#N``): its self time is the step's outside every operator.
STEP_EVENT = "ProfilerStep"
OUTSIDE = "(outside operators)"


def trace_name(rank: int) -> str:
    return f"trace-rank{rank}.json"


def profile_steps(step, warm_up: Callable[[], object], *, samples_per_step: int, folder: str | None,
                  rank: int) -> tuple[list[dict[str, Any]], dict[str, float], Profile]:
    """``warm_up()``, then profile :data:`STEPS` steps of ``step`` (a :class:`~.training.TrainingStep`): (its one
    window, its time marks as :func:`~.windows.time_windows` gives them, its profile)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    marks: dict[str, float] = {"first_step": time.time()}
    warm_up()
    marks["warmup_done"] = time.time()
    cuda = step.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    trace = str(Path(folder) / trace_name(rank)) if folder else None
    step.sync()
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1),
                 on_trace_ready=(lambda prof: prof.export_chrome_trace(trace)) if trace else None) as prof:
        step()
        step.sync()
        prof.step()
        start = time.perf_counter()
        for _ in range(STEPS):
            step()
            prof.step()
        step.sync()
        seconds = time.perf_counter() - start
    marks["measured_done"] = time.time()
    events = [(OUTSIDE if event.key.startswith(STEP_EVENT) else event.key,
               event.self_device_time_total if cuda else event.self_cpu_time_total, event.count)
              for event in prof.key_averages()]
    window = {"steps": STEPS, "samples": samples_per_step * STEPS, "seconds": seconds,
              "throughput": samples_per_step * STEPS / seconds}
    return [window], marks, table(events, STEPS, "cuda" if cuda else "cpu", seconds / STEPS, trace)

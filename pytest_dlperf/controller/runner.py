"""The service that runs a session's cases: the device, the launcher, the work folder, run parameters, the live
display and the batch searches.

A case kind gets a :class:`Runner` in its ``measure`` (:mod:`.kinds`) and starts its runs through it
(:meth:`Runner.runs`); it never gets the session.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .. import baseline as baseline_mod
from ..cases import Case
from ..launch import forkserver, threads
from ..launch.launchers import Launcher, get_launcher
from ..launch.workers import CaseError, RunParams
from ..models import ModelSpec
from ..registry import Registry
from ..reporting.live import LiveProgress
from ..results.runs import RunRecord
from .batchsearch import Searches
from .device import DeviceChoice

if TYPE_CHECKING:
    from ..options import Options

#: ``measure(case, spec, params, workdir, launcher, on_progress=None, first_index=0) -> list[RunRecord]``
Measure = Callable[..., list[RunRecord]]
#: The measure function of each spec type, by the type's name; a spec's most specific type wins (:func:`measurer_for`).
#: The worker's (``ModelSpec``) and a command's (``CommandSpec``) are registered by :mod:`.session`.
MEASURERS: Registry[Measure] = Registry("measure function")


def measurer_for(spec: ModelSpec) -> Measure:
    """The measure function of ``spec``'s most specific registered type."""
    for kind in type(spec).__mro__:
        if kind.__name__ in MEASURERS:
            return MEASURERS[kind.__name__]
    raise TypeError(f"no measure function for a {type(spec).__name__}")


class Runner:
    """Where and how a session's runs go: one per session."""

    def __init__(self, config: pytest.Config, options: Options):
        self.config = config
        self.options = options
        self.launcher = get_launcher(options.launcher, options.launcher_args, **(
            {"nnodes": options.nnodes, "endpoint": options.rdzv_endpoint, "node_rank": options.node_rank,
             "join_timeout": options.rdzv_timeout}
            if options.launcher == "torchrun" else {}))
        self.searches = Searches(max_memory=options.max_memory, max_trials=options.max_batch_trials)
        self.live = LiveProgress(config)
        self._workdir: Path | None = None
        self._device_choice: DeviceChoice | None = None

    @property
    def device_choice(self) -> DeviceChoice:
        """Probed on first use (importing torch), not at configure time: ``pytest --co`` stays fast."""
        if self._device_choice is None:
            self._device_choice = DeviceChoice.probe(self.options.device)
        return self._device_choice

    @property
    def probed_device(self) -> str | None:
        """The device, if a case has asked for it yet (None: not probed)."""
        return None if self._device_choice is None else self._device_choice.kind

    @property
    def device(self) -> str:
        return self.device_choice.kind

    @property
    def workdir_if_made(self) -> Path | None:
        return self._workdir

    @property
    def workdir(self) -> Path:
        """This session's folder of worker specs, logs and results (``--dlperf-log-dir``, else basetemp)."""
        if self._workdir is None:
            if self.options.log_dir:
                base = Path(self.options.log_dir)
            else:
                # pytest has no public accessor of the session's TempPathFactory outside fixtures.
                factory = getattr(self.config, "_tmp_path_factory", None)
                base = factory.getbasetemp() / "dlperf" if factory else Path(".dlperf")
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            self._workdir = base / f"session-{stamp}-{os.getpid()}"
            self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    def case_dir(self, case: Case) -> Path:
        """The case's folder in the session's: its id, with anything that is no plain name character
        replaced, so that a setting's text (``x=../../etc``) cannot lead out of the log folder."""
        name = re.sub(r"[^A-Za-z0-9_.+=-]", "_", case.id).replace("..", "__")
        return self.workdir / name

    def probe_host(self) -> dict[str, float] | None:
        """The host's speed, read by a process of its own (:mod:`pytest_dlperf.worker.hostprobe`), with nothing of
        the code under test beside it: ``memory_gbs``, ``core_gflops`` and ``index`` (their geometric mean); None
        where it could not be read.  Called between runs, once a run's processes have ended (:mod:`..gate.host`)."""
        import json
        import subprocess
        import sys

        from ..worker.hostprobe import index

        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        try:
            done = subprocess.run([sys.executable, "-m", "pytest_dlperf.worker.hostprobe"], capture_output=True,
                                  text=True, timeout=60, env=env, check=False)
            reading = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None
        figure = index(reading)
        return {**reading, "index": round(figure, 4)} if figure else None

    def label(self, case: Case) -> str:
        """The case's id in messages: a ``"max"`` batch case with the batch its search chose."""
        return self.searches.label(case, self.device)

    def cpu_threads(self, case: Case, entry: baseline_mod.Entry | None) -> threads.Chosen | None:
        """The intra-op threads of each of the case's CPU ranks, and where the count comes from
        (:func:`pytest_dlperf.launch.threads.choose`); None on GPUs, whose ranks get no count."""
        if self.device != "cpu":
            return None
        here = self.launcher.ranks_per_node(case.gpus)
        recorded = entry.cpu_threads if entry is not None else None
        if recorded is None and entry is not None and entry.threads_as_before:
            recorded = threads.as_before(here)
        return threads.choose(self.options.cpu_threads, recorded, here)

    def threads_mismatch(self, case: Case, entry: baseline_mod.Entry | None) -> str | None:
        """Where ``dlperf_cpu_threads`` gives a CPU case another count than its judged baseline entry was measured
        with, the one line that fails it (:func:`pytest_dlperf.launch.threads.mismatch`); else None."""
        option = self.options.cpu_threads
        chosen = self.cpu_threads(case, entry) if option is not None and entry and not entry.unjudged else None
        return threads.mismatch(case.id, option, chosen, entry.cpu_threads is not None) if chosen else None

    def params_for(self, case: Case, entry: baseline_mod.Entry | None,
                   step_defaults: dict[str, int] | None = None) -> RunParams:
        """Step counts: the option, else the entry's, else the baseline file's defaults (``step_defaults``), else
        the built-in defaults; the CPU ranks' threads (:meth:`cpu_threads`)."""
        opts = self.options
        defaults = {**baseline_mod.STEP_DEFAULTS, **(step_defaults or {})}
        if entry is not None:
            defaults.update(entry.overrides)
        chosen = {k: getattr(opts, k) if getattr(opts, k) is not None else defaults[k]
                  for k in baseline_mod.STEP_DEFAULTS}
        cpu = self.cpu_threads(case, entry)
        return RunParams(device=self.device, runs=opts.runs, timeout=opts.timeout, launcher=opts.launcher,
                         peak_tflops=opts.peak_tflops, telemetry=not opts.no_telemetry,
                         data_dir=opts.data_dir, data_workers=opts.data_workers, data_only=opts.data_only,
                         malloc=opts.malloc, fork_server=forkserver.uses_server(opts.start, self.device),
                         share_gpus=bool(opts.share_gpus), dist_backend=opts.dist_backend,
                         cpu_threads=cpu.threads if cpu is not None else None, **chosen)

    @contextlib.contextmanager
    def watching(self, label: str, unit: str) -> Iterator[Callable[..., None]]:
        """The live display while runs go on: yields their ``on_progress``; the display ends with the runs."""
        self.live.start()
        try:
            yield functools.partial(self.live.update, label, unit, 0)
        finally:
            self.live.finish()

    def runs(self, case: Case, spec: ModelSpec, params: RunParams, folder: Path, *, label: str, unit: str,
             first_index: int = 0, launcher: Launcher | None = None, before: list[RunRecord] | None = None,
             measure: Measure | None = None) -> list[RunRecord]:
        """``params.runs`` fresh runs of ``case`` by its spec's measure function (``measure`` where given), the
        live display showing ``label``; their records.  A run that fails raises :class:`CaseError` carrying
        ``before`` (the case's earlier runs) and its own, so the results keep every run of the case."""
        measure = measure or measurer_for(spec)
        with self.watching(label, unit) as shown:
            try:
                return measure(case, spec, params, folder, launcher or self.launcher, on_progress=shown,
                               first_index=first_index)
            except CaseError as exc:
                exc.runs = (before or []) + exc.runs
                raise

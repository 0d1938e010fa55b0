"""The controller: pytest options, cases as items, launching, verdicts and reports.

Cases come from ``--dlperf-baseline`` entries and from the matrix options
(``--dlperf-model`` x ``--dlperf-precision`` x ``--dlperf-batch-size`` x ``--dlperf-gpus``).
Each becomes a :class:`DlperfItem` under one ``dlperf`` collector, with the markers
``dlperf``, ``gpu<N>``, its precision and its model.  Running an item launches fresh
worker processes (:mod:`pytest_dlperf.runs`), judges the median against the baseline
(:mod:`pytest_dlperf.verdict`) and records the figures for the summary, the JSON results
and JUnit XML.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import re
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from . import baseline as baseline_mod
from . import batchsearch, data, environment, jsonio, process as launch, models
from .reporting import benchmark_json, markdown as markdown_report, plots, summary as report
from .worker import memory
from .cases import (PRECISIONS, Case, OptionError, check_settings, matrix, parse_batch_sizes, parse_ints, parse_list,
                    parse_precisions, parse_settings)
from .runs import Attempt, CaseError, RemoteRankZero, RunParams, measure
from .launchers import LAUNCHERS, get_launcher
from .verdict import FAIL, IMPROVED, NO_BASELINE, Expected, Scaling, Verdict, judge, scaling, scaling_message

STASH = pytest.StashKey["DlperfSession"]()
REGISTRY = pytest.StashKey[dict]()
GPU_MARKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
DEVICES = ("auto", "cuda", "cpu")
DEFAULTS = {"warmup_steps": 20, "steps": 100, "repeats": 5}


# --------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dlperf", "deep-learning training throughput (pytest-dlperf)")

    def option(name: str, help: str, *, ini_type: str | None = "string", **kwargs) -> None:
        dest = "dlperf_" + name.replace("-", "_")
        group.addoption(f"--dlperf-{name}", dest=dest, help=help, **kwargs)
        if ini_type is not None:
            parser.addini(dest, help=help.replace("%%", "%"), type=ini_type, default=None)

    option("baseline", "baseline JSON: its cases are collected and judged against it.", metavar="PATH")
    option("model", "models for cases without a baseline entry (comma list).", metavar="NAMES", action="append")
    option("precision", f"precisions for matrix cases: {', '.join(PRECISIONS)} (comma list; default fp32).",
           metavar="LIST", action="append")
    option("batch-size", "per-device batch sizes for matrix cases (comma list; default: the model's); "
                         "max: the largest that trains without running out of memory.",
           metavar="LIST", action="append")
    option("gpus", "GPU counts (ranks) for matrix cases (comma list; default 1).", metavar="LIST", action="append")
    option("set", "a setting of matrix cases, KEY=VALUE (repeatable): seq_len=512, data=torchvision, "
                  "channels_last=false, compile=true, image_size=160.", metavar="KEY=VALUE", action="append")
    option("device", "where cases run: auto (CUDA when available), cuda or cpu.", metavar="DEVICE")
    option("launcher", f"how a case's ranks start: {', '.join(LAUNCHERS)} (default local: torchrun on this "
                       "node for N > 1).", metavar="NAME")
    option("launcher-args", "extra arguments for srun / mpirun / torchrun (one string, split like a shell).",
           metavar="ARGS")
    option("nnodes", "nodes of a torchrun job across nodes (--dlperf-launcher torchrun; default 1).", metavar="N")
    option("rdzv-endpoint", "HOST:PORT of the c10d rendezvous of a torchrun job across nodes.", metavar="HOST:PORT")
    option("rdzv-timeout", "seconds a torchrun job across nodes waits for all nodes to join (default 120).",
           metavar="SECONDS")
    option("node-rank", "this node's rank in a torchrun job (default: from SLURM_NODEID, OMPI_COMM_WORLD_RANK "
                        "or DLPERF_NODE_RANK, else 0).", metavar="N")
    option("min-efficiency", "least scaling efficiency (speedup / ranks) of multi-rank cases when the "
                             "baseline sets none, as a fraction (default: not gated).", metavar="FRACTION")
    option("min-gpu-utilization", "least mean GPU utilization over the measured windows, as a fraction (0.8: "
                                  "80%%), when the baseline sets none (default: not gated; never gated where "
                                  "GPU telemetry is unavailable).", metavar="FRACTION")
    option("warmup-steps", "steps before measuring (default 20; a baseline may set it).", metavar="N")
    option("steps", "steps per measured window (default 100; a baseline may set it).", metavar="N")
    option("repeats", "measured windows per run (default 5; a baseline may set it).", metavar="N")
    option("runs", "fresh worker processes per case; the median of all their windows (default 1).",
           metavar="K")
    option("confirm", "re-measure a case below its baseline this many times before it fails (default 1).",
           metavar="N")
    option("timeout", "seconds a worker may run before its process group is killed "
                      "(default: adapts to the measured step time).", metavar="SECONDS")
    option("tolerance", "relative tolerance when the baseline gives none, as a fraction (default 0.05).",
           metavar="FRACTION")
    option("require-baseline", "fail cases that have no baseline entry.", action="store_true",
           default=None, ini_type="bool")
    option("save-baseline", "write the measured medians as a baseline to PATH (atomically).", metavar="PATH",
           ini_type=None)
    option("json", "write every case's windows, statistics, verdict and environment to PATH.",
           metavar="PATH", ini_type=None)
    option("report", "write a Markdown report to PATH (environment, method, throughput and speedup tables, "
                     "baseline comparison, telemetry), with each run's logs copied to <stem>-logs/ beside it.",
           metavar="PATH", ini_type=None)
    option("plot", "write PNG plots to DIR: throughput vs GPUs per model and precision, measured vs "
                   "baseline per unit (needs the plot extra: matplotlib).", metavar="DIR")
    option("log-dir", "keep each worker's spec, logs and result under DIR (default: pytest's basetemp).",
           metavar="DIR")
    option("peak-tflops", "peak TFLOP/s of one device, for MFU: overrides the datasheet table (and gives "
                          "CPU cases and unlisted GPUs an MFU).", metavar="TFLOPS")
    option("max-memory", "cap the memory each worker's training may add, e.g. 2GiB or 1500MB: the CPU's "
                         "address space beyond the framework's own, or a CUDA device's memory (batch size max "
                         "on the CPU needs it).", metavar="SIZE")
    option("max-batch-trials", f"most short trial runs of one batch size max search (default "
                               f"{batchsearch.MAX_TRIALS}).", metavar="N")
    option("no-telemetry", "do not sample GPU (NVML) and host metrics during the measured windows.",
           action="store_true", default=None, ini_type="bool")
    option("data-dir", "the image folder (ImageFolder layout: DIR/CLASS/IMAGE.jpg) that data=torchvision and "
                       "data=dali cases read.", metavar="DIR")
    option("data-workers", "data loader workers (torchvision) or DALI threads per rank (default: the CPUs per "
                           "rank less one, at most 8).", metavar="N")
    option("data-only", "time each case's data loader alone, without a model: samples/s and MB/s of image "
                        "files read; the cases pass with a data-only verdict.", action="store_true", default=None,
           ini_type="bool")


def _option(config: pytest.Config, name: str):
    """Command line first, then the ini file (``[tool.pytest.ini_options] dlperf_...``)."""
    dest = "dlperf_" + name.replace("-", "_")
    value = config.getoption(dest)
    if value is None or value == []:
        try:
            value = config.getini(dest)
        except ValueError:
            value = None
    if value == [] or value == "":
        return None
    return value


def _int_option(config, name: str, minimum: int) -> int | None:
    raw = _option(config, name)
    if raw is None:
        return None
    try:
        value = int(str(raw))
    except ValueError:
        raise OptionError(f"--dlperf-{name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise OptionError(f"--dlperf-{name}: {value} is not allowed; expected an integer >= {minimum}")
    return value


def _float_option(config, name: str, *, low: float, high: float | None = None,
                  high_inclusive: bool = False) -> float | None:
    raw = _option(config, name)
    if raw is None:
        return None
    try:
        value = float(str(raw))
    except ValueError:
        raise OptionError(f"--dlperf-{name}: {raw!r} is not a number") from None
    below_high = high is None or value < high or (high_inclusive and value == high)
    if not (value > low and below_high):
        bound = f"between {low} and {high}" if high is not None else f"greater than {low}"
        raise OptionError(f"--dlperf-{name}: {value} is not allowed; expected a number {bound}")
    return value


def _data_dir_option(config: pytest.Config) -> str | None:
    """``--dlperf-data-dir`` as an absolute path: relative to the current folder on the command
    line, to the ini file's folder in ``dlperf_data_dir`` (workers may run elsewhere)."""
    raw = config.getoption("dlperf_data_dir")
    base = Path.cwd()
    if not raw:
        raw = config.getini("dlperf_data_dir") or None
        if config.inipath is not None:
            base = config.inipath.parent
    return str((base / os.path.expanduser(str(raw))).resolve()) if raw else None


class Options:
    """The validated dlperf options of one session."""

    def __init__(self, config: pytest.Config):
        self.baseline_path = _option(config, "baseline")
        self.models = parse_list("--dlperf-model", _option(config, "model"))
        self.precisions = parse_precisions("--dlperf-precision", _option(config, "precision"))
        self.batch_sizes = parse_batch_sizes("--dlperf-batch-size", _option(config, "batch-size"))
        self.gpus = parse_ints("--dlperf-gpus", _option(config, "gpus"))
        self.settings = parse_settings("--dlperf-set", _option(config, "set"))
        self.device = str(_option(config, "device") or "auto")
        if self.device not in DEVICES:
            raise OptionError(f"--dlperf-device: {self.device!r} is not one of {', '.join(DEVICES)}")
        self.warmup_steps = _int_option(config, "warmup-steps", 0)
        self.steps = _int_option(config, "steps", 1)
        self.repeats = _int_option(config, "repeats", 1)
        self.runs = _int_option(config, "runs", 1) or 1
        confirm = _int_option(config, "confirm", 0)
        self.confirm = 1 if confirm is None else confirm
        self.timeout = _float_option(config, "timeout", low=0)
        self.tolerance = _float_option(config, "tolerance", low=0, high=1)
        self.min_efficiency = _float_option(config, "min-efficiency", low=0, high=1.5)
        self.min_gpu_utilization = _float_option(config, "min-gpu-utilization", low=0, high=1, high_inclusive=True)
        self.launcher = str(_option(config, "launcher") or "local")
        if self.launcher not in LAUNCHERS:
            raise OptionError(f"--dlperf-launcher: {self.launcher!r} is not one of {', '.join(LAUNCHERS)}")
        try:
            self.launcher_args = shlex.split(str(_option(config, "launcher-args") or ""))
        except ValueError as exc:
            raise OptionError(f"--dlperf-launcher-args: {exc}") from None
        self.nnodes = _int_option(config, "nnodes", 1) or 1
        self.node_rank = _int_option(config, "node-rank", 0)
        self.rdzv_endpoint = _option(config, "rdzv-endpoint")
        self.rdzv_timeout = _float_option(config, "rdzv-timeout", low=0) or 120.0
        if self.rdzv_endpoint and not re.fullmatch(r"[^:\s]+:\d+", str(self.rdzv_endpoint)):
            raise OptionError(f"--dlperf-rdzv-endpoint: {self.rdzv_endpoint!r} is not HOST:PORT")
        if self.nnodes > 1 and self.launcher == "torchrun":
            # Only the node of rank 0 judges: a re-measurement there alone would leave the
            # other nodes waiting at a rendezvous that never comes.
            self.confirm = 0
        if self.nnodes > 1 and self.launcher != "torchrun":
            raise OptionError("--dlperf-nnodes: jobs across nodes need --dlperf-launcher torchrun "
                              "(slurm and mpi take their nodes from the allocation or the hostfile)")
        self.require_baseline = bool(_option(config, "require-baseline"))
        self.save_baseline = _option(config, "save-baseline")
        self.json_path = _option(config, "json")
        self.report_path = _option(config, "report")
        self.plot_dir = _option(config, "plot")
        if self.plot_dir and (missing := plots.missing_matplotlib()):
            raise OptionError(missing)
        self.log_dir = _option(config, "log-dir")
        self.peak_tflops = _float_option(config, "peak-tflops", low=0)
        self.no_telemetry = bool(_option(config, "no-telemetry"))
        self.data_dir = _data_dir_option(config)
        self.data_workers = _int_option(config, "data-workers", 0)
        self.data_only = bool(_option(config, "data-only"))
        self.max_batch_trials = _int_option(config, "max-batch-trials", 1) or batchsearch.MAX_TRIALS
        raw_memory = _option(config, "max-memory")
        try:
            self.max_memory = None if raw_memory is None else memory.parse_size("--dlperf-max-memory", raw_memory)
        except ValueError as exc:
            raise OptionError(str(exc)) from None

    @property
    def active(self) -> bool:
        return bool(self.baseline_path or self.models)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v not in (None, [])}


# --------------------------------------------------------------------------- configure


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser, args):
    # Models that conftest files register belong to this session only: remember the
    # registry as it was before they loaded, and put it back at unconfigure.
    early_config.stash[REGISTRY] = models.snapshot()
    return (yield)


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(REGISTRY, None)
    if saved is not None:
        models.restore(saved)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dlperf: a pytest-dlperf training-throughput case")
    for n in GPU_MARKERS:
        config.addinivalue_line("markers", f"gpu{n}: a pytest-dlperf case on {n} GPU(s) / ranks")
    for precision in PRECISIONS:
        config.addinivalue_line("markers", f"{precision}: a pytest-dlperf case in {precision}")
    for name in models.list_models():
        config.addinivalue_line("markers", f"{name}: a pytest-dlperf case of model {name}")
    if hasattr(config, "workerinput"):
        return  # an xdist worker: cases run in the controller's session only
    try:
        options = Options(config)
        baseline = baseline_mod.load(options.baseline_path) if options.baseline_path else None
    except (OptionError, jsonio.DocumentError) as exc:
        raise pytest.UsageError(str(exc)) from None
    session = DlperfSession(config, options, baseline)
    config.stash[STASH] = session
    config.pluginmanager.register(session, "dlperf-session")
    if options.active:
        benchmark_json.register(config)


# --------------------------------------------------------------------------- items


class DlperfCollector(pytest.Collector):
    """The parent of all cases, so that their node ids read ``dlperf::<case id>``."""

    def __init__(self, *, cases: list, **kwargs):
        super().__init__(**kwargs)
        self.cases = cases

    def collect(self):
        return [DlperfItem.from_parent(self, name=case.id, case=case, entry=entry)
                for case, entry in self.cases]


class CaseFailed(Exception):
    """A case that regressed or could not be measured; its message is the report."""


class DlperfItem(pytest.Item):
    def __init__(self, *, case: Case, entry: baseline_mod.Entry | None, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        self.entry = entry
        for name in case.markers:
            self.add_marker(getattr(pytest.mark, name))

    def setup(self) -> None:
        session = self.config.stash[STASH]
        reason = session.skip_reason(self.case)
        if reason:
            session.record_skip(self, reason)
            # Reported at the case, not at this line of the plugin.
            raise pytest.skip.Exception(reason, _use_item_location=True)

    def runtest(self) -> None:
        self.config.stash[STASH].run_case(self)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        # A case has no source line: skip reports (-rs) name it by its node id.
        return self.config.rootpath / self.nodeid, 0, f"dlperf {self.case.id}"


# --------------------------------------------------------------------------- session


class DlperfSession:
    """State of one pytest session: options, baseline, measured records."""

    def __init__(self, config: pytest.Config, options: Options, baseline: baseline_mod.Baseline | None):
        self.config = config
        self.options = options
        self.baseline = baseline
        self.records: list[dict[str, Any]] = []
        self._device: str | None = None
        self._cuda_count: int | None = None
        self._workdir: Path | None = None
        self._old_sigterm = None
        self._references: dict[Case, float | None] = {}
        self._reference_errors: dict[Case, str] = {}
        self._current_params: RunParams | None = None
        self._searches: dict[tuple, batchsearch.SearchResult] = {}  # batch_size "max", per config
        self.environment: dict[str, Any] = {}
        self.plot_files: list[Path] = []
        self.plot_notes: list[str] = []
        self.launcher = get_launcher(options.launcher, options.launcher_args, **(
            {"nnodes": options.nnodes, "endpoint": options.rdzv_endpoint, "node_rank": options.node_rank,
             "join_timeout": options.rdzv_timeout}
            if options.launcher == "torchrun" else {}))

    # -- collection

    def build_cases(self) -> list[tuple[Case, baseline_mod.Entry | None]]:
        opts = self.options
        out: list[tuple[Case, baseline_mod.Entry | None]] = []
        if self.baseline is not None:
            out.extend((entry.case, entry) for entry in self.baseline.entries)
        try:
            extra = matrix(opts.models, opts.precisions, opts.batch_sizes, opts.gpus,
                           lambda name: models.get_model_spec(name).batch_size, opts.settings)
        except models.UnknownModelError as exc:
            raise pytest.UsageError(f"--dlperf-model: {exc}") from None
        extra = [baseline_mod.plain_case(case) for case in extra]
        known = {case for case, _ in out}
        out.extend((case, None) for case in extra if case not in known)
        for case, entry in out:
            where = (f"{self.baseline.path}: $.cases[{entry.index}].model" if entry is not None
                     else "--dlperf-model")
            try:
                spec = models.get_model_spec(case.model)
            except models.UnknownModelError as exc:
                raise pytest.UsageError(f"{where}: {exc}") from None
            try:
                check_settings(case.settings_dict, spec.defaults,
                               f"{self.baseline.path}: $.cases[{entry.index}].settings" if entry is not None
                               else "--dlperf-set")
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
            if entry is not None and entry.unit and entry.unit != spec.unit:
                raise pytest.UsageError(
                    f"{self.baseline.path}: $.cases[{entry.index}].unit: {entry.unit!r} does not match "
                    f"model {case.model!r}, which reports {spec.unit!r}")
        self._check_data(out)
        return out

    def _check_data(self, cases: list[tuple[Case, baseline_mod.Entry | None]]) -> None:
        """Usage errors for the ``data`` setting: an image-classification model, a data dir in the
        ImageFolder layout (:func:`pytest_dlperf.data.check_case`)."""
        for case, entry in cases:
            settings = case.settings_dict
            backend = data.backend_of(settings)
            where = (f"{self.baseline.path}: $.cases[{entry.index}].settings.data" if entry is not None
                     else f"--dlperf-set data={backend}")
            spec = models.get_model_spec(case.model)
            try:
                data.check_case(case.id, backend, spec, spec.settings(settings), self.options.data_dir, where)
            except data.DataError as exc:
                raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config, items: list) -> None:
        if not self.options.active:
            return
        cases = self.build_cases()
        known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
        for name in sorted({name for case, _ in cases for name in case.markers} - known):
            config.addinivalue_line("markers", f"{name}: a pytest-dlperf marker")
        # Collect through the regular protocol, so the terminal counts the cases as
        # collected and other plugins see a collect report for them.
        collector = DlperfCollector.from_parent(session, name="dlperf", nodeid="dlperf", cases=cases)
        rep = collector.ihook.pytest_make_collect_report(collector=collector)
        collector.ihook.pytest_collectreport(report=rep)
        if rep.failed:
            raise pytest.UsageError(f"dlperf: cannot collect the cases: {rep.longreprtext}")
        # Fewer ranks first: an N-rank case's speedup is measured against this session's 1-rank case.
        items.extend(sorted(rep.result, key=lambda item: item.case.gpus))

    def pytest_report_header(self, config) -> list[str]:
        if not self.options.active:
            return []
        src = f"baseline {self.options.baseline_path}" if self.options.baseline_path else "no baseline"
        env = environment.collect(config.rootpath)
        return [f"dlperf: device {self.options.device}, {src}", f"dlperf: {environment.header_line(env)}"]

    # -- running

    @property
    def device(self) -> str:
        if self._device is None:
            requested = self.options.device
            if requested == "cpu":
                self._device = "cpu"
            else:
                import torch

                self._cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
                self._device = "cuda" if (requested == "cuda" or self._cuda_count) else "cpu"
        return self._device

    def skip_reason(self, case: Case) -> str | None:
        spec = models.get_model_spec(case.model)
        missing = spec.missing_requirements()
        if missing:
            return missing[0]
        backend = data.backend_of(case.settings_dict)
        if self.options.data_only and backend == data.SYNTHETIC:
            return ("--dlperf-data-only times a data loader; this case's data is synthetic "
                    "(set data=torchvision or data=dali)")
        no_loader = data.missing_module(backend)
        if no_loader:
            return no_loader
        if self.device == "cuda" and not self._cuda_count:
            return "CUDA not available"
        unavailable = self.launcher.unavailable()
        if unavailable:
            return unavailable
        reach = self.launcher.reach(self.device, self._cuda_count or 0)
        if reach is not None and case.gpus > reach:
            if self.device == "cuda":
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

    def params_for(self, item: DlperfItem) -> RunParams:
        opts = self.options
        defaults = dict(DEFAULTS)
        if self.baseline is not None:
            defaults.update({k: v for k, v in self.baseline.defaults.items() if k in DEFAULTS})
        if item.entry is not None:
            defaults.update(item.entry.overrides)
        chosen = {k: getattr(opts, k) if getattr(opts, k) is not None else defaults[k] for k in DEFAULTS}
        return RunParams(device=self.device, runs=opts.runs, timeout=opts.timeout, launcher=opts.launcher,
                         peak_tflops=opts.peak_tflops, telemetry=not opts.no_telemetry,
                         data_dir=opts.data_dir, data_workers=opts.data_workers, data_only=opts.data_only,
                         **chosen)

    def expected(self, item: DlperfItem, unit: str) -> Expected | None:
        if item.entry is None:
            return None
        return item.entry.expected(unit, self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE)

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            if self.options.log_dir:
                base = Path(self.options.log_dir)
            else:
                factory = getattr(self.config, "_tmp_path_factory", None)
                base = factory.getbasetemp() / "dlperf" if factory else Path(".dlperf")
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            self._workdir = base / f"session-{stamp}-{os.getpid()}"
            self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    def scaling_reference(self, case: Case) -> tuple[float, str] | None:
        """The 1-rank throughput of the same config: measured in this session, else the baseline's."""
        for rec in reversed(self.records):
            if rec.get("throughput") is not None and rec["case"]["gpus"] == 1 \
                    and Case.from_dict(rec["case"]).same_config(case):
                return rec["throughput"], "this session"
        entry = self.baseline.reference(case) if self.baseline is not None else None
        if entry is not None:
            return entry.throughput, "baseline"
        return self.measured_reference(case)

    def measured_reference(self, case: Case) -> tuple[float, str] | None:
        """No 1-rank figure in the session or the baseline (``-m gpu8`` alone): measure one.

        Once per config and session, as a single local process with the case's step counts;
        it is not a test of its own. A reference that cannot be measured leaves the case
        without scaling figures, and says so.
        """
        one = self.at_chosen_batch(case.with_gpus(1))
        if one not in self._references:
            params = dataclasses.replace(self._current_params, runs=1, launcher="local")
            try:
                attempt = measure(one, models.get_model_spec(one.model), params,
                                  self.workdir / case.id / "reference", get_launcher("local"))
                self._references[one] = attempt.summary.median
            except CaseError as exc:
                self._references[one] = None
                self._reference_errors[one] = exc.message.splitlines()[0]
        figure = self._references[one]
        return (figure, "measured for scaling") if figure is not None else None

    def gate_minimum(self, item: DlperfItem, key: str, from_option: float | None) -> float | None:
        """A gate's minimum (``key``: a baseline field): the entry's, else the baseline defaults', else the option's."""
        if item.entry is not None and getattr(item.entry, key) is not None:
            return getattr(item.entry, key)
        if self.baseline is not None and key in self.baseline.defaults:
            return self.baseline.defaults[key]
        return from_option

    def min_efficiency(self, item: DlperfItem) -> float | None:
        return self.gate_minimum(item, "min_scaling_efficiency", self.options.min_efficiency)

    def min_gpu_utilization(self, item: DlperfItem) -> float | None:
        return self.gate_minimum(item, "min_gpu_utilization", self.options.min_gpu_utilization)

    def utilization_gate(self, item: DlperfItem, telemetry) -> dict[str, Any] | None:
        """The min_gpu_utilization gate: every sampled GPU's mean utilization against the minimum.

        Not gated (never failed) where GPU telemetry is unavailable or turned off.
        """
        minimum = self.min_gpu_utilization(item)
        if minimum is None:
            return None
        case_id, wanted = item.case.id, f"{100 * minimum:g}%"
        gate: dict[str, Any] = {"minimum": minimum, "measured": None, "rank": None}
        if self.options.no_telemetry:
            return dict(gate, status="not gated", message=f"{case_id}: min_gpu_utilization {wanted} not gated: "
                                                          "telemetry is off (--dlperf-no-telemetry)")
        summaries = report.telemetry_summaries({"telemetry": telemetry})
        utils = report.gpu_utilizations(summaries)
        if not utils:
            reason = next((s["gpu"].get("reason") for s in summaries if s.get("gpu", {}).get("reason")),
                          "no telemetry")
            return dict(gate, status="not gated", message=f"{case_id}: min_gpu_utilization {wanted} not gated: "
                                                          f"GPU telemetry unavailable ({reason})")
        rank, mean, _ = min(utils, key=lambda u: u[1])
        gate.update(measured=mean / 100, rank=rank)
        where = f" on rank {rank}" if rank is not None and item.case.gpus > 1 else ""
        if mean < 100 * minimum:
            return dict(gate, status="fail", message=f"{case_id}: GPU utilization {mean:.1f}%{where} (mean over "
                                                     f"the measured windows) is below the minimum {wanted}")
        return dict(gate, status="pass", message=f"{case_id}: GPU utilization {mean:.1f}%{where}, "
                                                  f"minimum {wanted}")

    def judge_attempt(self, item: DlperfItem, attempt: Attempt) -> tuple[Verdict, Scaling | None]:
        case = item.case
        verdict = judge(self.case_label(case), attempt.summary, attempt.unit, self.expected(item, attempt.unit),
                        require_baseline=self.options.require_baseline)
        reference = self.scaling_reference(case) if case.gpus > 1 else None
        if reference is None:
            return verdict, None
        return verdict, scaling(attempt.summary.median, case.gpus, *reference, self.min_efficiency(item))

    # -- batch_size "max"

    def search_key(self, case: Case) -> tuple:
        """What this session's searches are cached by (:func:`batchsearch.config_key`)."""
        return batchsearch.config_key(case, self._current_params.device, self.options.max_memory)

    def resolve_max_batch(self, case: Case, params: RunParams, record: dict[str, Any]) -> Case:
        """``case`` at the largest batch that fits, searched once per config; notes the search in ``record``.

        Raises :class:`CaseError` when the search failed: a trial that crashed, or batch 1
        out of memory.
        """
        key = self.search_key(case)
        cached = key in self._searches
        if not cached:
            self._searches[key] = self.search_batch(case, params)
        result = self._searches[key]
        record["max_batch"] = dict(result.to_dict(), memory_cap=self.options.max_memory, cached=cached)
        if result.chosen is None:
            raise CaseError(f"{case.id}: batch size max: {result.error}", "max-batch", [])
        return case.with_batch(result.chosen)

    def search_batch(self, case: Case, params: RunParams) -> batchsearch.SearchResult:
        """Search the largest per-device batch of ``case``'s config: short fresh workers on one device.

        Only the trials run under ``--dlperf-max-memory``: the case is then measured at the
        chosen batch without the cap (the cap's allocator settings would slow every step).
        """
        spec = models.get_model_spec(case.model)
        trial_params = dataclasses.replace(params, runs=1, launcher="local", max_memory=self.options.max_memory,
                                           **batchsearch.TRIAL_STEPS)
        folder = self.workdir / case.id / "max-batch"

        def trial(batch: int) -> tuple[str, str | None]:
            one = case.with_gpus(1).with_batch(batch)
            try:
                measure(one, spec, trial_params, folder / f"bs{batch}", get_launcher("local"))
            except CaseError as exc:
                return (batchsearch.OOM if exc.kind == "oom" else batchsearch.ERROR), exc.message
            return batchsearch.OK, None

        return batchsearch.search(trial, spec.batch_size, max_trials=self.options.max_batch_trials)

    def at_chosen_batch(self, case: Case) -> Case:
        """A ``"max"`` case at the batch its config's search chose (other cases as they are)."""
        result = self._searches.get(self.search_key(case)) if case.searches_batch else None
        return case.with_batch(result.chosen) if result is not None and result.chosen else case

    def case_label(self, case: Case) -> str:
        """The case's id for messages, with a ``"max"`` batch as the seeds write it: ``... (bs=max_144)``."""
        chosen = self.at_chosen_batch(case)
        return f"{case.id} (bs=max_{chosen.batch_size})" if chosen is not case else case.id

    def relabel(self, message: str, case: Case) -> str:
        """A runner's message about the batch a ``"max"`` case measured, led by the case's own label."""
        chosen = self.at_chosen_batch(case)
        if chosen is not case and message.startswith(f"{chosen.id}:"):
            return self.case_label(case) + message[len(chosen.id):]
        return message

    def run_case(self, item: DlperfItem) -> None:
        case = item.case
        spec = models.get_model_spec(case.model)
        params = self._current_params = self.params_for(item)
        started = time.monotonic()
        attempts: list[Attempt] = []
        record: dict[str, Any] = {
            "id": case.id, "nodeid": item.nodeid, "case": case.to_dict(), "unit": spec.unit,
            "parameters": params.to_dict(), "attempts": [], "throughput": None, "stats": None,
            "baseline": None, "difference": None,
        }
        self.records.append(record)
        try:
            measured = self.resolve_max_batch(case, params, record) if case.searches_batch else case
            for attempt_index in range(1 + self.options.confirm):
                attempt = measure(measured, spec, params, self.workdir / case.id / f"attempt{attempt_index}",
                                  self.launcher)
                attempts.append(attempt)
                record["attempts"].append(attempt.to_dict())
                if self.options.data_only:
                    break  # the loader alone: nothing to judge or re-measure
                verdict, scale = self.judge_attempt(item, attempt)
                regressed = verdict.status == FAIL and item.entry is not None
                if not (regressed or (scale is not None and scale.failed)):
                    break
        except RemoteRankZero as part:
            # A torchrun job across nodes: rank 0's node measures, gates and reports.
            record["attempts"].append({"throughput": None, "runs": part.runs})
            record.update(verdict="remote", message=f"{case.id}: rank(s) {', '.join(map(str, part.ranks))} of "
                                                    f"{case.gpus} ran on this node; the node of rank 0 reports")
            item.user_properties.append(("dlperf_verdict", "remote"))
            return
        except CaseError as exc:
            message = self.relabel(exc.message, case)
            record["attempts"].append({"throughput": None, "runs": exc.runs})
            record.update(verdict="error", message=message)
            item.user_properties.append(("dlperf_verdict", "error"))
            raise CaseFailed(message) from None
        finally:
            record["duration"] = time.monotonic() - started
            if "verdict" not in record:
                # Interrupted (Ctrl-C, SIGTERM) mid-case: the JSON and the report still say what happened.
                record.update(verdict="error", message=f"{case.id}: interrupted before the case finished")

        if self.options.data_only:
            self._data_only_verdict(item, record, attempts[-1])
            return
        last = attempts[-1]
        telemetry = last.telemetry()
        gate = self.utilization_gate(item, telemetry)
        failed = verdict.failed or (scale is not None and scale.failed) or (gate or {}).get("status") == "fail"
        compiled = compile_seconds(last)
        loader = last.data()
        ranks = last.ranks()
        expected = self.expected(item, spec.unit)
        mismatch = self.baseline.device_mismatch(last.device) if expected is not None else None
        notes = [f"compile {compiled:.1f} s, outside the measured windows"] if compiled is not None else []
        notes += last.warnings
        notes += [f"input: {data.describe(loader, spec.unit)}"] if loader is not None else []
        notes += [note for note in (last.straggler(ranks), mismatch) if note]
        parts = self._message_parts(case, spec.unit, verdict, scale, gate, attempts, notes)
        record.update(
            verdict=FAIL if failed else verdict.status, throughput_verdict=verdict.status,
            message="; ".join(parts),
            throughput=last.summary.median, stats=last.summary.to_dict(), difference=verdict.difference,
            device=last.device, ranks=ranks, scaling=scale.to_dict() if scale else None,
            flops=last.flops(case.gpus), telemetry=telemetry, data=loader, compile_seconds=compiled,
            gpu_utilization_gate=None if gate is None else {k: v for k, v in gate.items() if k != "message"},
            hardware_mismatch=mismatch,
            baseline=None if expected is None else {
                "throughput": expected.throughput, "tolerance": expected.tolerance,
                "source": expected.source, "unit": expected.unit},
        )
        self._record_properties(item, record)
        benchmark_json.add_case(self.config, record)
        if failed:
            raise CaseFailed(record["message"])

    def _message_parts(self, case: Case, unit: str, verdict: Verdict, scale: Scaling | None,
                       gate: dict[str, Any] | None, attempts: list[Attempt], notes: list[str]) -> list[str]:
        """The parts of a case's message, what failed first: throughput, scaling, utilization, then notes."""
        scale_failed = scale is not None and scale.failed
        parts = [verdict.message]
        if scale is not None:
            parts.append(scaling_message(case.id, scale, unit))
        elif case.gpus > 1:
            reason = self._reference_errors.get(case.with_gpus(1), "?")
            parts.append(f"no scaling figures: the 1-rank reference failed: {reason}")
        if gate is not None and gate["status"] != "pass":
            parts.append(gate["message"])
        if len(attempts) > 1:
            figures = ", ".join(f"{a.summary.median:.1f}" for a in attempts)
            if verdict.failed or scale_failed:
                parts.append(f"measured {len(attempts)} times: {figures} {unit}")
            else:
                parts.append(f"passed on re-measurement (earlier: {figures.rsplit(', ', 1)[0]} {unit})")
        parts.extend(notes)
        if scale_failed and not verdict.failed:
            parts[0], parts[1] = parts[1], parts[0]  # the scaling gate is what failed: lead with it
        elif gate is not None and gate["status"] == "fail" and not verdict.failed:
            parts.remove(gate["message"])
            parts.insert(0, gate["message"])
        return parts

    def _data_only_verdict(self, item: DlperfItem, record: dict[str, Any], attempt: Attempt) -> None:
        """``--dlperf-data-only``: the loader's figures, a data-only verdict, never a baseline judgement.

        ``throughput`` stays null, so the loader's figure can never be saved as a baseline,
        taken as a 1-rank scaling reference or judged; it lives in ``record["data"]``.
        """
        loader = attempt.data()
        expected = self.expected(item, attempt.unit)
        message = data.data_only_message(item.case.id, loader, attempt.unit,
                                         expected.throughput if expected is not None else None)
        record.update(verdict="data-only", message="; ".join([message, *attempt.warnings]), data=loader,
                      stats=attempt.summary.to_dict(), device=attempt.device, ranks=attempt.ranks(),
                      telemetry=attempt.telemetry())
        item.user_properties.extend([
            ("dlperf_verdict", "data-only"),
            ("dlperf_data_samples_per_second", round(loader["samples_per_second"], 3)),
            ("dlperf_data_mb_per_second", round(loader["megabytes_per_second"], 3)),
        ])

    @staticmethod
    def _record_properties(item: DlperfItem, record: dict[str, Any]) -> None:
        props = [("dlperf_verdict", record["verdict"]), ("dlperf_throughput", round(record["throughput"], 3)),
                 ("dlperf_unit", record["unit"]), ("dlperf_cv", round(record["stats"]["cv"], 5)),
                 ("dlperf_windows", record["stats"]["n"])]
        if record["baseline"]:
            props.append(("dlperf_baseline", record["baseline"]["throughput"]))
            props.append(("dlperf_difference_pct", round(100 * record["difference"], 2)))
        if record["scaling"]:
            props.append(("dlperf_speedup", round(record["scaling"]["speedup"], 4)))
            props.append(("dlperf_efficiency", round(record["scaling"]["efficiency"], 4)))
        if record.get("max_batch"):
            props.append(("dlperf_batch_size", record["max_batch"]["chosen"]))
            props.append(("dlperf_max_batch_trials", len(record["max_batch"]["trials"])))
        if record.get("compile_seconds") is not None:
            props.append(("dlperf_compile_seconds", round(record["compile_seconds"], 3)))
        flops = record.get("flops")
        if flops:
            props.append(("dlperf_tflops", float(f"{flops['tflops']:.6g}")))
            if flops["mfu"] is not None:
                props.append(("dlperf_mfu", float(f"{flops['mfu']:.6g}")))  # tiny on a CPU: 1e-4 of a peak
        summaries = report.telemetry_summaries(record)
        gpus = report.gpu_utilizations(summaries)
        if gpus:
            props.append(("dlperf_gpu_util_mean", round(sum(g[1] for g in gpus) / len(gpus), 2)))
        cpu = report.host_metric(summaries, "cpu_percent", "mean")
        if cpu is not None:
            props.append(("dlperf_cpu_util_mean", round(cpu, 2)))
        item.user_properties.extend(props)

    def record_skip(self, item: DlperfItem, reason: str) -> None:
        self.records.append({"id": item.case.id, "nodeid": item.nodeid, "case": item.case.to_dict(),
                             "verdict": "skipped", "message": reason, "unit": None, "throughput": None,
                             "stats": None, "baseline": None, "difference": None, "attempts": []})

    # -- reporting

    def pytest_report_teststatus(self, report, config):
        if report.when != "call" or not report.passed:
            return None
        verdict = dict(report.user_properties).get("dlperf_verdict")
        if verdict == IMPROVED:
            return "passed", "+", ("IMPROVED", {"green": True, "bold": True})
        if verdict == NO_BASELINE:
            return "passed", "?", ("PASSED (no baseline)", {"green": True})
        if verdict == "remote":
            return "passed", "r", ("PASSED (ranks only: rank 0 reports)", {"green": True})
        if verdict == "data-only":
            return "passed", "d", ("PASSED (data-only)", {"green": True})
        return None

    def pytest_sessionstart(self, session) -> None:
        if self.options.active:
            self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
        launch.kill_all_live()
        if not self.options.active:
            return
        self.environment = self._environment()
        document = self.results_document()
        if self.options.json_path:
            jsonio.dump(self.options.json_path, document, "results")
        if self.options.report_path:
            self._write_report(document)
        if self.options.plot_dir:
            self._write_plots(document)
        if self.options.save_baseline:
            self._save_baseline(exitstatus)

    def _write_plots(self, document: dict[str, Any]) -> None:
        """``--dlperf-plot``: the PNGs of the results document; the summary lists them and what was left out."""
        try:
            self.plot_files = plots.write_plots(document, Path(self.options.plot_dir), self.plot_notes)
        except OSError as exc:
            self.plot_notes.append(f"plots not written: {exc}")

    def _environment(self) -> dict[str, Any]:
        env = environment.collect(self.config.rootpath)
        devices = [r.get("device") for r in self.records if r.get("device")]
        env["device"] = devices[0] if devices else {"type": self.options.device if self.options.device != "auto"
                                                    else (self._device or "unknown")}
        return env

    def results_document(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "kind": "dlperf-results",
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "environment": self.environment,
            "options": self.options.to_dict(),
            "baseline": None if self.baseline is None else {
                "path": self.baseline.path, "source": self.baseline.source,
                "hardware": dict(self.baseline.hardware), "hardware_mismatch": self.hardware_mismatch()},
            "cases": self.records,
        }

    def _write_report(self, document: dict[str, Any]) -> None:
        """The Markdown report, from the same document as ``--dlperf-json``, with the runs' logs beside it."""
        written = markdown_report.write_report(document, self.options.report_path, search_dirs=(os.getcwd(),))
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        logs = f"; logs in {written.logs}" if written.logs else ""
        tr.write_line(f"dlperf: wrote the report {written.path}{logs}")
        if written.problem:
            tr.write_line(f"dlperf: {written.problem}; the report links the original log folders", yellow=True)

    def _save_baseline(self, exitstatus) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            if tr:
                tr.write_line(f"dlperf: session interrupted; {self.options.save_baseline} not written", red=True)
            return
        measured = [r for r in self.records if r.get("throughput") is not None]
        steps = {k: v for k, v in self.params_summary().items() if v is not None}
        document = baseline_mod.from_measurements(measured, self.environment,
                                                  tolerance=self.options.tolerance or baseline_mod.DEFAULT_TOLERANCE,
                                                  steps=steps)
        baseline_mod.save(self.options.save_baseline, document)
        if tr:
            tr.write_line(f"dlperf: saved {len(measured)} case(s) as a baseline to {self.options.save_baseline}")

    def hardware_mismatch(self) -> str | None:
        """The first judged case's note that the baseline was measured on another GPU model or device."""
        return next((r["hardware_mismatch"] for r in self.records if r.get("hardware_mismatch")), None)

    def params_summary(self) -> dict[str, int | None]:
        params = [r["parameters"] for r in self.records if r.get("parameters")]
        out: dict[str, int | None] = {}
        for key in DEFAULTS:
            values = {p[key] for p in params}
            out[key] = values.pop() if len(values) == 1 else None
        return out

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if not self.options.active or not self.records:
            return
        terminalreporter.write_sep("=", "dlperf summary")
        for line in report.summary_lines(self.records, self.baseline.path if self.baseline else None):
            terminalreporter.write_line(line)
        if self.hardware_mismatch():
            terminalreporter.write_line(f"dlperf: {self.hardware_mismatch()}", yellow=True)
        if self.options.plot_dir:
            names = ", ".join(p.name for p in self.plot_files) or "none"
            terminalreporter.write_line(f"dlperf: {len(self.plot_files)} plot(s) in "
                                        f"{Path(self.options.plot_dir).resolve()}: {names}")
            for note in self.plot_notes:
                terminalreporter.write_line(f"  {note}")
        if self._workdir is not None:
            terminalreporter.write_line(f"dlperf: worker logs in {self._workdir}")


def compile_seconds(attempt: Attempt) -> float | None:
    """The median compile time of the attempt's runs (``timing.compile_seconds``); None when not compiled."""
    import statistics

    seconds = [run["timing"]["compile_seconds"] for run in attempt.runs if "compile_seconds" in run["timing"]]
    return statistics.median(seconds) if seconds else None


def _sigterm_to_interrupt(signum, frame):
    launch.kill_all_live()
    raise KeyboardInterrupt("SIGTERM")

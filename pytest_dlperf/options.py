"""Options: every ``--dlperf-*`` option, its ini twin, parsing and validation, in one place.

:func:`add_options` declares them (``pytest_addoption``); :class:`Options` reads and checks
them once per session, before any case is collected.  A value that does not parse is an
:class:`~pytest_dlperf.cases.OptionError` naming the option, which the plugin turns into a
usage error.  The ini twin of ``--dlperf-foo-bar`` is ``dlperf_foo_bar`` in pytest's ini
file; the output paths (``--dlperf-json`` and the like) have none.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from .controller import batchsearch
from . import jsonio
from .baseline import STEP_DEFAULTS
from .cases import PRECISIONS, OptionError, parse_batch_sizes, parse_ints, parse_list, parse_precisions, parse_settings
from .gate.evidence import MAX_BANDWIDTH_DROP, MAX_CORE_DROP, MAX_INTERFERENCE
from .history.dashboard import LinkError, LinkPattern
from .history.store import redact
from .launch.launchers import LAUNCHERS, MALLOC_MODES
from .reporting import plots
from .gate.verdict import INCONCLUSIVE_POLICIES
from .worker import memory

DEVICES = ("auto", "cuda", "cpu")
#: Most runs of a case before it is inconclusive, where neither --dlperf-max-runs nor --dlperf-confirm says.
MAX_RUNS = 10
#: Step counts of a case when neither the command line nor the baseline gives them.
DEFAULTS = STEP_DEFAULTS
#: The options that name files or folders the session writes, checked before any case runs.
OUTPUTS = {"json": "json_path", "report": "report_path", "save-baseline": "save_baseline"}


def add_options(parser: pytest.Parser) -> None:
    """Every ``--dlperf-*`` option, each with its ini twin ``dlperf_*`` (none for the output paths)."""
    group = parser.getgroup("dlperf", "deep-learning training throughput (pytest-dlperf)")

    def option(name: str, help: str, *, ini_type: str | None = "string", **kwargs) -> None:
        dest = "dlperf_" + name.replace("-", "_")
        group.addoption(f"--dlperf-{name}", dest=dest, help=help, **kwargs)
        if ini_type is not None:
            parser.addini(dest, help=help.replace("%%", "%"), type=ini_type, default=None)

    option("baseline", "baseline JSON: its cases are collected and judged against it; or a folder of baselines, "
                       "one per machine class: the file whose hardware matches this machine.", metavar="PATH")
    option("baseline-record", "where a baseline folder's cases are recorded for a machine that no file of it "
                              "describes, which the next session on this machine gates against (default "
                              ".dlperf/baselines under the rootdir).", metavar="DIR")
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
    option("runs", "fresh worker processes each case runs before its first verdict; each run's figure is the "
                   "median of its windows, the case's the geometric mean of its runs' (default 1; a baseline "
                   "being saved measures 10 counted runs unless this says).", metavar="K")
    option("confirm", "deprecated: --dlperf-max-runs is --dlperf-runs + N (kept for old command lines).",
           metavar="N")
    option("max-runs", "most fresh runs of a case before its verdict is inconclusive: after each run the case is "
                       "decided (each way a one-sided test at 1%%), or measured again (default 10).", metavar="N")
    option("max-seconds", "time budget of a case's runs: no run starts that would end past it (default: none).",
           metavar="SECONDS")
    option("inconclusive", "which cases still undecided at the budget fail: pass (none: each is reported "
                           "INCONCLUSIVE, with what would decide it; default), below (those whose estimate is "
                           "below the threshold), fail (all).", metavar="POLICY")
    option("max-interference", "a run during whose windows other processes used more than this much CPU (percent "
                               "of one CPU, on a saturated machine; or any other process on the GPU) is busy: not "
                               "counted, and a second busy run in a row ends the case inconclusive (default 50; "
                               "off: never).", metavar="PERCENT")
    option("max-bandwidth-drop", "the verdict names the host's memory bandwidth where its runs' probe read this "
                                 "much (a fraction) above or below the baseline's, and outside the probe's own "
                                 "spread between the baseline's runs: a note, never a decision (default 0.1 for "
                                 "cases on the CPU, off on GPUs; off: never named).", metavar="FRACTION")
    option("max-core-drop", "likewise for the host's core speed (float32 products in numpy) (default 0.1 for cases "
                            "on the CPU, off on GPUs; off: never named).", metavar="FRACTION")
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
    option("malloc", "the workers' memory allocator: steady (default: glibc keeps what training frees for the "
                     "next step instead of handing it back, so no run pays page faults another does not) or "
                     "system (the environment's own settings, as a plain training script runs).", metavar="MODE")
    option("no-telemetry", "do not sample GPU (NVML) and host metrics during the measured windows.",
           action="store_true", default=None, ini_type="bool")
    option("data-dir", "the image folder (ImageFolder layout: DIR/CLASS/IMAGE.jpg) that data=torchvision and "
                       "data=dali cases read.", metavar="DIR")
    option("convergence-data", "the data set of convergence cases (a baseline entry with a target): "
                               "DIR/train/CLASS/IMAGE and DIR/val/CLASS/IMAGE (`dlperf dataset --learnable` "
                               "writes one).", metavar="DIR")
    option("data-workers", "data loader workers (torchvision) or DALI threads per rank (default: the CPUs per "
                           "rank less one, at most 8).", metavar="N")
    option("history", "append every judged case of the session (figures, verdict, environment) to a history "
                      "store: sqlite:///PATH or a path (SQLite), or postgresql://USER@HOST/DB.", metavar="URL")
    option("baseline-from-history", "judge cases without a baseline entry against their last N sessions on this "
                                    "machine class in the --dlperf-history store.", metavar="N")
    option("history-gate", "fail the session when a case's newest figures in the --dlperf-history store start a "
                           "significant downward step, even within the tolerance.", action="store_true",
           default=None, ini_type="bool")
    option("history-html", "at the end of the session, after writing the --dlperf-history store, write the whole "
                           "store's history as a static site into DIR (as dlperf history URL --html DIR does): an "
                           "overview of every case and a page per case, opened from file://.", metavar="DIR",
           ini_type=None)
    option("history-html-link", "with --dlperf-history-html, link each night to what it kept: LABEL=PATTERN, a URL or "
                                "a path with placeholders {session}, {date}, {commit}, ... (repeatable; dlperf history "
                                "--help lists them), e.g. report=nights/{session}/report.md.", metavar="LABEL=PATTERN",
           action="append", ini_type="linelist")
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


def _data_dir_option(config: pytest.Config, name: str = "data_dir") -> str | None:
    """``--dlperf-data-dir`` (or another folder option) as an absolute path: relative to the current
    folder on the command line, to the ini file's folder in ``dlperf_data_dir`` (workers may run elsewhere)."""
    raw = config.getoption(f"dlperf_{name}")
    base = Path.cwd()
    if not raw:
        raw = config.getini(f"dlperf_{name}") or None
        if config.inipath is not None:
            base = config.inipath.parent
    return str((base / os.path.expanduser(str(raw))).resolve()) if raw else None


def xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers this session's tests are spread over (0: none, or no xdist)."""
    if getattr(config.option, "dist", "no") == "no":
        return 0
    return len(getattr(config.option, "tx", None) or ())


class Options:
    """The validated dlperf options of one session: the command line first, then the ini file.

    Raises :class:`~pytest_dlperf.cases.OptionError` naming the option and what it expects.
    """

    def __init__(self, config: pytest.Config):
        self.baseline_path = _option(config, "baseline")
        self.baseline_record = str(_option(config, "baseline-record") or config.rootpath / ".dlperf" / "baselines")
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
        runs = _int_option(config, "runs", 1)
        self.runs_given = runs is not None  # a baseline being saved measures SAVE_RUNS runs where it is not
        self.runs = runs or 1
        confirm = _int_option(config, "confirm", 0)
        max_runs = _int_option(config, "max-runs", 1)
        self.max_runs_given = max_runs is not None or confirm is not None
        if max_runs is not None and max_runs < self.runs:
            raise OptionError(f"--dlperf-max-runs: {max_runs} is less than --dlperf-runs {self.runs}; expected "
                              f"an integer >= {self.runs}")
        self.max_runs = max_runs or (self.runs + confirm if confirm is not None else max(self.runs, MAX_RUNS))
        self.confirm = self.max_runs - self.runs  # re-measurements allowed (what --dlperf-confirm was)
        self.max_seconds = _float_option(config, "max-seconds", low=0)
        self.inconclusive = str(_option(config, "inconclusive") or "pass")
        if self.inconclusive not in INCONCLUSIVE_POLICIES:
            raise OptionError(f"--dlperf-inconclusive: {self.inconclusive!r} is not one of "
                              f"{', '.join(INCONCLUSIVE_POLICIES)}")
        raw = _option(config, "max-interference")
        self.max_interference = (None if str(raw).strip().lower() == "off" else
                                 _float_option(config, "max-interference", low=0)) if raw is not None \
            else MAX_INTERFERENCE
        raw = _option(config, "max-bandwidth-drop")
        # Not given: MAX_BANDWIDTH_DROP for cases on the CPU, off on GPUs (bandwidth_drop()).
        self.bandwidth_drop_given = raw is not None
        self.max_bandwidth_drop = (None if str(raw).strip().lower() == "off" else
                                   _float_option(config, "max-bandwidth-drop", low=0, high=1)) if raw is not None \
            else MAX_BANDWIDTH_DROP
        raw = _option(config, "max-core-drop")
        self.core_drop_given = raw is not None
        self.max_core_drop = (None if str(raw).strip().lower() == "off" else
                              _float_option(config, "max-core-drop", low=0, high=1)) if raw is not None \
            else MAX_CORE_DROP
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
            self.confirm, self.max_runs = 0, self.runs
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
        self.malloc = str(_option(config, "malloc") or "steady")
        if self.malloc not in MALLOC_MODES:
            raise OptionError(f"--dlperf-malloc: {self.malloc!r} is not one of {', '.join(MALLOC_MODES)}")
        self.data_dir = _data_dir_option(config)
        self.convergence_data = _data_dir_option(config, "convergence_data")
        self.data_workers = _int_option(config, "data-workers", 0)
        self.data_only = bool(_option(config, "data-only"))
        self.max_batch_trials = _int_option(config, "max-batch-trials", 1) or batchsearch.MAX_TRIALS
        self.history_url = _option(config, "history")
        self.baseline_from_history = _int_option(config, "baseline-from-history", 2)
        self.history_gate = bool(_option(config, "history-gate"))
        self.history_html = _option(config, "history-html")
        self.history_html_links = [str(text) for text in _option(config, "history-html-link") or []]
        for text in self.history_html_links:
            try:
                LinkPattern.parse(text, "--dlperf-history-html-link")
            except LinkError as exc:
                raise OptionError(str(exc)) from None
        raw_memory = _option(config, "max-memory")
        try:
            self.max_memory = None if raw_memory is None else memory.parse_size("--dlperf-max-memory", raw_memory)
        except ValueError as exc:
            raise OptionError(str(exc)) from None

    def check_not_distributed(self, config: pytest.Config) -> None:
        """Cases (an active session's: the caller checks) never run under pytest-xdist: cases side by side would
        measure each other, and an xdist worker collects no case (its controller judges none), so the session
        would silently run none."""
        workers = xdist_workers(config)
        if workers:
            raise OptionError(f"-n/--dist (pytest-xdist): this session spreads its tests over {workers} worker "
                              "processes, but pytest-dlperf cases measure throughput and must run one at a time "
                              "in this process; expected no distribution: add -n 0 (or -p no:xdist) to this "
                              "command line")

    def check_outputs(self) -> None:
        """Every output path can be written: checked before the first case, not after the last."""
        paths = [(f"--dlperf-{name}", getattr(self, attr), False) for name, attr in OUTPUTS.items()]
        paths.append(("--dlperf-plot", self.plot_dir, True))
        paths.append(("--dlperf-history-html", self.history_html, True))
        for option, path, folder in paths:
            if path:
                try:
                    jsonio.check_writable(path, folder=folder)
                except OSError as exc:
                    raise OptionError(f"{option}: {exc}") from None

    @property
    def active(self) -> bool:
        return bool(self.baseline_path or self.models)

    def bandwidth_drop(self, device: str) -> float | None:
        """``--dlperf-max-bandwidth-drop`` for cases on ``device``: as given, else MAX_BANDWIDTH_DROP on the
        CPU and off on GPUs (their training hardly uses the host's memory bandwidth)."""
        if self.bandwidth_drop_given or device == "cpu":
            return self.max_bandwidth_drop
        return None

    def core_drop(self, device: str) -> float | None:
        """``--dlperf-max-core-drop`` for cases on ``device``: as given, else MAX_CORE_DROP on the CPU and off on
        GPUs (a GPU case's host threads mostly wait for the GPU)."""
        if self.core_drop_given or device == "cpu":
            return self.max_core_drop
        return None

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if v not in (None, [])}
        if self.history_url:
            out["history_url"] = redact(str(self.history_url))  # never a password in the results
        return out


class _Recorder:
    """Stands in for pytest's parser to read every option :func:`add_options` declares, in order."""

    def __init__(self):
        self.options: list[tuple[str, str, str | None, str | None]] = []  # (flag, help, metavar, ini name)
        self.inis: set[str] = set()

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, flag: str, dest: str, help: str, **kwargs) -> None:
        self.options.append((flag, help.replace("%%", "%"), kwargs.get("metavar"), dest))

    def addini(self, name: str, **kwargs) -> None:
        self.inis.add(name)


def option_reference() -> str:
    """Every ``--dlperf-*`` option as a Markdown table (``dlperf options`` prints it; docs/options.md is it):
    the option, its ini twin (``[pytest]`` / ``[tool.pytest.ini_options]``) where it has one, and its help."""
    recorder = _Recorder()
    add_options(recorder)  # type: ignore[arg-type]
    lines = ["# Options", "",
             "Every option of pytest-dlperf, as `pytest --help` lists them (this page is what `dlperf options` "
             "prints; a test keeps it so). Each option but the output paths has an ini twin, for `pytest.ini` or "
             "`[tool.pytest.ini_options]`; a command-line option wins over its ini twin.", "",
             "| option | ini | meaning |", "|---|---|---|"]
    for flag, help_text, metavar, dest in recorder.options:
        shown = f"`{flag} {metavar}`" if metavar else f"`{flag}`"
        ini = f"`{dest}`" if dest in recorder.inis else "-"
        lines.append(f"| {shown} | {ini} | {help_text.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"

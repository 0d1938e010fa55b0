"""Options: every ``--dlperf-*`` option and its ini twin, declared once (:data:`OPTIONS`).

Each :class:`Option` of the table says its name, help, metavar and how its value is read (a
:data:`~.readers.Reader`, :mod:`.readers`); from the table come pytest's options and ini names
(:func:`add_options`), the parsed :class:`Options` of a session (one attribute per option, read and
checked once, before any case is collected) and the Markdown reference (:func:`option_reference`,
``dlperf options``, docs/options.md).  A value that does not read is an :class:`~pytest_dlperf.cases.OptionError`
naming the option, which the plugin turns into a usage error.  The ini twin of ``--dlperf-foo-bar``
is ``dlperf_foo_bar`` in pytest's ini file; the output paths (``--dlperf-json`` and the like) have none.

An option with ``cli`` False is an ini setting only (``dlperf_foo_bar`` in the ini file, or ``-o
dlperf_foo_bar=VALUE``): a knob set once per project.  Its old flag, and the flags of :data:`REMOVED`, stay
hidden in pytest's parser, and only ever give a one-line usage error saying what to use instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from .. import jsonio
from ..baseline.named import machine_name
from ..cases import MAX_BATCH_TRIALS, PRECISIONS, OptionError, parse_batch_sizes, parse_ints, parse_list, parse_precisions, parse_settings
from ..commands.trust import Trust, project_root
from ..gate.figures import MAX_BANDWIDTH_DROP, MAX_CORE_DROP, MAX_INTERFERENCE
from ..gate.policy import INCONCLUSIVE_NIGHTS, INCONCLUSIVE_POLICIES
from ..gate.sequential import SAVE_SPAN
from ..launch.forkserver import STARTS
from ..launch.launchers import LAUNCHERS, MALLOC_MODES
from ..worker.distributed import BACKENDS, choose_backend
from ..results.host_bound import HOST_BOUND_BELOW
from . import reference
from .entries import Option, Removed
from .readers import (Given, choice, cpu_threads, endpoint, folder, integer, listed, memory_size, number,
                      plot_folder, record_folder, switch, text, trusted_paths, words)

DEVICES = ("auto", "cuda", "cpu")
#: When --dlperf-profile profiles a case in one extra run.
PROFILES = ("off", "on", "failing")
#: Most runs of a case before it is inconclusive, where --dlperf-max-runs does not say.
MAX_RUNS = 10
#: The options that name files or folders the session writes, checked before any case runs (``folder``: a folder).
OUTPUTS = {"json": "json_path", "report": "report_path", "save-baseline": "save_baseline"}


def _switch(name: str, help: str, cli: bool = True) -> Option:
    return Option(name, help, read=switch, ini="bool", action="store_true", cli=cli)


#: Every option, in the order ``pytest --help`` and docs/options.md list them.
OPTIONS = (
    Option("baseline", "baseline JSON: its cases are collected and judged against it; or a folder of baselines, "
                       "one per machine class: the file whose hardware matches this machine.", "PATH",
           field="baseline_path"),
    Option("trust-commands", "a baseline file, or a folder of them, outside the rootdir whose command objects may "
                             "run (repeatable): a baseline's command is code, and runs only from the rootdir's files "
                             "or these (docs/baselines.md).", "PATH", trusted_paths, ini="linelist",
           action="append"),
    Option("baseline-record", "where a baseline folder's cases are recorded for a machine that no file of it "
                              "describes, which the next session on this machine gates against (default "
                              ".dlperf/baselines under the rootdir).", "DIR", record_folder, cli=False),
    Option("machine", "name this machine class (as asv's machine.json): a baseline folder's file saying \"machine\": "
                      "NAME (else NAME.json) judges; history rows carry NAME (default: from the hardware).", "NAME",
           machine_name),
    Option("model", "models for cases without a baseline entry (comma list).", "NAMES", listed(parse_list),
           action="append", field="models"),
    Option("precision", f"precisions for matrix cases: {', '.join(PRECISIONS)} (comma list; default fp32).", "LIST",
           listed(parse_precisions), action="append", field="precisions"),
    Option("batch-size", "per-device batch sizes for matrix cases (comma list; default: the model's); max: the "
                         "largest that trains without running out of memory.", "LIST", listed(parse_batch_sizes),
           action="append", field="batch_sizes"),
    Option("gpus", "GPU counts (ranks) for matrix cases (comma list; default 1).", "LIST", listed(parse_ints),
           action="append"),
    Option("set", "a setting of matrix cases, KEY=VALUE (repeatable): seq_len=512, data=torchvision, "
                  "channels_last=false, compile=true, image_size=160.", "KEY=VALUE", listed(parse_settings),
           action="append", field="settings"),
    Option("device", "where cases run: auto (CUDA when available), cuda or cpu.", "DEVICE", choice(DEVICES, "auto")),
    Option("launcher", f"how a case's ranks start: {', '.join(LAUNCHERS)} (default local: torchrun on this node for "
                       "N > 1).", "NAME", choice(LAUNCHERS, "local")),
    Option("launcher-args", "extra arguments for srun / mpirun / torchrun (one string, split like a shell).", "ARGS",
           words),
    Option("nnodes", "nodes of a torchrun job across nodes (--dlperf-launcher torchrun; default 1).", "N",
           integer(1, 1)),
    Option("rdzv-endpoint", "HOST:PORT of the c10d rendezvous of a torchrun job across nodes.", "HOST:PORT", endpoint),
    Option("rdzv-timeout", "seconds a torchrun job across nodes waits for all nodes to join (default 120).", "SECONDS",
           number(0, default=120.0), cli=False),
    Option("node-rank", "this node's rank in a torchrun job (default: the first of DLPERF_NODE_RANK, SLURM_NODEID, "
                        "OMPI_COMM_WORLD_RANK and NODE_RANK that is set, else 0).", "N", integer(0), cli=False),
    Option("dist-backend", "the process group of multi-rank cases: auto (NCCL on GPUs, gloo on CPUs), nccl or gloo.",
           "NAME", choice(BACKENDS, "auto"), cli=False),
    _switch("share-gpus", "run a case's ranks on the visible GPUs modulo their count (rank r on GPU r mod N) over "
                          "gloo, so that a gpu2 case runs its multi-rank path on one GPU: its throughput and scaling "
                          "figures measure no multi-GPU machine (the results say so; not gated)."),
    Option("min-efficiency", "least scaling efficiency (speedup / ranks) of multi-rank cases when the baseline sets "
                             "none, as a fraction (default: not gated).", "FRACTION", number(0, 1.5), cli=False),
    Option("min-gpu-utilization", "least mean GPU utilization over the measured windows, as a fraction (0.8: 80%%), "
                                  "when the baseline sets none (default: not gated; never gated where GPU telemetry is "
                                  "unavailable).", "FRACTION", number(0, 1, high_inclusive=True), cli=False),
    Option("warmup-steps", "steps before measuring (default 20; a baseline may set it).", "N", integer(0)),
    Option("steps", "steps per measured window (default 100; a baseline may set it).", "N", integer(1)),
    Option("repeats", "measured windows per run (default 5; a baseline may set it).", "N", integer(1), cli=False),
    Option("runs", "fresh worker processes each case runs before its first verdict; each run's figure is the median "
                   "of its windows, the case's the geometric mean of its runs' (default 1; a baseline being saved "
                   "measures 10 counted runs unless this says).", "K", integer(1)),
    Option("max-runs", "most fresh runs of a case before its verdict is inconclusive: after each run the case is "
                       "decided (each way a one-sided test at 1%%), or measured again (default 10; A/B pairs: 30).", "N",
           integer(1)),
    Option("inconclusive", "which cases still undecided at the budget fail: pass (none: each is reported INCONCLUSIVE, "
                           "with what would decide it; default), below (those whose estimate is below the threshold), "
                           "fail (all).", "POLICY", choice(INCONCLUSIVE_POLICIES, "pass")),
    _switch("bisect-exit", "end the session with the exit status git bisect run reads: 0 when every judged case "
                           "passed, 1 when one failed, 125 (skip this commit) when one is inconclusive (busy "
                           "included), errored or has no baseline entry (docs/triage.md).", cli=False),
    Option("max-interference", "a run during whose windows other processes used more than this much CPU (percent of "
                               "one CPU, on a saturated machine; or any other process on the GPU) is busy: not "
                               "counted, and a second busy run in a row ends the case inconclusive (default 50; off: "
                               "never).", "PERCENT", number(0, default=MAX_INTERFERENCE, off=True), cli=False),
    Option("timeout", "seconds a worker may run before its process group is killed (default: adapts to the measured "
                      "step time).", "SECONDS", number(0), cli=False),
    Option("tolerance", "relative tolerance when the baseline gives none, as a fraction (default 0.05).", "FRACTION",
           number(0, 1)),
    _switch("require-baseline", "fail cases that have no baseline entry.", cli=False),
    _switch("allow-missing", "in a session that gates (a baseline, --dlperf-baseline-from-history, --dlperf-against), "
                             "skip the selected cases that cannot be measured here; without it the session stops "
                             "before any case runs, naming each and why, and under CI a session that judged nothing "
                             "fails."),
    Option("save-baseline", "write the measured medians as a baseline to PATH (atomically).", "PATH", ini=None),
    Option("save-span", "a baseline being saved starts each case's counted runs over at least this many seconds "
                        "(waiting between runs that end sooner), so that its figure and spread sample the host over "
                        "time, not one moment (default 60; off: as fast as they run).", "SECONDS",
           number(0, default=SAVE_SPAN, off=True), cli=False),
    Option("json", "write every case's windows, statistics, verdict and environment to PATH.", "PATH", ini=None,
           field="json_path"),
    Option("report", "write a Markdown report to PATH (environment, method, throughput and speedup tables, baseline "
                     "comparison, telemetry), with each run's logs copied to <stem>-logs/ beside it.", "PATH", ini=None,
           field="report_path"),
    Option("plot", "write PNG plots to DIR: throughput vs GPUs per model and precision, measured vs baseline per unit "
                   "(needs the plot extra: matplotlib).", "DIR", plot_folder, field="plot_dir"),
    Option("log-dir", "keep each worker's spec, logs and result under DIR (default: pytest's basetemp).", "DIR"),
    Option("peak-tflops", "peak TFLOP/s of one device, for MFU: overrides the datasheet table (and gives CPU cases and "
                          "unlisted GPUs an MFU).", "TFLOPS", number(0), cli=False),
    Option("max-memory", "cap the memory each worker's training may add, e.g. 2GiB or 1500MB: the CPU's address space "
                         "beyond the framework's own, or a CUDA device's memory (batch size max on the CPU needs it).",
           "SIZE", memory_size),
    Option("max-batch-trials", f"most short trial runs of one batch size max search (default {MAX_BATCH_TRIALS}).", "N",
           integer(1, MAX_BATCH_TRIALS), cli=False),
    Option("malloc", "the workers' memory allocator: steady (default: glibc keeps what training frees for the next "
                     "step, so no run pays page faults another does not) or system (the environment's own).", "MODE",
           choice(MALLOC_MODES, "steady"), cli=False),
    Option("cpu-threads", "intra-op threads of each CPU rank (OMP_NUM_THREADS): N, or cores (this node's CPUs shared "
                          "between its ranks). Default: the baseline entry's cpu_threads, else OMP_NUM_THREADS, else "
                          "1.", "N|cores", cpu_threads, cli=False),
    Option("no-telemetry", "do not sample GPU (NVML) and host metrics during the measured windows.", read=switch,
           ini="bool", action="store_true", cli=False),
    Option("start", "how each run's worker process starts: forked (from the fork server), fresh (an interpreter of "
                    "its own, as NVIDIA's scripts start: the reference where the host sets a GPU step's pace) or auto "
                    "(default: forked on the CPU, fresh on GPUs; docs/gpu.md).",
           "MODE", choice(STARTS, "auto"), cli=False),
    Option("host-bound-below", "a GPU case whose GPUs were busy (NVML's mean utilization) less than this fraction "
                               "of the time is host-bound: its figure depends on the host's CPU (default 0.9).",
           "FRACTION",
           number(0, 1, high_inclusive=True, default=HOST_BOUND_BELOW), cli=False),
    Option("data-dir", "the image folder (ImageFolder layout: DIR/CLASS/IMAGE.jpg) that data=torchvision and "
                       "data=dali cases read.", "DIR", folder),
    Option("convergence-data", "the data set of convergence cases (a baseline entry with a target): "
                               "DIR/train/CLASS/IMAGE and DIR/val/CLASS/IMAGE (`dlperf dataset --learnable` writes "
                               "one).", "DIR", folder),
    Option("data-workers", "data loader workers (torchvision) or DALI threads per rank (default: the CPUs per rank "
                           "less one, at most 8).", "N", integer(0), cli=False),
    Option("history", "append every judged case of the session (figures, verdict, environment) to a history store: "
                      "sqlite:///PATH or a path (SQLite), or postgresql://USER@HOST/DB.", "URL", field="history_url"),
    Option("baseline-from-history", "judge cases without a baseline entry against their last N sessions on this "
                                    "machine class in the --dlperf-history store.", "N", integer(2)),
    Option("inconclusive-nights", "with --dlperf-history, a case inconclusive on this many sessions in a row, this "
                                  "one included, fails, saying so, unless those sessions' runs together pass "
                                  "(default 3).", "N",
           integer(1, default=INCONCLUSIVE_NIGHTS), cli=False),
    _switch("history-gate", "fail the session when a case's newest figures in the --dlperf-history store start a "
                            "significant downward step, even within the tolerance."),
    Option("against", "an A/B session: every throughput case runs in this environment and in REF, in interleaved "
                      "pairs of fresh runs, judged on their ratios. REF: another Python interpreter (a venv's), a "
                      "command that starts one ('docker run --rm IMAGE python'), a git revision, or last-good: the "
                      "commit of the last night that passed here in --dlperf-history (docs/ab.md).", "REF"),
    Option("against-seed", "the seed of an A/B session's pair orders (default: drawn, and recorded in the results).",
           "N", integer(0), cli=False),
    Option("profile", "one extra run of a case under torch.profiler, never counted: its top operators in the results, "
                      "its Chrome trace in the run's folder (dlperf explain compares two). on: every measured case; "
                      "failing: a failing one (default off).", "WHEN", choice(PROFILES, "off")),
    _switch("data-only", "time each case's data loader alone, without a model: samples/s and MB/s of image files "
                         "read; the cases pass with a data-only verdict."),
)

#: The options that were removed, each with what replaced it (their flags and ini twins give a usage error).
REMOVED = (
    Removed("confirm", "give --dlperf-max-runs N, the most runs of a case (--dlperf-confirm N was --dlperf-max-runs "
                       "RUNS+N)", "N"),
    Removed("no-fork-server", "give -o dlperf_start=fresh (or dlperf_start = fresh in pytest.ini)",
            action="store_true", ini="bool"),
    Removed("history-html", "write the site with dlperf history URL --html DIR after the session", "DIR", ini=None),
    Removed("max-seconds", "the budget is in runs, never time: give --dlperf-max-runs N", "SECONDS"),
    Removed("history-html-link", "give dlperf history URL --html DIR --link LABEL=PATTERN after the session",
            "LABEL=PATTERN", action="append", ini="linelist"),
)


def add_options(parser: pytest.Parser) -> None:
    """Every option of :data:`OPTIONS` for ``pytest_addoption``, each with its ini twin ``dlperf_*`` (none for the
    output paths).  The flags of ini settings and of :data:`REMOVED` are hidden: they only say what to use."""
    group = parser.getgroup("dlperf", "deep-learning training throughput (pytest-dlperf)")
    for option in (*OPTIONS, *REMOVED):
        kwargs: dict[str, Any] = {"action": option.action} if option.action else {}
        if option.metavar:
            kwargs["metavar"] = option.metavar
        if option.action == "store_true":
            kwargs["default"] = None
        shown = isinstance(option, Option) and option.cli
        group.addoption(option.flag, dest=option.dest, help=option.help if shown else argparse.SUPPRESS, **kwargs)
        if option.ini is not None:
            help_text = option.help if isinstance(option, Option) else f"removed: {option.replacement}"
            parser.addini(option.dest, help=help_text.replace("%%", "%"), type=option.ini, default=None)


def check_retired(config: pytest.Config) -> None:
    """Raise :class:`OptionError` in one line where a removed option, or the old flag of an ini setting, is used."""
    for removed in REMOVED:
        if config.getoption(removed.dest) not in (None, []):
            raise OptionError(removed.refusal(removed.flag))
        if removed.ini is not None and ini_value(config, removed.dest) is not None:
            raise OptionError(removed.refusal(f"{removed.dest} (ini)"))
    for option in OPTIONS:
        if not option.cli and (value := config.getoption(option.dest)) not in (None, []):
            raise OptionError(option.refusal(value))


def ini_value(config: pytest.Config, name: str) -> Any:
    """An ini setting's value (from the ini file or ``-o``); None where it is not set."""
    try:
        value = config.getini(name)
    except ValueError:
        return None
    return None if value in ([], "") else value


def given(config: pytest.Config, option: Option, root: Path | None = None) -> Given:
    """An option's value: the command line first, then the ini file (``[tool.pytest.ini_options] dlperf_...``, or
    ``-o dlperf_...=VALUE``); an ini setting's from the ini file alone (its old flag: :func:`check_retired`).
    ``root``: the project's rootdir (:func:`~pytest_dlperf.commands.trust.project_root`; default pytest's)."""
    value, base = config.getoption(option.dest) if option.cli else None, Path.cwd()
    if (value is None or value == []) and option.ini is not None:
        value = ini_value(config, option.dest)
        if config.inipath is not None:
            base = config.inipath.parent
    if value == [] or value == "":
        value = None
    return Given(option.label, value, base, root or Path(config.rootpath))


def xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers this session's tests are spread over (0: none, or no xdist)."""
    if getattr(config.option, "dist", "no") == "no":
        return 0
    return len(getattr(config.option, "tx", None) or ())



def probe_drop(drop: float, device: str) -> float | None:
    """A host probe's drop (:data:`~pytest_dlperf.gate.figures.MAX_BANDWIDTH_DROP`, ``MAX_CORE_DROP``) for cases on
    ``device``: ``drop`` on the CPU, off (None) on GPUs, whose throughput the host's memory and cores do not set."""
    return drop if device == "cpu" else None

class Options:
    """The validated dlperf options of one session, one attribute per :data:`OPTIONS` entry (its ``attribute``),
    and what follows from them (:meth:`settle`).  Raises :class:`~pytest_dlperf.cases.OptionError` naming the
    option and what it expects."""

    def __init__(self, config: pytest.Config):
        # The rootdir as the test paths set it: pytest's own may lie above an outside --dlperf-baseline PATH.
        root = project_root(config)
        check_retired(config)
        raw = {option.name: given(config, option, root) for option in OPTIONS}
        for option in OPTIONS:
            setattr(self, option.attribute, option.read(raw[option.name]))
        # Whose baselines' commands run: the rootdir's and --dlperf-trust-commands' (pytest_dlperf.commands.trust).
        self.trust = Trust.of(root, self.trust_commands)
        self.settle({name: g.value is not None for name, g in raw.items()})

    def settle(self, was_given: dict[str, bool]) -> None:
        """What the options' values mean together: the run budget, what was given, the checks across options."""
        self.runs_given = was_given["runs"]  # a baseline being saved measures SAVE_RUNS runs where it is not
        self.runs = self.runs or 1
        self.max_runs_given = self.max_runs is not None
        if self.max_runs is not None and self.max_runs < self.runs:
            raise OptionError(f"--dlperf-max-runs: {self.max_runs} is less than --dlperf-runs {self.runs}; expected "
                              f"an integer >= {self.runs}")
        self.max_runs = self.max_runs or max(self.runs, MAX_RUNS)
        if self.nnodes > 1 and self.launcher == "torchrun":
            # Only the node of rank 0 judges: a re-measurement there alone would leave the
            # other nodes waiting at a rendezvous that never comes.
            self.max_runs = self.runs
        if self.share_gpus:
            try:
                choose_backend("cuda", self.dist_backend, shared=True)
            except ValueError as exc:
                raise OptionError(str(exc)) from None
        if self.against and self.save_baseline:
            raise OptionError("--dlperf-against: an A/B session judges two environments against each other, and "
                              "saves no baseline; expected --dlperf-save-baseline in a session of its own")
        if self.nnodes > 1 and self.launcher != "torchrun":
            raise OptionError("--dlperf-nnodes: jobs across nodes need --dlperf-launcher torchrun "
                              "(slurm and mpi take their nodes from the allocation or the hostfile)")

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
        for option, path, is_folder in paths:
            if path:
                try:
                    jsonio.check_writable(path, folder=is_folder)
                except OSError as exc:
                    raise OptionError(f"{option}: {exc}") from None

    @property
    def active(self) -> bool:
        return bool(self.baseline_path or self.models)

    # What removed options were, derived, for the code that still reads them (REMOVED says what replaced them).
    @property
    def no_fork_server(self) -> bool:
        """Every worker a fresh interpreter: ``dlperf_start = fresh``."""
        return self.start == "fresh"

    @property
    def history_html(self) -> str | None:
        """A session writes no history site: ``dlperf history URL --html DIR`` does."""
        return None

    @property
    def history_html_links(self) -> list[str]:
        return []

    def bandwidth_drop(self, device: str) -> float | None:
        """The memory probe's drop for cases on ``device``: MAX_BANDWIDTH_DROP on the CPU, off on GPUs."""
        return probe_drop(MAX_BANDWIDTH_DROP, device)

    def core_drop(self, device: str) -> float | None:
        """The core probe's drop for cases on ``device``: MAX_CORE_DROP on the CPU, off on GPUs."""
        return probe_drop(MAX_CORE_DROP, device)

    def to_dict(self) -> dict[str, Any]:
        """The options as the results document keeps them: those that have a value, never a password."""
        out = {k: v for k, v in vars(self).items() if v not in (None, []) and k != "trust"}
        if self.history_url:
            from ..history.store import redact

            out["history_url"] = redact(str(self.history_url))
        return out


def option_reference() -> str:
    """The Markdown reference of every setting (``dlperf options`` prints it; docs/options.md is it)."""
    return reference.markdown(OPTIONS, REMOVED)

"""A command case: someone else's training script, run as a case (``register_command``).

A :class:`CommandSpec` is registered under a name in the model registry, so a command case
is collected, selected, skipped and judged as a built-in case is (its id reads
``ngc-rn50-amp-bs256-gpu8``, its markers are the same).  It has no model for our worker to
build: the session measures it with :func:`pytest_dlperf.commands.measure.measure` instead
(:data:`pytest_dlperf.controller.runner.MEASURERS`), which runs the command through the launchers and reads
its log with a parser (:mod:`pytest_dlperf.commands.parsers`).

The command is a list of arguments with placeholders (``str.format`` fields):

=================  ==============================================================
``{batch_size}``   the per-device batch
``{global_batch}`` per-device batch x GPUs
``{precision}``    the case's precision (``amp``)
``{precision_args}`` an argument of its own: replaced by the precision's arguments
``{gpus}``, ``{nproc}`` the ranks of the case
``{steps}``        steps the script must run: warm-up + steps x repeats (+ ``unlogged_steps``)
``{warmup_steps}``, ``{window_steps}``, ``{repeats}`` the case's step counts
``{data_dir}``     ``--dlperf-data-dir`` ("" when not given)
``{run_dir}``      the run's own folder (logs, a report file)
``{python}``       this Python interpreter
``{seed}``         the run's index (0, 1, ...): a seed of its own for each run of a time-to-train case
``{<setting>}``    any of the command's ``defaults`` (or the case's settings)
=================  ==============================================================
"""

from __future__ import annotations

import dataclasses
import os
import string
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..models import UNITS, ModelSpec, registry
from ..models.validation import check_choice, check_mapping

#: Placeholders every command may use (besides its settings).
PLACEHOLDERS = ("batch_size", "global_batch", "precision", "precision_args", "gpus", "nproc", "steps",
                "warmup_steps", "window_steps", "repeats", "data_dir", "run_dir", "python", "seed")
#: How the figures in a log relate to the job: the whole job's, or each rank's own.
SCOPES = ("global", "rank")
#: Who starts the ranks: the session's launcher (one copy of the command per rank), or the command
#: itself (``paddle.distributed.launch``, DeepLearningExamples' ``multiproc.py``: started once, given ``{gpus}``).
LAUNCHES = ("launcher", "command")
COMMAND_TASK = "command"


class CommandCaseError(TypeError):
    """A command case has no model: something asked it for one."""


def _no_model(*_args: Any) -> Any:
    raise CommandCaseError("a command case trains in its own script: it has no model, batch or loss for "
                           "pytest-dlperf's worker (pytest_dlperf.commands runs its command instead)")


@dataclasses.dataclass(frozen=True)
class CommandSpec(ModelSpec):
    """A registered training command: what to run, and how to read its log."""

    command: tuple[str, ...] = ()
    precision_args: Mapping[str, tuple[str, ...]] | None = None  # None: any precision, no arguments
    parser: str = "regex"
    parser_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    samples_per_step: int | str | None = None  # an integer, or a template ("{global_batch}"); None: the global batch
    scope: str = "global"
    cwd: str | None = None
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: A fixed limit of seconds per run, where dlperf_timeout gives none; without either the limit follows
    #: the log (:mod:`pytest_dlperf.commands.follow`).
    timeout: float | None = None
    startup_timeout: float | None = None  # seconds to the first logged step (None: the session's, 300)
    #: What a run's log is judged by (:data:`pytest_dlperf.commands.parsers.FIGURES`): its throughput, or its
    #: time to train (run_start to run_stop with status success; lower is better), a convergence case's.
    figure: str = "throughput"
    log_file: str | None = None  # a file the script writes its log to (template); None: its stdout and stderr
    launch: str = "launcher"  # one of LAUNCHES
    #: Steps the script runs that its log never shows, added to ``{steps}``: DeepLearningExamples' main.py
    #: logs an iteration when the next one starts, so its last one (``--prof N`` logs N - 1): 1.
    unlogged_steps: int = 0
    #: Stop the script (SIGINT to its process group, SIGKILL after the grace) once its log has the steps the case
    #: needs, as most scripts train on for epochs; False: it must end by itself (it writes its own report at the end).
    stop_once_measured: bool = True
    #: Why the command never runs: the line that refused it (a baseline's command from a file not trusted,
    #: :mod:`pytest_dlperf.commands.trust`); its cases are skipped with it. None: it runs.
    refused: str | None = None

    @property
    def times_training(self) -> bool:
        """Whether its cases are time-to-train cases (judged by the time to train, not the throughput)."""
        return self.figure == "time_to_train"

    def placeholders(self, case: Any, params: Any, run_dir: str, index: int = 0) -> dict[str, Any]:
        """The values of the placeholders for run ``index`` of ``case`` with ``params`` (a RunParams)."""
        values = {**self.settings(case.settings_dict), "batch_size": case.batch_size,
                  "global_batch": case.batch_size * case.gpus, "precision": case.precision, "gpus": case.gpus,
                  "nproc": case.gpus,
                  "steps": params.warmup_steps + params.steps * params.repeats + self.unlogged_steps,
                  "warmup_steps": params.warmup_steps, "window_steps": params.steps, "repeats": params.repeats,
                  # Absolute: the command runs in its own cwd, not the session's (a relative --dlperf-log-dir).
                  "data_dir": os.path.abspath(params.data_dir) if params.data_dir else "",
                  "run_dir": os.path.abspath(run_dir), "python": sys.executable, "seed": index}
        values["precision_args"] = " ".join(self.arguments_for(case.precision))
        return values

    def arguments_for(self, precision: str) -> tuple[str, ...]:
        if self.precision_args is None:
            return ()
        return tuple(self.precision_args[precision])

    def argv(self, case: Any, params: Any, run_dir: str, index: int = 0) -> list[str]:
        """The command line of run ``index``: placeholders filled, ``{precision_args}`` spread into its arguments
        (appended at the end when the command has no such argument)."""
        values = self.placeholders(case, params, run_dir, index)
        out: list[str] = []
        spread = False
        for arg in self.command:
            if arg == "{precision_args}":
                out.extend(self.arguments_for(case.precision))
                spread = True
            else:
                out.append(arg.format_map(values))
        if not spread:
            out.extend(self.arguments_for(case.precision))
        return out

    def fill(self, template: str | None, case: Any, params: Any, run_dir: str, index: int = 0) -> str | None:
        return None if template is None else template.format_map(self.placeholders(case, params, run_dir, index))

    def parser_settings(self, case: Any, params: Any, run_dir: str, index: int = 0) -> dict[str, Any]:
        """The parser's options for one run: a template among them (mllog's ``samples``) filled."""
        return {k: int(self.fill(v, case, params, run_dir, index)) if k == "samples" and isinstance(v, str) else v
                for k, v in self.parser_options.items()}

    def samples(self, case: Any, params: Any, run_dir: str) -> int:
        """Samples one logged step counts, for the whole job (the global batch unless the command says)."""
        if self.samples_per_step is None:
            return case.batch_size * case.gpus
        if isinstance(self.samples_per_step, int):
            return self.samples_per_step
        return int(self.fill(self.samples_per_step, case, params, run_dir))

    def check_precision(self, precision: str) -> str | None:
        """Why the command cannot run ``precision`` (it maps other precisions only), or None."""
        if self.precision_args is None or precision in self.precision_args:
            return None
        return (f"command {self.name!r} has no arguments for precision {precision!r}; its precisions: "
                f"{', '.join(self.precision_args)}")


def _fields(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]


def check_command(who: str, command: Any, known: Sequence[str]) -> tuple[str, ...]:
    """The command as a tuple of strings; ``ValueError`` naming ``who`` for a placeholder nobody fills."""
    if isinstance(command, str) or not isinstance(command, Sequence) or not command \
            or not all(isinstance(a, str) for a in command):
        raise ValueError(f"{who}: command must be a non-empty list of strings (the arguments), not {command!r}")
    for arg in command:
        try:
            names = _fields(arg)
        except ValueError as exc:
            raise ValueError(f"{who}: command argument {arg!r}: {exc}") from None
        for name in names:
            if name not in known:
                raise ValueError(f"{who}: command argument {arg!r}: unknown placeholder {{{name}}}; "
                                 f"known: {', '.join('{' + k + '}' for k in known)}")
    return tuple(command)


def _precision_args(who: str, precisions: Mapping[str, Sequence[str]] | None,
                    known: Sequence[str]) -> dict[str, tuple[str, ...]] | None:
    """Each precision's arguments (None: any precision, no arguments), checked."""
    if precisions is None:
        return None
    check_mapping(who, "precisions", precisions, "precisions to lists of arguments")
    from ..cases import PRECISIONS

    mapped = {}
    for precision, args in precisions.items():
        check_choice(who, "precisions key", precision, PRECISIONS)
        mapped[precision] = check_command(f"{who}: precisions.{precision}", list(args), known) if args else ()
    return mapped


def _check_counts(who: str, timeout: float | None, startup_timeout: float | None, unlogged_steps: int) -> None:
    for field, seconds in (("timeout", timeout), ("startup_timeout", startup_timeout)):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0):
            raise ValueError(f"{who}: {field} must be a positive number of seconds, not {seconds!r}")
    if isinstance(unlogged_steps, bool) or not isinstance(unlogged_steps, int) or unlogged_steps < 0:
        raise ValueError(f"{who}: unlogged_steps must be a non-negative integer (steps the script runs but never "
                         f"logs), not {unlogged_steps!r}")


def _unit_and_scope(who: str, parser: str, options: Mapping[str, Any], unit: str | None,
                    scope: str | None) -> tuple[str, str]:
    """The case's unit and scope: as given (checked), else the parser's defaults, else ``img/s`` and ``global``."""
    from . import parsers

    kind = parsers.PARSERS[parser]
    logged = kind.logged_unit(options)
    if unit is None:
        unit = logged or kind.default_unit or "img/s"
    check_choice(who, "unit", unit, UNITS)
    if logged is not None and unit != logged:
        raise ValueError(f"{who}: unit {unit!r}, but parser {parser!r} reads figures in {logged}: give unit "
                         f"{logged!r} (or leave unit out)")
    scope = scope or kind.default_scope or "global"
    check_choice(who, "scope", scope, SCOPES)
    return unit, scope


def build_spec(name: str, *, command: Sequence[str], parser: str = "regex", unit: str | None = None,
               batch_size: int = 32, precisions: Mapping[str, Sequence[str]] | None = None,
               samples_per_step: int | str | None = None, scope: str | None = None, cwd: str | None = None,
               env: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None,
               requires: Mapping[str, str] | None = None, timeout: float | None = None,
               log_file: str | None = None, launch: str = "launcher", description: str = "",
               source: str | None = None, unlogged_steps: int = 0, startup_timeout: float | None = None,
               figure: str = "throughput", stop_once_measured: bool = True, **parser_options: Any) -> CommandSpec:
    """A checked :class:`CommandSpec`; one ``ValueError`` naming the command and the field for a mistake.

    ``unit`` and ``scope`` left out: the parser's (:attr:`Parser.default_unit`, ``default_scope``), else
    ``img/s`` and ``global``; a unit other than the one the log states (:meth:`Parser.logged_unit`) is refused.
    """
    from . import parsers

    registry.check_name(name)
    who = f"command {name!r}"
    if defaults is not None:
        check_mapping(who, "defaults", defaults, "setting names to values")
    known = [*PLACEHOLDERS, *(defaults or {})]
    argv = check_command(who, command, known)
    options = parsers.check(who, parser, parser_options)
    unit, scope = _unit_and_scope(who, parser, options, unit, scope)
    check_choice(who, "launch", launch, LAUNCHES)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{who}: batch_size must be a positive integer, not {batch_size!r}")
    mapped = _precision_args(who, precisions, known)
    if isinstance(samples_per_step, bool) or not (samples_per_step is None or isinstance(samples_per_step, str)
                                                  or (isinstance(samples_per_step, int) and samples_per_step > 0)):
        raise ValueError(f"{who}: samples_per_step must be a positive integer or a template such as "
                         f"'{{global_batch}}', not {samples_per_step!r}")
    for field, template in (("samples_per_step", samples_per_step), ("log_file", log_file), ("cwd", cwd)):
        if isinstance(template, str):
            check_command(f"{who}: {field}", [template], known)
    if env is not None:
        check_mapping(who, "env", env, "variable names to strings")
        if not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"{who}: env values must be strings")
    _check_counts(who, timeout, startup_timeout, unlogged_steps)
    if not isinstance(stop_once_measured, bool):
        raise ValueError(f"{who}: stop_once_measured must be true or false, not {stop_once_measured!r}")
    samples = options.get("samples")
    if isinstance(samples, str):
        check_command(f"{who}: samples", [samples], known)
    elif samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 1):
        raise ValueError(f"{who}: samples must be a positive integer or a template such as '{{global_batch}}', "
                         f"not {samples!r}")
    problem = parsers.figure_problem(parser, figure, options)
    if problem:
        raise ValueError(f"{who}: figure {figure!r}: {problem}")
    return CommandSpec(name=name, factory=_no_model, make_batch=_no_model, loss=_no_model, unit=unit,
                       batch_size=batch_size, defaults=dict(defaults or {}), requires=dict(requires or {}),
                       description=description or f"command: {' '.join(argv)}", source=source,
                       task=COMMAND_TASK, command=argv, precision_args=mapped, parser=parser,
                       parser_options=options, samples_per_step=samples_per_step, scope=scope, cwd=cwd,
                       env=dict(env or {}), timeout=timeout, log_file=log_file, launch=launch,
                       unlogged_steps=unlogged_steps, startup_timeout=startup_timeout, figure=figure,
                       stop_once_measured=stop_once_measured)


def register_command(name: str, command: Sequence[str], **fields: Any) -> CommandSpec:
    """Register a training command as the case name ``name`` (from a conftest.py, as ``register_model``).

    ``fields``: ``parser`` (``dllogger``, ``mllog``, ``regex``, ``final``, a trainer's: ``torchtitan``,
    ``megatron``, ``timm``, ``tqdm``, ``lightning``, ``fairseq``, ``wlm``; or one of ``register_parser``) and its
    options (``key``, ``pattern``, ``step_time_unit``, ...), ``unit``, ``batch_size`` (the default per-device batch),
    ``precisions`` (precision -> arguments), ``samples_per_step``, ``scope``, ``cwd``,
    ``env``, ``defaults``, ``requires``, ``timeout``, ``startup_timeout``, ``log_file``, ``launch``,
    ``figure`` (``throughput``, or ``time_to_train``: a time-to-train case), ``unlogged_steps``,
    ``stop_once_measured`` (default true), ``description``.
    docs/commands.md is the contract.
    """
    caller = sys._getframe(1).f_code.co_filename  # the registering file, as register_model records it
    source = fields.pop("source", None) or os.path.abspath(caller)
    spec = build_spec(name, command=command, source=source, **fields)
    registry.add_spec(spec)
    return spec


def case_problem(case: Any, spec: ModelSpec) -> str | None:
    """Why ``case`` cannot be a case of the command ``spec`` (a precision it has no arguments for, a
    searched batch), or None; None for any other spec."""
    if not isinstance(spec, CommandSpec):
        return None
    if case.searches_batch:
        return f"command {spec.name!r}: batch size 'max' is searched with pytest-dlperf's worker, not a command"
    if case.converges:
        return (f"command {spec.name!r}: a target is for the built-in convergence cases; a command trains to its "
                "own target: register it with figure 'time_to_train' and give the entry a time_to_target")
    return spec.check_precision(case.precision)

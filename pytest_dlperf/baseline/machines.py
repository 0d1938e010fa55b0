"""Baseline folders: one baseline per machine class, and the one that describes this machine.

``--dlperf-baseline DIR`` names a folder of one suite's baselines (``baselines/cpu-smoke/``), one file per machine
class, each naming its machine in ``hardware``.  The same case can run ten times faster on one CPU than on another,
so a figure is only judged on the machine class it was measured on.  :func:`load` picks, in this order:

1. the folder's file whose hardware matches this machine (:meth:`Machine.matches`): on a GPU run the GPU model,
   whatever the count; on a CPU run the CPU model and, where the file gives ``cpu_count``, the number of logical
   CPUs and, where it gives ``cpu_isa``, the training-relevant instruction set (a VM's "AMD EPYC" may or may not
   do bf16 arithmetic) and, where it gives ``cpu_signature``, the CPU's family and model numbers (one name covers
   generations 5x apart); the most specific one when several match;
2. else the file this machine recorded for the folder in an earlier session, in the record
   folder (``dlperf_baseline_record``, default ``.dlperf/baselines``, under the suite's name);
3. else none: the cases of the folder's reference file (the only file, or the one that says
   ``"reference": true``) run unjudged, and at the end of the session their figures are
   recorded for this machine (:func:`record`), which step 2 then picks.

With ``--dlperf-machine NAME`` the user names the machine class instead (:mod:`.named`): the file that says
``"machine": NAME`` (or ``NAME.json``) of the folder, else of the record folder, else none (recorded as
``NAME.json``); hardware is not matched, and a picked file of other hardware is warned of in the line.

The folder's reference file always says which cases run: a picked file gives the figures of the cases it has, and
a recorded file gains the ones it lacks.  The session says which file it picked and why (:meth:`Selection.line`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import environment, jsonio
from ..cases import OptionError
from ..gate.tolerance import Noisy
from . import document as baseline_doc
from . import hardware, named
from .document import Baseline, Entry
from .measured import from_measurements

AGAIN, AGAIN_SECONDS = 4, 0.25  # probed: more readings of this host, this far apart, before a gap stands


@dataclasses.dataclass(frozen=True)
class Machine:
    """A machine class: a GPU model (and where known its board: memory, power, clock), or a CPU model and where known
    its logical CPUs, instruction set (:func:`~pytest_dlperf.environment.cpu_isa`), family, model and probes."""

    kind: str  # "cuda" or "cpu"
    model: str | None
    cpus: int | None = None
    isa: str | None = None  # "avx2 avx512f avx512_bf16"; None: not known
    signature: str | None = None  # "family 23 model 1"; None: not known
    #: A CPU run's host probes (:mod:`pytest_dlperf.worker.interference`): a file's, the median of its entries'; this
    #: host's, its best readings at the session's start (a neighbour only lowers a reading: :func:`probed`).
    core_gflops: float | None = None
    memory_gbs: float | None = None
    board: hardware.Board | None = None

    def describe(self) -> str:
        name = self.model or f"an unknown {'CPU' if self.kind == 'cpu' else 'GPU'}"
        if self.kind != "cpu":
            return name
        return ", ".join([name, *([f"{self.cpus} CPUs"] if self.cpus else []), *([self.isa] if self.isa else []),
                          *([self.signature] if self.signature else []),
                          *([f"core {self.core_gflops:.3g} GFLOP/s"] if self.core_gflops else [])])

    def words(self) -> list[str]:
        normalize = hardware.normalize_cpu_name if self.kind == "cpu" else hardware.normalize_gpu_name
        return normalize(self.model or "").split()

    def slug(self) -> str:
        """A file name for this machine's recorded baseline: ``intel-xeon-platinum-8481c-2cpus``."""
        text = re.sub(r"[^a-z0-9.+]+", "-", "-".join(self.words())).strip("-.") or f"unknown-{self.kind}"
        if self.kind != "cpu":
            return text
        text = f"{text}-{self.cpus}cpus" if self.cpus else text
        text = f"{text}-{re.sub(r'[^a-z0-9]+', '-', self.isa.split()[-1])}" if self.isa else text
        return f"{text}-{re.sub(r'[^a-z0-9]+', '', self.signature.replace('family', 'f').replace('model', 'm'))}" \
            if self.signature else text

    def matches(self, other: Machine | None) -> bool:
        """Whether a file measured on ``other`` describes this machine."""
        return other is not None and self.differs(other) is None

    def differs(self, other: Machine) -> str | None:
        """Why a file measured on ``other`` does not describe this machine, or None where it does."""
        if other.kind != self.kind:
            return "measured on the CPU" if other.kind == "cpu" else "measured on a GPU"
        if not (self.model and other.model):
            return "no model name"
        if self.kind != "cpu":
            if not hardware.same_gpu_model(self.model, other.model):
                return "another GPU model"
            return self.board.differs(other.board) if self.board and other.board else None
        if other.cpus is not None and self.cpus is not None and other.cpus != self.cpus:
            return "another number of CPUs"
        if other.isa is not None and self.isa is not None and set(other.isa.split()) != set(self.isa.split()):
            return "another instruction set"  # the same name, another CPU: bf16 at a tenth of the speed, say
        if other.signature is not None and self.signature is not None and other.signature != self.signature:
            return "another CPU family or model"  # the same name, another generation
        if not hardware.same_cpu_model(self.model, other.model):
            return "another CPU model"
        return self.probe_gap(other)

    def probe_gap(self, other: Machine) -> str | None:
        """Where ``other``'s host figures are beyond :data:`.hardware.PROBE_FACTOR` of this host's: which, how far.
        Never where both name the same CPU family and model (``signature``) and count: then the probes read a busy
        moment of one host or the other (beside two other test processes on 2 cores, this host's best of 7 memory
        probes read 3.2x below its own save's), not another machine."""
        if self.signature and self.signature == other.signature and self.cpus == other.cpus:
            return None
        for what, unit, mine, theirs in (("core speed", "GFLOP/s", self.core_gflops, other.core_gflops),
                                         ("memory bandwidth", "GB/s", self.memory_gbs, other.memory_gbs)):
            if mine and theirs and not 1 / hardware.PROBE_FACTOR <= (ratio := theirs / mine) <= hardware.PROBE_FACTOR:
                times = f"{ratio:.2g}" if ratio < 10 else f"{ratio:,.0f}"
                return (f"its host's {what} ({theirs:.3g} {unit}) is {times}x this host's ({mine:.3g} {unit}): "
                        "another machine")
        return None


def file_figures(loaded: Baseline) -> tuple[float | None, float | None]:
    """A file's host figures: the median of its entries' core and memory probes (None where none has one)."""
    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None
    return (median([e.core_gflops for e in loaded.entries if e.core_gflops]),
            median([e.memory_gbs for e in loaded.entries if e.memory_gbs]))


def measured_on(loaded: Baseline) -> Machine | None:
    """The machine a baseline file's figures were measured on, from its ``hardware`` (or environment) and, on a
    CPU, its entries' host probes."""
    measured = loaded.measured_on
    if measured is None:
        return None
    kind, model = measured
    if kind != "cpu":
        return Machine(kind, model, board=hardware.Board.from_fields(loaded.hardware))
    cpus = loaded.hardware.get("cpu_count")
    isa = loaded.cpu_isa
    signature = loaded.hardware.get("cpu_signature")
    core, memory = file_figures(loaded)
    return Machine(kind, model, cpus if isinstance(cpus, int) else None, isa if isinstance(isa, str) else None,
                   signature if isinstance(signature, str) else None, core, memory)


def this_machine(device: str, env: Mapping[str, Any]) -> Machine:
    """The machine this session's cases run on: ``--dlperf-device`` against what the environment found (its host
    probes not read: :func:`probed`)."""
    gpus = env.get("gpus") or {}
    host = env.get("host") or {}
    if device == "cuda" or (device == "auto" and gpus.get("count")):
        first = (gpus.get("devices") or [{}])[0]
        return Machine("cuda", gpus.get("model"), board=hardware.Board.from_fields(first or {}))
    return Machine("cpu", host.get("cpu"), host.get("cpu_count"), host.get("cpu_isa"), host.get("cpu_signature"))


def probed(machine: Machine, theirs: Iterable[Machine | None], measure=hardware.host_figures) -> Machine:
    """``machine`` with this host's probe figures (``measure()``: core, memory), on a CPU where a file (``theirs``)
    has some.  A busy moment reads a host slow, never fast: a gap is read again (a best of 7 once read 4x low)."""
    theirs = [m for m in theirs if m is not None and (m.core_gflops or m.memory_gbs)]
    if machine.kind != "cpu" or machine.core_gflops or not theirs:
        return machine
    core, memory = measure()
    for _ in range(AGAIN):  # only a gap where a file reads faster than this host: reading again cannot close another
        mine = dataclasses.replace(machine, core_gflops=core, memory_gbs=memory)
        if not any(mine.probe_gap(m) and ((m.core_gflops or 0) > (core or 0) or (m.memory_gbs or 0) > (memory or 0))
                   for m in theirs):
            break
        time.sleep(AGAIN_SECONDS)
        core, memory = (max(filter(None, pair), default=None) for pair in zip((core, memory), measure()))
    return dataclasses.replace(machine, core_gflops=core, memory_gbs=memory)


def shown(path: str | os.PathLike) -> str:
    """A path as a user reads it: relative to the current folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


@dataclasses.dataclass
class Selection:
    """Which file of a folder this session judges against, why, and where this machine's figures go."""

    folder: str
    machine: Machine
    #: "matches": a file of the folder; "recorded": this machine's own; "none"; "another": a file named on its own
    #: whose host figures say another machine (:func:`elsewhere`)
    how: str
    chosen: Baseline | None  # the file picked (None: no file matches)
    reference: Baseline
    files: list[tuple[Baseline, Machine | None]]  # the folder's files, each with its machine
    record_path: Path | None = None  # where cases without a figure are recorded at the end
    name: str | None = None  # --dlperf-machine: the machine class the user named (:mod:`.named`)

    @property
    def recorded(self) -> str:
        return shown(self.record_path) if self.record_path is not None else ""

    def line(self) -> str:
        """The one line that says which baseline this session judges against, and why."""
        mine = self.machine.describe()
        if self.name is not None:
            return named.line(self, measured_on(self.chosen) if self.chosen is not None else None, shown)
        if self.how == "matches":
            theirs = measured_on(self.chosen)
            return (f"baseline {shown(self.chosen.path)}: its hardware ({theirs.describe()}) matches this "
                    f"machine ({mine})")
        if self.how == "recorded":
            date = str(self.chosen.data.get("provenance", {}).get("date", "?"))[:10]
            return (f"baseline {shown(self.chosen.path)}: recorded on this machine ({mine}) on {date}; no file "
                    f"in {self.folder} matches it")
        if self.how == "another":
            return (f"baseline {self.folder} not judged against: {self.machine.probe_gap(self.files[0][1])} "
                    f"({self.machine.describe()}); its cases run unjudged")
        files = "; ".join(f"{Path(b.path).name}: " + (f"{self.machine.differs(m)} ({m.describe()})" if m else
                                                       "no hardware") for b, m in self.files)
        return (f"no baseline for this machine ({mine}) in {self.folder} ({files}): the cases of "
                f"{Path(self.reference.path).name} run unjudged and are recorded in {self.recorded} for the next run")

    def missing_note(self) -> str:
        """A case's note when the picked file has no figure for it (or no file was picked)."""
        if self.how == "another":
            return f"not judged: {self.folder}: {self.machine.probe_gap(self.files[0][1])}"
        if self.how == "none" and self.name is not None:
            return named.missing_note(self)
        if self.how == "none":
            return (f"not judged: no baseline for this machine ({self.machine.describe()}) in {self.folder}; "
                    f"recorded in {self.recorded} for the next run")
        if self.how == "recorded":
            return f"not judged: {shown(self.chosen.path)} has no figure for this case yet; recorded there for the next run"
        return f"not judged: {shown(self.chosen.path)}, this machine's baseline, has no figure for this case"


def load(path: str, device: str, record_root: str | os.PathLike, root: str | os.PathLike | None,
         name: str | None = None) -> Baseline:
    """``--dlperf-baseline``: a file as it is, or the file of a folder that describes this machine (``name``:
    the file of the machine class ``--dlperf-machine`` names, :mod:`.named`)."""
    if not Path(path).is_dir():
        return elsewhere(baseline_doc.load(path), this_machine(device, environment.collect(root)))
    return select(path, this_machine(device, environment.collect(root)), record_root, name=name)


def elsewhere(loaded: Baseline, machine: Machine, measure=hardware.host_figures) -> Baseline:
    """A file named on its own, unjudged where its host figures say another machine (:meth:`Machine.probe_gap`:
    its cases run and are reported, and the session says why in one line); else as it is."""
    theirs = measured_on(loaded)
    if theirs is None or theirs.kind != "cpu" or machine.kind != "cpu" or not theirs.model:
        return loaded  # a file that does not name its CPU says nothing of the machine its probes read
    mine = probed(machine, [theirs], measure)
    if mine.probe_gap(theirs) is None:
        return loaded
    selection = Selection(shown(loaded.path), mine, "another", loaded, loaded, [(loaded, theirs)])
    entries = [dataclasses.replace(e, unjudged=selection.missing_note()) for e in loaded.entries]
    return Baseline(loaded.path, loaded.data, entries, selection)


def _files(folder: Path) -> list[Baseline]:
    return [baseline_doc.load(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _best(machine: Machine, candidates: Iterable[tuple[Baseline, Machine | None]]) -> Baseline | None:
    """The most specific file whose machine matches (more words in its name, then a CPU count, an instruction set,
    a family and model)."""
    matching = [(b, m) for b, m in candidates if machine.matches(m)]
    if not matching:
        return None
    return max(matching, key=lambda bm: (len(bm[1].words()), bm[1].cpus is not None, bm[1].isa is not None,
                                         bm[1].signature is not None))[0]


def select(folder: str, machine: Machine, record_root: str | os.PathLike, measure=hardware.host_figures,
           name: str | None = None) -> Baseline:
    """The baseline of ``folder`` for ``machine`` (see the module's text; ``measure``: this host's probe figures,
    :func:`.hardware.host_figures`; ``name``: the machine class ``--dlperf-machine`` names); raises
    ``jsonio.DocumentError`` for a file that cannot be read and :class:`OptionError` for a folder without a
    reference."""
    loaded = _files(Path(folder))
    if not loaded:
        raise OptionError(f"--dlperf-baseline: {folder}: a folder without baseline files (*.json)")
    marked = [b for b in loaded if b.data.get("reference")]
    if len(loaded) > 1 and len(marked) != 1:
        raise OptionError(f"--dlperf-baseline: {folder}: {len(marked)} of its {len(loaded)} files say "
                          '"reference": true; exactly one must (its cases run on a machine that no file describes)')
    reference = marked[0] if marked else loaded[0]
    record_dir = Path(record_root) / Path(folder).resolve().name
    files = [(b, measured_on(b)) for b in loaded]
    if name is not None:
        chosen, how, record_path = named.pick(loaded, _files(record_dir), name, folder, record_dir)
    else:
        machine, chosen, how, record_path = _inferred(machine, files, record_dir, measure)
    if chosen is not None and how == "recorded":
        real = record_path.resolve()
        if not real.is_relative_to(record_dir.resolve()):  # written in place: never a file elsewhere
            raise OptionError(f"dlperf_baseline_record: {record_path} is a link to {real}, outside "
                              f"{record_dir}: a recorded baseline is written where it lies; remove the link")
    selection = Selection(shown(folder), machine, how, chosen, reference, files,
                          None if how in ("matches", "named") else record_path, name)
    entries = _entries(reference, chosen, selection.missing_note())
    if selection.record_path is not None and any(e.unjudged for e in entries):
        try:
            jsonio.check_writable(selection.record_path)
        except OSError as exc:
            raise OptionError(f"dlperf_baseline_record: {exc}") from None
    else:
        selection.record_path = None
    base = chosen or reference
    return Baseline(base.path, base.data, entries, selection)


def _inferred(machine: Machine, files: list[tuple[Baseline, Machine | None]], record_dir: Path,
              measure) -> tuple[Machine, Baseline | None, str, Path]:
    """This machine (probed where a file has host figures), the file whose hardware matches it, else the file it
    recorded, else none; how (``matches``, ``recorded``, ``none``) and where its figures are recorded."""
    recorded = [(b, measured_on(b)) for b in _files(record_dir)]
    machine = probed(machine, [m for _, m in (*files, *recorded)], measure)
    chosen = _best(machine, files)
    if chosen is not None:
        return machine, chosen, "matches", record_dir / f"{machine.slug()}.json"
    chosen = _best(machine, recorded)
    if chosen is not None:
        return machine, chosen, "recorded", Path(chosen.path)
    return machine, None, "none", record_dir / f"{machine.slug()}.json"


def _entries(reference: Baseline, chosen: Baseline | None, missing: str) -> list[Entry]:
    """The reference's cases, with the chosen file's figures where it has them, then its other cases.

    Every entry carries its step counts (its own, else its file's defaults): the session reads
    the chosen file's defaults, which need not be the reference's.
    """
    def own(entry: Entry, of: Baseline, **changes: Any) -> Entry:
        steps = baseline_doc.method(dict(entry.overrides), of.defaults)
        return dataclasses.replace(entry, overrides=steps, file=of.path, **changes)

    if chosen is reference:
        return list(reference.entries)
    out = []
    for ref in reference.entries:
        figure = chosen.find(ref.case) if chosen is not None else None
        if figure is None:
            out.append(own(ref, reference, unjudged=missing))
            continue
        gates = {key: getattr(ref, key) for key in ("min_scaling_efficiency", "min_gpu_utilization")
                 if getattr(figure, key) is None}
        if figure.command is not None and figure.command == ref.command:
            # The reference gives the same command (a recorded file copies it): it runs under the reference's trust.
            gates["command_source"] = ref.command_source or (reference.path, ref.index)
        out.append(own(figure, chosen, **gates))
    if chosen is not None:
        out.extend(own(e, chosen) for e in chosen.entries if reference.find(e.case) is None)
    return out


def record(loaded: Baseline, results: Iterable[Any], env: Mapping[str, Any],
           default_tolerance: float, max_runs: int | None = None) -> tuple[int, list[Noisy]]:
    """Write the measured cases that ran unjudged into this machine's recorded baseline.

    ``results``: the session's :class:`~pytest_dlperf.results.case.CaseResult`\\ s.  A new file for a
    machine no file described; an existing recorded file gains the cases it lacked (its figures
    stay: a recorded baseline is not a moving average).  Returns how many cases were written and
    which varied too much for their tolerance to be decided within ``max_runs``.
    """
    selection: Selection = loaded.selection
    records, entries = [], []
    for result in results:
        entry = loaded.find(result.case)
        if result.measured and entry is not None and entry.unjudged:
            tolerance = entry.tolerance if entry.tolerance is not None else default_tolerance
            records.append({**result.to_dict(), "tolerance": tolerance})
            entries.append(entry)
    if not records:
        return 0, []
    noisy_cases: list[Noisy] = []
    document = from_measurements(records, env, tolerance=default_tolerance, noisy_cases=noisy_cases,
                                 commands=loaded.commands, max_runs=max_runs)
    for case, entry in zip(document["cases"], entries):
        case.setdefault("tolerance", default_tolerance)  # its own: a recorded file's defaults may differ
        for key in ("min_scaling_efficiency", "min_gpu_utilization"):
            if getattr(entry, key) is not None:
                case[key] = getattr(entry, key)
    if selection.how == "recorded":
        existing = dict(selection.chosen.data)
        existing["cases"] = [*existing["cases"], *document["cases"]]
        document = existing
    elif selection.name is not None:
        named.describe(document, selection)
    else:
        document["name"] = f"{Path(selection.folder).name} on {selection.machine.describe()}"
        document["provenance"]["notes"] = (
            f"Recorded by pytest-dlperf: the cases of {selection.folder} measured on a machine that no file of it "
            "describes. The next sessions of the folder on this machine gate against it; delete it to record anew.")
    baseline_doc.save(selection.record_path, document)
    return len(records), noisy_cases

"""Following a command's log while it runs: its steps arrive, and its time limit follows them.

A worker writes its progress (its step time, the steps it has left) and the controller moves
its time limit on (:func:`pytest_dlperf.launch.waiting.deadline_from`).  A command writes only its
log; :class:`LogFollower` reads it as it grows, with the case's own parser, once a second:

* until its first logged step, the run has ``startup`` seconds (the session's
  ``startup_timeout``, else the command's), counted again from each line the parser reads
  (an MLLOG ``run_start`` or ``init_stop``: the script is alive and logging);
* from then on, as a worker's: ``last step + 3 x step time x steps left + 60 s``, where the
  step time is the longest seen so far (a step's own logged seconds, or the time between two
  steps' arrival) and the steps left are the logged steps the case still needs (at least one:
  a time-to-train case does not know how many it will take); a line the parser reads that is
  no step (an evaluation) gives the run at least ``3 x step time + 60 s`` more.

A run that passes that limit logged nothing the parser reads for too long: it is hung, and
:meth:`LogFollower.hung` says so, naming the last line it logged.

Once each rank's log (the file :mod:`.measure` reads for it) has the logged steps the case needs,
:meth:`LogFollower.measured` is true: the run is stopped there (``stop_once_measured``), whether or
not the script would go on training.  A line ends at ``\n`` or ``\r`` (a progress bar redraws
itself with ``\r``), as when the whole log is read.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from pathlib import Path

from ..protocol import Progress
from . import parsers

#: As a worker's limit (pytest_dlperf.launch.waiting.deadline_from): this many step times for each step left ...
STEP_FACTOR = 3.0
#: ... plus this many seconds.
SLACK_SECONDS = 60.0
#: The most bytes read from one file at one look (a script that floods its log is read over several).
CHUNK_BYTES = 8 << 20
#: Where a line ends: as Python's universal newlines read a whole log (a tqdm bar redraws with ``\r``).
LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclasses.dataclass
class _File:
    """One followed file: how far it has been read, its unfinished last line, its own parser, and the logged
    steps read so far by the rank they name (None: the file's own)."""

    parser: parsers.Parser
    offset: int = 0
    partial: bytes = b""
    records: dict[int | None, list[parsers.Record]] = dataclasses.field(default_factory=dict)

    def counts(self) -> dict[int | None, int]:
        """The logged steps of each rank in the file, as the whole log's reading keeps them (``finish``)."""
        return {rank: len(self.parser.finish(list(found))) for rank, found in self.records.items()}


class LogFollower:
    """The logged steps of a running command, read as they arrive; the run's time limit from them.

    ``paths()`` lists the files its lines may be in (it is asked again at each look: a
    launcher's per-rank files appear after the start); ``make_parser()`` makes a parser for
    each; ``expected_steps``: the logged steps the case needs (None: a time-to-train case);
    ``samples_per_step``: what a step without its own count holds, for a step logged as a
    throughput.
    """

    def __init__(self, paths: Callable[[], list[Path]], make_parser: Callable[[], parsers.Parser], *,
                 expected_steps: int | None, startup: float, samples_per_step: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.paths, self.make_parser = paths, make_parser
        self.expected_steps, self.startup, self.samples_per_step = expected_steps, startup, samples_per_step
        self.clock = clock
        self.started = clock()
        self.files: dict[Path, _File] = {}
        self.last_activity: float | None = None  # when the parser last read a line (step or mark)
        self.last_step: float | None = None  # when the last step arrived
        self.step_seconds: float | None = None  # the longest step seen
        self.last_line: str | None = None  # the last line the command logged (any line, for the message)

    # -- reading

    def poll(self) -> None:
        """Read what the files gained since the last look."""
        for path in self.paths():
            followed = self.files.get(path)
            if followed is None:
                followed = self.files[path] = _File(self.make_parser())
            self._read(path, followed)

    def _read(self, path: Path, followed: _File) -> None:
        try:
            with open(path, "rb") as handle:
                handle.seek(followed.offset)
                chunk = handle.read(CHUNK_BYTES)
        except OSError:
            return
        if not chunk:
            return
        followed.offset += len(chunk)
        lines = LINE_END.split(followed.partial + chunk)
        followed.partial = lines.pop()  # what follows the last line end: a line still being written
        now = self.clock()
        steps: list[parsers.Record] = []
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if line.strip():
                self.last_line = line.strip()
            found = followed.parser.parse_line(line)
            if found:
                self.last_activity = now
                steps += [r for r in found if isinstance(r, parsers.Record) and not r.final and r.is_step]
        for record in steps:
            followed.records.setdefault(record.rank, []).append(record)
        if steps:
            self._arrived(steps, now)

    def _arrived(self, steps: list[parsers.Record], now: float) -> None:
        """Steps read at one look: the step time is the longest of their own logged seconds and of the time since
        the last step arrived over their count (the log is read once a second, not at each step)."""
        own = [r.step_time if r.step_time is not None else (r.samples or self.samples_per_step) / r.throughput
               for r in steps if r.step_time is not None or r.throughput]
        between = (now - self.last_step) / len(steps) if self.last_step is not None else None
        longest = max(x for x in (*own, between, self.step_seconds, 0.0) if x is not None)
        self.step_seconds = longest or None
        self.last_step = now

    # -- the limit

    @property
    def steps(self) -> int:
        """The logged steps so far: the most of any one file (the ranks log alike)."""
        return max((n for f in self.files.values() for n in f.counts().values()), default=0)

    def measured(self, ranks: list[list[Path]]) -> bool:
        """Whether every rank's log has the steps the case needs: ``ranks`` lists each rank's files in the order
        they are read (the first one with steps is the rank's); False for a time-to-train case (it needs all)."""
        if self.expected_steps is None:
            return False
        counts = []
        for paths in ranks:
            found = next((f.counts() for f in map(self.files.get, paths) if f is not None and f.records), None)
            counts += found.values() if found else []
        return bool(counts) and min(counts) >= self.expected_steps

    @property
    def steps_left(self) -> int:
        if self.expected_steps is None:
            return 1
        return max(self.expected_steps - self.steps, 1)

    @property
    def deadline(self) -> float:
        """When the run is hung (on the clock of ``clock``), from what its log showed so far."""
        if self.last_step is None or self.step_seconds is None:
            return max(self.started, self.last_activity or self.started) + self.startup
        allowance = STEP_FACTOR * self.step_seconds
        by_steps = self.last_step + allowance * self.steps_left + SLACK_SECONDS
        return max(by_steps, (self.last_activity or self.last_step) + allowance + SLACK_SECONDS)

    def progress(self, warmup: int, window: int, windows: int) -> Progress:
        """Where the run is, for the live display: its warm-up or windows of logged steps so far."""
        done = self.steps
        if self.expected_steps is None:  # a time to train: blocks until the script stops, "window 4/?"
            return Progress.now(self.step_seconds, None, phase="measuring", windows_done=done)
        if done < warmup:
            return Progress.now(self.step_seconds, self.steps_left, phase="warm-up", warmup_done=done,
                                warmup_total=warmup)
        return Progress.now(self.step_seconds, self.steps_left, phase="measuring", warmup_done=warmup,
                            warmup_total=warmup, windows_done=min((done - warmup) // max(window, 1), windows),
                            windows_total=windows)

    def hung(self, limit: float) -> str:
        """Why the run passed its limit, in words: what it logged last, and when."""
        quiet = self.clock() - (self.last_activity or self.started)
        if self.last_step is None:
            what = (f"it logged no step the parser reads within {self.startup:.0f} s of its start or its last "
                    f"event (startup_timeout)")
        else:
            what = (f"it logged nothing the parser reads for {quiet:.0f} s after {self.steps} logged step(s) of up "
                    f"to {self.step_seconds:.2f} s (its limit follows its log: {STEP_FACTOR:g} x the step time x "
                    f"the steps left + {SLACK_SECONDS:.0f} s)")
        last = f"; its last line: {self.last_line!r}" if self.last_line else "; it logged no line at all"
        return f"hung after {limit:.0f} s: {what}{last}"

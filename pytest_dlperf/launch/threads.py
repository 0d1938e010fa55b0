"""How many intra-op threads each CPU rank trains with (``dlperf_cpu_threads``): the ``OMP_NUM_THREADS`` its
process starts with, which torch reads once, when it starts.

Why one by default: on a 2-vCPU VM two threads that meet at every operator pay a cache-line round trip whose
cost depends on where the hypervisor puts the vCPUs (50-110 ns or 330-400 ns), and that moves every few seconds
to minutes; with the old default (all CPUs) 2 of 7 unchanged sessions failed 18% and 30% below a baseline saved
with the defaults, with one thread 0 of 20 did and every 30% slowdown failed (docs/verdicts.md).

The count a CPU case's ranks run with, the first that applies (:func:`choose`):

1. ``dlperf_cpu_threads N`` or ``cores`` (this node's CPUs shared between its ranks: :func:`cores`);
2. its baseline entry's ``cpu_threads`` (the count its figure was measured with); an entry of a CPU baseline
   without one was saved before the count was recorded, and runs as those versions ran it
   (:func:`as_before`: ``OMP_NUM_THREADS`` from the environment when set, else ``cores``);
3. ``OMP_NUM_THREADS`` from the environment pytest runs in, when set;
4. :data:`DEFAULT`, one.

GPU cases get none of it: their ranks start with the environment as it is.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from ..cases import OptionError

VARIABLE = "OMP_NUM_THREADS"
#: ``dlperf_cpu_threads cores``: this node's CPUs shared between its ranks.
CORES = "cores"
DEFAULT = 1


def parse(flag: str, value: object) -> int | str | None:
    """``dlperf_cpu_threads``'s value: a positive integer or ``cores`` (None: not given)."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() == CORES:
        return CORES
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise OptionError(f"{flag}: {value!r} is not allowed; expected a positive integer (intra-op threads per CPU "
                      f"rank) or {CORES}")


def cores(ranks_here: int) -> int:
    """This node's CPUs shared between the ``ranks_here`` ranks it runs, at least one each."""
    return max(1, (os.cpu_count() or 1) // max(1, ranks_here))


def count(choice: int | str, ranks_here: int) -> int:
    """The threads of ``choice`` (a count, or :data:`CORES`) for a rank of ``ranks_here`` on its node."""
    return cores(ranks_here) if choice == CORES else int(choice)


def from_environment(environ: Mapping[str, str] | None = None) -> int | None:
    """``OMP_NUM_THREADS`` of ``environ`` (default: this process's): its first count (``4,2``: 4), or None where it
    is not set or not a positive integer."""
    text = (os.environ if environ is None else environ).get(VARIABLE, "").split(",")[0].strip()
    return int(text) if text.isdigit() and int(text) >= 1 else None


def as_before(ranks_here: int, environ: Mapping[str, str] | None = None) -> int:
    """What a CPU rank ran with before the count was recorded: the environment's ``OMP_NUM_THREADS``, else
    :func:`cores`."""
    given = from_environment(environ)
    return given if given is not None else cores(ranks_here)


@dataclasses.dataclass(frozen=True)
class Chosen:
    """The count a case's CPU ranks run with, where it came from (``option``, ``baseline``, ``environment``,
    ``default``), and the count its baseline entry stands for (None: no entry, or one that says nothing)."""

    threads: int
    source: str
    entry: int | None = None


def choose(option: int | str | None, entry: int | None, ranks_here: int,
           environ: Mapping[str, str] | None = None) -> Chosen:
    """The count of ``dlperf_cpu_threads`` (``option``), else of the baseline entry (``entry``: its recorded
    count, or :func:`as_before`'s), else the environment's, else :data:`DEFAULT`."""
    if option is not None:
        return Chosen(count(option, ranks_here), "option", entry)
    if entry is not None:
        return Chosen(entry, "baseline", entry)
    given = from_environment(environ)
    return Chosen(given, "environment") if given is not None else Chosen(DEFAULT, "default")


def mismatch(case_id: str, option: int | str, chosen: Chosen, recorded: bool) -> str | None:
    """The one line of a case whose ``dlperf_cpu_threads`` is not the count its baseline entry was measured
    with (``recorded``: the entry's ``cpu_threads``; else what versions before it ran), or None."""
    if chosen.entry is None or chosen.threads == chosen.entry:
        return None
    how = (f"cpu_threads {chosen.entry}" if recorded else
           f"{chosen.entry}, as versions that did not record cpu_threads ran it (OMP_NUM_THREADS, else cores)")
    return (f"{case_id}: dlperf_cpu_threads {option} runs {chosen.threads} intra-op thread(s) per CPU rank, but "
            f"its baseline entry was measured with {how}: a figure of another method; gate it with "
            f"{chosen.entry} (or without dlperf_cpu_threads), or save the baseline again with "
            f"dlperf_cpu_threads {option}")


def environment(threads: int | None) -> dict[str, str]:
    """The variable that gives a rank ``threads`` (None: none, the environment as it is)."""
    return {} if threads is None else {VARIABLE: str(threads)}

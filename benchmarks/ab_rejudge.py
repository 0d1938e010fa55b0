"""A/B sessions judged again from the pairs their results documents kept, by today's paired verdict (issue 38).

Each document's case pairs are replayed one by one through :func:`pytest_dlperf.gate.paired.judge` with the looks
and least pairs of :func:`pytest_dlperf.ab.pairs.measure_pairs` (``--max-pairs``: the plan the session ran under),
until a decision or the kept pairs end.  The sessions stopped
where the rule they ran under decided: another rule replayed on their pairs may find them undecided where the pairs
end, one or two pairs short of its own decision (not a worse rule: its sessions would have gone on).  Printed per
document: the verdict the session gave, and today's with the pairs it took (``undecided at N`` where the kept pairs
ended first).  Kept documents: ``benchmarks/ab_quality.py --keep FOLDER``.

    python benchmarks/ab_rejudge.py /tmp/abq/kept/*.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from pytest_dlperf.gate.evidence import Decision
from pytest_dlperf.gate.paired import MAX_PAIRS, MIN_PAIRS, Pair, judge


def replay(pairs: list[Pair], tolerance: float, max_pairs: int) -> tuple[Decision, int]:
    """Today's decision on ``pairs`` taken one at a time: (decision, pairs taken)."""
    for taken in range(1, len(pairs) + 1):
        shown = pairs[:taken]
        counted = sum(1 for p in shown if not p.busy)
        _, decision = judge(shown, tolerance, max(1, counted), max_pairs, min(MIN_PAIRS, max_pairs))
        if decision is not Decision.UNDECIDED or taken >= max_pairs:
            break
    return decision, taken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="+", type=Path, help="A/B results documents (--dlperf-json)")
    parser.add_argument("--max-pairs", type=int, default=MAX_PAIRS, help=f"the sessions' plan (default {MAX_PAIRS})")
    args = parser.parse_args(argv)
    return rejudge(args.documents, args.max_pairs)


def rejudge(documents: list[Path], max_pairs: int) -> int:
    """Each document's pairs replayed (the module's), and the tally of kept verdicts against today's."""
    tally: Counter = Counter()
    for path in documents:
        case = json.loads(path.read_text())["cases"][0]
        found = case.get("paired") or {}
        pairs = [Pair.from_dict(p) for p in found.get("pairs") or []]
        if not pairs:
            print(f"{path.name}: no pairs kept")
            continue
        decision, taken = replay(pairs, found["tolerance"], max_pairs)
        ended = taken == len(pairs) and decision is Decision.UNDECIDED and taken < max_pairs
        today = f"undecided at {taken} (the kept pairs end)" if ended else f"{decision.value} at {taken}"
        tally[(found["decision"], decision.value)] += 1
        print(f"{path.name:<22} kept: {found['decision']:<10} {len(pairs):>3} pairs   today: {today}")
    print("kept -> today:", ", ".join(f"{a} -> {b}: {n}" for (a, b), n in sorted(tally.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

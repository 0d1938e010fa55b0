"""The verdict's rules, listed once: the README's verdict table is made here, from the constants the gate uses.

:data:`RULES` names every rule of the throughput verdict and of a save, with where it lives (docs/verdicts.md
gives each its reason); :func:`readme_table` is the README's table of verdicts, which
``tests/test_readme_verdicts.py`` checks against the README, so that the two cannot disagree.

:data:`VERDICT_RULES` is the rules' version: a number that changes whenever a rule or a default that can change a
verdict changes.  Every results document, saved baseline and history night records it, so that a team can tell
which nights were judged by the same rules.  :func:`fingerprint` hashes the gate's code (its modules without their
strings and comments, so rewording a message changes nothing); a test
fails when the fingerprint is not :data:`FINGERPRINT`, so no change to the gate lands without someone deciding
whether the version moves.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from .policy import INCONCLUSIVE_NIGHTS
from .evidence import RULED_OUT, WITHIN
from .far import FAR_RUNS
from .sequential import BUSY_RUNS, REGRESSION_RUNS

#: The rules' version: 1, the rules of issue 43 (2026-11-27); 2, issue 53's first part (2026-11-28): a run's own
#: processes are its descendants too, throttling is named and counted, the never-deciding nights survive their own FAIL;
#: 3, a run far off its baseline is cut short and two such runs fail the case (gate/far.py, 2026-11-28); 4, an A/B
#: case's pass is spent over its looks as its fail is, and a run is cut only after 8 steps (2026-11-28); 5, an A/B
#: case's estimate is the pairs' own, never adjusted by the memory probe each side times in its own process; 6, a host
#: that moved since the save (the controller's own probe between runs) is judged both ways, decided where they agree,
#: and the budget is in runs only (dlperf_max_seconds removed); 7, a pass whose interval reaches below the threshold
#: needs its estimate within half the tolerance and twice the tolerance ruled out (was: above it, 2.25 x), and a case
#: undecided night after night is judged on its last nights together before the never-deciding rule fails it; 8, the
#: kernel's own work (interrupts, softirqs, kernel threads) is never other processes' CPU, which alone makes a run busy;
#: 9, where the controller's probe saw no move, runs whose own probes all read faster than the save's are judged on
#: their scale too (a faster host hides a slowdown; the code cannot raise its probes), and a save no longer sets aside
#: its runs whose probes dip (it read the host's fast moments only); 10, undecided nights judged together decide only
#: where as measured and on the host's scale agree, where tonight's host moved; the controller's probe counts a faster
#: host at 2 standard errors; 11, where a save's runs spread significantly more than a session's (or the nights'), the
#: difference is the stretch of the host's moves the session sat in, in its interval once (stats.excess_variance).
VERDICT_RULES = 11
#: :func:`fingerprint` of the gate as :data:`VERDICT_RULES` describes it.
FINGERPRINT = "eea7a8d63b036bb6"
#: The gate's modules that only word or list what the others decide (attribution: a note): not in the fingerprint.
WORDING = ("attribution.py", "format.py", "rules.py")

#: Every rule, (what, where): the decision's five, far off's one, the busy runs' four, the save's five, the notes'
#: one, the host's move one, the policy's two, the interval's three.  Issue 43 removed two (starved runs, the host's
#: own slowdown, as the worker's probe read it) and added one (a case that never decides).
RULES = (
    ("regression: the interval's top at its look's boundary below the threshold", "evidence.decide, looks"),
    ("a regression needs REGRESSION_RUNS evidence runs; from fewer at the budget: not confirmed", "sequential"),
    ("far off: FAR_RUNS runs in a row cut short, their pace under FAR_RATIO x the threshold on a quiet machine",
     "far, launch.pace"),
    ("improved: the whole interval above baseline x (1 + tolerance)", "evidence.decide"),
    ("pass: the whole interval above the threshold", "evidence.decide"),
    ("pass: the estimate within WITHIN x the tolerance, the interval ruling out RULED_OUT x the tolerance",
     "evidence.decide"),
    ("busy: a named cause measured outside the case's processes, their descendants and the kernel's own work",
     "figures.busy_reason"),
    ("a busy run counts towards a pass only", "sequential.assess"),
    ("BUSY_RUNS busy runs in a row end the case", "sequential.measure_until_decided"),
    ("a case without a baseline is not re-measured for a busy machine", "sequential.assess"),
    ("a save measures SAVE_RUNS counted runs, re-measuring busy ones", "controller.throughput"),
    ("a save needs MIN_SAVED_RUNS quiet runs", "sequential.unsaved_reason"),
    ("a save's counted runs start over dlperf_save_span", "controller.throughput.save_spacing"),
    ("a save says where its runs vary too much for its tolerance", "tolerance.noisy"),
    ("the probes are named beside a verdict beyond their drop and spread: notes", "figures.probe_notes"),
    ("a host that moved since the save (its own probe between runs, at fewer standard errors faster than slower; else "
     "the runs' own probes, only faster): decided only where the runs as measured and on the host's scale agree",
     "host, sequential.judged_both_ways"),
    ("--dlperf-inconclusive: which undecided cases fail", "policy.inconclusive_fails"),
    ("a case undecided dlperf_inconclusive_nights nights in a row fails, and each night after until one decides, "
     "unless its last nights together pass or rule out twice the tolerance against a saved baseline (together below "
     "the threshold: a regression; both ways where tonight's host moved)",
     "policy.never_decided, nights"),
    ("sigma: pooled, a prior of tolerance / 3 without the baseline's runs, at least 1%", "evidence.pooled_sigma"),
    ("tau: the history's, else its machine class's, else a fifth of the tolerance", "drift.drift"),
    ("a stretch: a save's runs spread more than a session's (an F test at 5%), the difference in the interval once",
     "evidence.estimate, nights.estimate, stats.excess_variance"),
)


def readme_table() -> str:
    """The README's table of verdicts (Markdown), its figures the gate's own."""
    rows = [
        ("PASS", f"its interval lies above `baseline x (1 - tolerance)`; on a noisy host, its estimate within "
                 f"{WITHIN:g} x the tolerance of the baseline and its interval ruling out {RULED_OUT:g} x the "
                 f"tolerance", "PASSED", "nothing"),
        ("IMPROVED", "its interval lies above `baseline x (1 + tolerance)`", "PASSED",
         "find out why; then move the baseline ([how](docs/baselines.md#moving-a-baseline))"),
        ("FAIL", f"its interval lies below `baseline x (1 - tolerance)` at its look's boundary "
                 f"([the looks](docs/verdicts.md#the-looks)), from {REGRESSION_RUNS} runs or more (\"not confirmed\" "
                 f"from fewer where the runs stopped); {FAR_RUNS} runs in a row cut short under half the threshold "
                 f"([far off](docs/verdicts.md#far-off)); or undecided {INCONCLUSIVE_NIGHTS} nights in a row, and "
                 f"after, in a history store (`dlperf_inconclusive_nights`), unless those nights together pass",
         "FAILED",
         "a regression: [bisect it](docs/triage.md#a-regression)"),
        ("INCONCLUSIVE", f"undecided after `--dlperf-max-runs` runs, {BUSY_RUNS} runs "
                         f"in a row on a busy machine (another job's CPU or GPU use, steal), or on a host that moved "
                         f"since the save ([why](docs/verdicts.md#a-host-that-moved))",
         "PASSED (inconclusive), in yellow", "read the next line: more runs, a quieter machine, or a wider tolerance "
                                             "([triage](docs/triage.md#inconclusive))"),
        ("ERROR", "the training crashed, ran out of memory or hung", "FAILED",
         "read the message and the run's log ([triage](docs/triage.md#a-crash-out-of-memory-or-a-hang))"),
    ]
    lines = ["| verdict | when | pytest | what to do |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    return "\n".join(lines)



def fingerprint(gate: Path | None = None) -> str:
    """A hash of the gate's code (``gate``: its folder; default this package's): each module's syntax tree without
    docstrings, messages and comments, in name order.  The defaults read from outside the gate (the tolerance, the
    run budget) are guarded beside it by ``tests/test_readme_verdicts.py``."""
    digest = hashlib.sha256()
    for path in sorted((gate or Path(__file__).parent).glob("*.py")):
        if path.name in WORDING:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                node.value = ""
        digest.update(path.name.encode() + ast.dump(tree).encode())
    return digest.hexdigest()[:16]

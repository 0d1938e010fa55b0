"""A judgement in words: the one place a case's message is made (:class:`~pytest_dlperf.results.judgement.Judgement`).

A message is a first line a person reads in five seconds, then one fact per line (:data:`REASON` between them):
the lines of a failed gate that lead (a case whose throughput passed and whose scaling failed leads with its
scaling), then the headline, then the other facts in the order the judgement gives them.  A reason with a
status word begins with it (``FAIL``, ``PASS``, ``INCONCLUSIVE``).  Nothing else in the package joins, splits or
edits a verdict's words: a test searches the code for it.
"""

from __future__ import annotations

from ..results.judgement import Judgement, Reason, Status

#: How the lines after a message's first begin: one fact each.
REASON = "\n  "
#: The word a line begins with, by the status it names.
WORDS = {Status.FAIL: "FAIL", Status.PASS: "PASS", Status.IMPROVED: "IMPROVED", Status.INCONCLUSIVE: "INCONCLUSIVE",
         Status.ERROR: "ERROR", Status.NO_BASELINE: "NO BASELINE", Status.SKIPPED: "SKIPPED",
         Status.REMOTE: "REMOTE", Status.DATA_ONLY: "DATA ONLY"}


def line(reason: Reason) -> str:
    """One reason as a line: its word, then its text."""
    return f"{WORDS[reason.word]} {reason.text}" if reason.word is not None else reason.text


def lines(judgement: Judgement) -> list[str]:
    """The message's lines: the leading reasons, then the rest, in order."""
    ordered = [r for r in judgement.reasons if r.lead] + [r for r in judgement.reasons if not r.lead]
    return [line(r) for r in ordered]


def render(judgement: Judgement) -> str:
    """The case's message (the results' ``message``, the test's failure text)."""
    return REASON.join(lines(judgement))


def first_line(judgement: Judgement) -> str:
    """What a table row shows of a case: the first line of its first reason."""
    out = lines(judgement)
    return out[0].splitlines()[0] if out and out[0] else ""


def summary_lines(judgement: Judgement, indent: str = "  ") -> list[str]:
    """The terminal summary's lines of a case: the first line, then each fact indented below it.  An error's
    message goes on with its log's last lines: only its first line is shown."""
    out = lines(judgement)
    if not out:
        return []
    if judgement.status is Status.ERROR:
        return [indent + out[0].splitlines()[0]]
    return [indent + out[0], *(f"{indent}    {rest}" for rest in out[1:])]

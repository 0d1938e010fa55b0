"""How an A/B session says what it found: the case's headline, the two environments' differences, the Markdown
section, the summary's lines.

``FAIL resnet50-amp-bs256-gpu1: 7.1% slower than the reference (98% CI -8.9..-5.3%, 4 pairs): candidate torch
2.12.0+cu130, reference torch 2.11.0+cu130``, then what differs between the two environments (their environment
captures, diffed as the history's "what changed" is: :func:`pytest_dlperf.history.records.environment_changes`,
then every other version that differs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..gate.evidence import Decision, StopReason
from ..gate.format import fmt_pct, fmt_value
from ..gate.paired import CANDIDATE, PairedEvidence
from ..history.records import environment_changes, session_row
from ..results.case import CaseResult, Status

if TYPE_CHECKING:
    from . import AB

#: Why an undecided case stopped, in words.
STOPPED = {StopReason.MAX_RUNS: "undecided at --dlperf-max-runs", StopReason.TIME_BUDGET:
           "undecided at dlperf_max_seconds", StopReason.BUSY: "two busy pairs in a row (not counted)",
           StopReason.DECIDED: "undecided"}


def differences(candidate: Mapping[str, Any], reference: Mapping[str, Any], device: str) -> list[str]:
    """What differs from the reference's environment to the candidate's: ``torch 2.11.0 -> 2.12.0``, ``git
    3fa2c1e..9b04d7e``, then every other version (``python 3.11.7 -> 3.12.1``)."""
    out = environment_changes(session_row(reference, device), session_row(candidate, device))
    said = {line.split(" ", 1)[0].lower() for line in out}
    old, new = reference.get("versions") or {}, candidate.get("versions") or {}
    for key in sorted(set(old) | set(new)):
        if key.lower() not in said and old.get(key) != new.get(key) and key != "dali_package":
            out.append(f"{key} {old.get(key) or '-'} -> {new.get(key) or '-'}")
    return out


def stacks(candidate: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    """``candidate torch 2.12.0+cu130, reference torch 2.11.0+cu130`` (one torch: ``both torch 2.14.1``)."""
    mine = (candidate.get("versions") or {}).get("torch") or "?"
    theirs = (reference.get("versions") or {}).get("torch") or "?"
    if mine == theirs:
        return f"both torch {mine}"
    return f"candidate torch {mine}, reference torch {theirs}"


def headline(case_id: str, found: PairedEvidence, stack: str) -> str:
    """The case's first line, but its status word (:mod:`pytest_dlperf.reporting.verdicts` puts it first)."""
    est = found.estimate
    if est is None:
        busy = next((p.busy for p in reversed(found.pairs) if p.busy), "?")
        return f"{case_id}: no pair counted ({len(found.pairs)} busy; the last: {busy}): {stack}"
    diff = est.value - 1.0
    low, high = est.low - 1.0, est.high - 1.0
    side = "slower than" if diff < 0 else "faster than"
    pairs = f"{est.runs} pair" + ("s" if est.runs != 1 else "")
    interval = f"{round(100 * est.confidence)}% CI {100 * low:+.1f}..{100 * high:+.1f}%"
    return f"{case_id}: {fmt_pct(abs(diff))} {side} the reference ({interval}, {pairs}): {stack}"


def lines(case_id: str, found: PairedEvidence, stack: str, changes: Sequence[str], unit: str) -> list[str]:
    """The headline's text (its status word is the judgement's), what the sides measured, why an undecided case
    stopped, and the environments' differences: one fact each."""
    lines = [headline(case_id, found, stack)]
    cand, ref = found.side_mean(CANDIDATE), found.side_mean("reference")
    if cand is not None and ref is not None:
        lines.append(f"candidate {fmt_value(cand)} {unit}, reference {fmt_value(ref)} {unit} (tolerance "
                     f"{fmt_pct(found.tolerance)}, seed {found.seed})")
    busy = [p for p in found.pairs if p.busy]
    if busy:
        lines.append(f"{len(busy)} of {len(found.pairs)} pair(s) not counted: {busy[-1].busy}")
    if found.decision is Decision.UNDECIDED:
        lines.append(f"{STOPPED[found.stopped]} ({len(found.pairs)} pairs)")
    lines.append("what differs: " + ("; ".join(changes) if changes else "nothing the environment captures"))
    return lines


def markdown_section(against: Mapping[str, Any], results: Sequence[CaseResult]) -> list[str]:
    """The report's A/B section: both environments, the ratio per case, and each case's pairs."""
    reference = against.get("reference") or {}
    lines = ["## A/B: candidate against reference", "",
             f"Candidate: this session's environment. Reference: `{reference.get('given')}` ({reference.get('kind')}). "
             f"Pairs in random order (seed {against.get('seed')}), each a fresh run of each side.", "",
             "| | candidate | reference |", "|---|---|---|"]
    envs = against.get("candidate_environment") or {}, against.get("reference_environment") or {}
    for key in ("python", "torch", "torchvision", "cuda", "cudnn", "pytest_dlperf"):
        values = [(env.get("versions") or {}).get(key) for env in envs]
        if any(values):
            lines.append(f"| {key} | {values[0] or '-'} | {values[1] or '-'} |")
    commits = [((env.get("git") or {}).get("short") or "-") for env in envs]
    lines += [f"| git | {commits[0]} | {commits[1]} |", "",
              "What differs: " + ("; ".join(against.get("differences") or []) or "nothing captured"), "",
              "| case | verdict | candidate / reference | 98% CI | pairs | candidate | reference |",
              "|---|---|---|---|---|---|---|"]
    paired = [r for r in results if r.paired is not None]
    for r in paired:
        est, found = r.paired.estimate, r.paired
        ratio = f"{est.value:.3f}" if est else "-"
        interval = f"{est.low:.3f}..{est.high:.3f}" if est else "-"
        cand, ref = found.side_mean(CANDIDATE), found.side_mean("reference")
        lines.append(f"| {r.id} | {r.verdict.value.upper() if r.verdict else '-'} | {ratio} | {interval} | "
                     f"{len(found.counted)}/{len(found.pairs)} | {fmt_value(cand) if cand else '-'} | "
                     f"{fmt_value(ref) if ref else '-'} |")
    for r in paired:
        lines += ["", f"Pairs of {r.id} ({r.unit}):", "", "| pair | order | candidate | reference | ratio | busy |",
                  "|---|---|---|---|---|---|"]
        for p in r.paired.pairs:
            order = "candidate, reference" if p.first == CANDIDATE else "reference, candidate"
            lines.append(f"| {p.index} | {order} | {fmt_value(p.candidate.value)} | {fmt_value(p.reference.value)} | "
                         f"{p.ratio:.3f} | {p.busy or ''} |")
    return lines + [""]


def summary_lines(results: Sequence[CaseResult]) -> list[str]:
    """The terminal summary's A/B table: each case's ratio and interval."""
    paired = [r for r in results if r.paired is not None]
    if not paired:
        return []
    lines = ["A/B: candidate / reference (98% CI, counted pairs)"]
    for r in paired:
        est = r.paired.estimate
        figure = f"{est.value:.3f} ({est.low:.3f}..{est.high:.3f}, {est.runs})" if est else "no pair counted"
        lines.append(f"  {r.id}: {figure} {r.verdict.value.upper() if r.verdict else ''}")
    return lines


def document(ab: AB | None) -> dict[str, Any]:
    """The results document's ``against`` (none outside an A/B session): the seed, the reference, both environments
    and what differs."""
    if ab is None:
        return {}
    return {"against": {"seed": ab.seed, "reference": ab.reference.to_dict(), "reference_version": ab.reference_version,
                        "candidate_environment": ab.candidate_env, "reference_environment": ab.reference_env,
                        "differences": list(ab.differences), "forked": ab.forkable}}

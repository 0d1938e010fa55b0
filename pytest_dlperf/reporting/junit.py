"""JUnit XML: each case's figures as ``<property>`` elements (``dlperf_throughput``, ``dlperf_mfu``, ...).

pytest writes a test's ``user_properties`` into ``--junitxml``; CI dashboards read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..gate.figures import HOST_PROBES
from ..results.case import CaseResult, Status
from ..results.telemetry import gpu_utilizations, host_metric, telemetry_summaries


def properties(result: CaseResult) -> list[tuple[str, Any]]:
    """The properties of a case, whatever its kind: its verdict, and the figures it has."""
    props: list[tuple[str, Any]] = [("dlperf_verdict", result.verdict.value if result.verdict else None)]
    if result.verdict is Status.DATA_ONLY and result.data:
        return props + data_only_properties(result.data)
    seconds = (result.convergence or {}).get("seconds_to_target")
    if seconds is not None:
        props.append(("dlperf_time_to_target", round(seconds, 3)))
    if result.throughput is None:
        return props
    stats = result.stats or {}
    props += [("dlperf_throughput", round(result.throughput, 3)), ("dlperf_unit", result.unit)]
    if stats.get("cv") is not None:  # a kind of one's own may give a throughput without windows
        props.append(("dlperf_cv", round(stats["cv"], 5)))
    if stats.get("n") is not None:
        props.append(("dlperf_windows", stats["n"]))
    if result.baseline:
        props.append(("dlperf_baseline", result.baseline.throughput))
        if result.difference is not None:
            props.append(("dlperf_difference_pct", round(100 * result.difference, 2)))
    if result.scaling:
        props.append(("dlperf_speedup", round(result.scaling.speedup, 4)))
        props.append(("dlperf_efficiency", round(result.scaling.efficiency, 4)))
    if result.max_batch:
        props.append(("dlperf_batch_size", result.max_batch["chosen"]))
        props.append(("dlperf_max_batch_trials", len(result.max_batch["trials"])))
    if result.compile_seconds is not None:
        props.append(("dlperf_compile_seconds", round(result.compile_seconds, 3)))
    if result.flops:
        props.append(("dlperf_tflops", float(f"{result.flops['tflops']:.6g}")))
        if result.flops["mfu"] is not None:
            props.append(("dlperf_mfu", float(f"{result.flops['mfu']:.6g}")))  # tiny on a CPU: 1e-4 of a peak
    summaries = telemetry_summaries(result)
    gpus = gpu_utilizations(summaries)
    if gpus:
        props.append(("dlperf_gpu_util_mean", round(sum(g[1] for g in gpus) / len(gpus), 2)))
    cpu = host_metric(summaries, "cpu_percent", "mean")
    if cpu is not None:
        props.append(("dlperf_cpu_util_mean", round(cpu, 2)))
    return props + evidence_properties(result)


def evidence_properties(result: CaseResult) -> list[tuple[str, Any]]:
    """The runs as evidence: the throughput verdict, the interval, runs counted and not, other processes' CPU."""
    evidence = result.evidence
    props: list[tuple[str, Any]] = []
    if result.throughput_verdict is not None:
        props.append(("dlperf_throughput_verdict", result.throughput_verdict.value))
    estimate = evidence.estimate if evidence is not None else None
    if estimate is not None:
        props += [("dlperf_ci_low", round(estimate.low, 3)), ("dlperf_ci_high", round(estimate.high, 3)),
                  ("dlperf_runs", estimate.runs)]
    figures = evidence.figures if evidence is not None else []
    if figures:
        props.append(("dlperf_runs_busy", len(evidence.busy)))
    others = [run.interference["other_cpu_percent"] for attempt in result.attempts for run in attempt.runs
              if run.interference]
    if others:
        props.append(("dlperf_other_cpu_percent_max", round(max(others), 1)))
    for probe in HOST_PROBES:
        probes = [f.probe(probe) for f in figures if f.probe(probe)]
        if probes:
            props.append((f"dlperf_{probe.key}_min", round(min(probes), 2)))
    return props


def data_only_properties(loader: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The loader's figures of a ``--dlperf-data-only`` case."""
    return [("dlperf_data_samples_per_second", round(loader["samples_per_second"], 3)),
            ("dlperf_data_mb_per_second", round(loader["megabytes_per_second"], 3))]

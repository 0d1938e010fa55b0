"""Readers of the workers' telemetry summaries, shared by the utilization gate and the reports.

A case's ``telemetry`` is one summary (one rank) or one per rank
(:attr:`pytest_dlperf.results.case.CaseResult.telemetry`), each as the worker's sampler wrote it
(:mod:`pytest_dlperf.worker.telemetry`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .case import CaseResult  # noqa: F401 - the annotation's; the function reads a Mapping or its attribute

NO_GPU_REQUESTED = "no GPU requested"


def telemetry_summaries(record: CaseResult | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The record's telemetry summaries: one, or one per rank; none when telemetry was off."""
    telemetry = record.get("telemetry") if isinstance(record, Mapping) else record.telemetry
    if not telemetry:
        return []
    return list(telemetry) if isinstance(telemetry, list) else [telemetry]


def gpu_utilizations(summaries: Iterable[Mapping[str, Any]]) -> list[tuple[int | None, float, float]]:
    """(rank, mean %, max %) of NVML's GPU utilization of every sampled GPU."""
    out = []
    for summary in summaries:
        for device in summary.get("gpu", {}).get("devices", {}).values():
            util = device.get("utilization_gpu")
            if util:
                out.append((summary.get("rank"), util["mean"], util["max"]))
    return out


def gpu_unavailable_reason(summaries: Iterable[Mapping[str, Any]]) -> str | None:
    """Why a case that sampled GPUs has no GPU figures (NVML missing, ...); None otherwise."""
    for summary in summaries:
        gpu = summary.get("gpu", {})
        if not gpu.get("available") and gpu.get("reason") not in (None, NO_GPU_REQUESTED):
            return gpu["reason"]
    return None


def host_metric(summaries: Iterable[Mapping[str, Any]], name: str, how: str) -> float | None:
    """A host metric over the ranks: the mean of their means (``how="mean"``) or the highest max."""
    values = [s["host"][name][how] for s in summaries if name in s.get("host", {})]
    if not values:
        return None
    return max(values) if how == "max" else sum(values) / len(values)


def gpu_metric(summaries: Iterable[Mapping[str, Any]], name: str, how: str) -> float | None:
    """An NVML metric over every sampled GPU: the mean of their means (``how="mean"``) or the highest max."""
    values = [device[name][how] for s in summaries for device in s.get("gpu", {}).get("devices", {}).values()
              if isinstance(device.get(name), Mapping)]
    if not values:
        return None
    return max(values) if how == "max" else sum(values) / len(values)

"""Issue 42: a GPU case whose GPUs idle is marked host-bound (results, summary, report, verdict line, a saved
entry's host CPU); how each run's worker started is recorded, saved and named when a gate crosses it.

No GPU here, and the project has no NVML fake: the marking is tested as the pure function it is, fed the
telemetry records the worker writes, and through the documents and tables that read its result.  The start mode
of a real CPU session's runs, and the verdict's line against an entry measured fresh: tests/test_fork_server.py.
"""

from __future__ import annotations

import pytest

from pytest_dlperf import baseline as baseline_mod
from pytest_dlperf import jsonio
from pytest_dlperf.baseline import edit
from pytest_dlperf.launch.forkserver import uses_server
from pytest_dlperf.reporting import markdown as markdown_report
from pytest_dlperf.reporting import summary
from pytest_dlperf.results.case import CaseResult
from pytest_dlperf.results.host_bound import HostBound, assess
from pytest_dlperf.results.telemetry import gpu_utilizations
from tests.test_markdown import GPU_ENV, document, record

CPU = "Intel(R) Xeon(R) Platinum 8480+"


def telemetry(*means: float, rank: int | None = None) -> list[dict]:
    """Telemetry summaries as the worker writes them: one per rank, each of one GPU at a mean utilization."""
    return [{**({"rank": r, "hostname": "h"} if rank is not None else {}),
             "gpu": {"available": True, "reason": None,
                     "devices": {str(r): {"utilization_gpu": {"mean": mean, "max": min(100.0, mean + 30), "n": 40}}}},
             "host": {"cpu_percent": {"mean": 12.0, "max": 20.0, "n": 40}}} for r, mean in enumerate(means)]


WINDOWS = [{"steps": 100, "samples": 6400, "seconds": 3.8, "throughput": 1684.2},
           {"steps": 100, "samples": 6400, "seconds": 3.9, "throughput": 1641.0}]


def test_a_case_whose_gpu_idles_is_host_bound_and_its_line_says_what_the_figure_depends_on():
    timings = [{"host_seconds_per_step": 0.030}, {"host_seconds_per_step": 0.034}, {}]
    bound = assess(gpu_utilizations(telemetry(54.0)), timings, WINDOWS, 0.9, CPU)
    assert bound == HostBound(0.54, 0.9, 0.032, pytest.approx(0.0385), CPU) and bound.bound
    line = bound.line()
    assert line.startswith("host-bound: its GPU was busy 54% of the measured windows (below 90%")
    assert f"this figure depends on the host's CPU ({CPU})" in line and "32.0 ms to issue a step of 38.5 ms" in line
    # Busy enough, or below a lower threshold: not host-bound; the lowest GPU of several ranks decides.
    assert not assess(gpu_utilizations(telemetry(96.0)), timings, WINDOWS, 0.9, CPU).bound
    assert not assess(gpu_utilizations(telemetry(54.0)), timings, WINDOWS, 0.5, CPU).bound
    assert assess(gpu_utilizations(telemetry(97.0, 71.0, rank=0)), [], WINDOWS, 0.9, None).gpu_busy == 0.71
    # No GPU utilization (a CPU case, telemetry off, no NVML): nothing to say.
    no_gpu = [{"gpu": {"available": False, "reason": "no GPU requested", "devices": {}}, "host": {}}]
    assert assess(gpu_utilizations(no_gpu), timings, WINDOWS, 0.9, CPU) is None
    assert bound.to_dict()["bound"] is True and HostBound.from_dict(bound.to_dict()) == bound


def test_the_results_the_summary_and_the_report_mark_a_host_bound_case():
    bound = assess(gpu_utilizations(telemetry(54.0)), [{"host_seconds_per_step": 0.03}], WINDOWS, 0.9, CPU)
    busy = assess(gpu_utilizations(telemetry(97.0)), [], WINDOWS, 0.9, CPU)
    cases = [record(1, 1683.1, telemetry=telemetry(54.0)[0], host_bound=bound.to_dict(), start="fresh"),
             record(2, 3100.0, telemetry=telemetry(97.0)[0], host_bound=busy.to_dict(), start="forked")]
    doc = document(cases, GPU_ENV)
    jsonio.validate(doc, "results")  # the schema takes both fields
    results = [CaseResult.from_dict(case) for case in cases]
    assert results[0].host_bound == bound and results[0].start == "fresh"
    assert results[0].to_dict()["host_bound"]["bound"] is True and results[1].to_dict()["start"] == "forked"
    rows = {row[0]: row for row in summary.utilization_rows(results)[0]}
    assert rows["resnet50-amp-bs256-gpu1"][3] == "54% / 84% host-bound"
    assert rows["resnet50-amp-bs256-gpu2"][3] == "97% / 100%"
    assert "| resnet50-amp-bs256-gpu1 | - | - | 54% / 84% host-bound |" in markdown_report.render(doc)


def test_a_saved_entry_keeps_the_start_and_a_host_bound_case_s_cpu_and_a_gate_across_them_is_named():
    bound = assess(gpu_utilizations(telemetry(54.0)), [], WINDOWS, 0.9, CPU).to_dict()
    records = [{**record(1, 1683.1, host_bound=bound), "start": "fresh"},
               {**record(2, 3100.0, host_bound={**bound, "gpu_busy": 0.97, "bound": False}), "start": "forked"}]
    saved = baseline_mod.from_measurements(records, GPU_ENV)
    jsonio.validate(saved, "baseline")
    first, second = saved["cases"]
    assert (first["start"], first["host_cpu"]) == ("fresh", CPU) and saved["schema_version"] == 2
    assert second["start"] == "forked" and "host_cpu" not in second  # busy GPUs: its CPU sets nothing
    entries = baseline_mod.index(None, saved)
    assert (entries[0].start, entries[0].host_cpu, entries[1].host_cpu) == ("fresh", CPU, None)
    # Gated on another CPU model, or with the other start: named; the same ones, or unknown, say nothing.
    note = baseline_mod.host_cpu_mismatch(CPU, "AMD EPYC 9654 96-Core Processor")
    assert note == (f"baseline measured host-bound on a host with {CPU}; this host has AMD EPYC 9654 96-Core "
                    "Processor: a host-bound figure depends on the host's CPU")
    assert baseline_mod.host_cpu_mismatch(CPU, "Intel Xeon Platinum 8480+ CPU @ 2.0GHz") is None
    assert baseline_mod.host_cpu_mismatch(None, CPU) is None
    assert "workers started fresh; these runs' started forked" in baseline_mod.start_mismatch("fresh", "forked")
    assert baseline_mod.start_mismatch("fresh", "fresh") is None and baseline_mod.start_mismatch(None, "fresh") is None


def test_runs_on_gpus_start_fresh_and_on_the_cpu_forked_unless_asked():
    assert [uses_server("auto", d) for d in ("cpu", "cuda")] == [True, False]
    assert [uses_server("forked", d) for d in ("cpu", "cuda")] == [True, True]
    assert [uses_server("fresh", d) for d in ("cpu", "cuda")] == [False, False]


def test_the_removed_no_fork_server_option_names_dlperf_start_fresh(dlperf):
    refused = dlperf.run("--dlperf-model", "tiny", "-o", "dlperf_start=forked", "--dlperf-no-fork-server")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --dlperf-no-fork-server was removed: give -o dlperf_start=fresh*"])


def test_an_update_replaces_the_start_and_the_host_cpu_with_the_new_figure_s():
    bound = assess(gpu_utilizations(telemetry(54.0)), [], WINDOWS, 0.9, CPU).to_dict()
    old = baseline_mod.from_measurements([{**record(1, 1700.0, host_bound=bound), "start": "forked"}], GPU_ENV)
    results = document([{**record(1, 1683.1, host_bound={**bound, "gpu_busy": 0.95, "bound": False}),
                         "start": "fresh"}], GPU_ENV)
    new, _ = edit.updated_baseline(old, results, "results.json")
    entry = new["cases"][0]
    assert (entry["throughput"], entry["start"], "host_cpu" in entry) == (1683.1, "fresh", False)
    jsonio.validate(new, "baseline")

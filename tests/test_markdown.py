"""The Markdown report (--dlperf-report, dlperf report): sections, tables, log links."""

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures import PLUGINS_OFF, tiny_case
from pytest_dlperf import cli, jsonio
from pytest_dlperf.reporting import markdown as markdown_report
from pytest_dlperf.reporting import markdown_tables
from pytest_dlperf.cases import Case

SECTIONS = ["# Training throughput report", "## Environment", "### GPU topology", "## Method", "## Throughput", "### tiny (img/s)",
            "## Comparison with the baseline", "## Windows", "## Where the time went", "## FLOPs, MFU and utilization",
            "### Per-case details", "## Verdicts", "## Logs"]


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def section(text: str, title: str) -> str:
    """The lines under ``title`` up to the next heading of the same or a higher level."""
    level = title.split(" ")[0]
    out, inside = [], False
    for line in text.splitlines():
        if line == title:
            inside = True
            continue
        if inside and line.startswith("#") and len(line.split(" ")[0]) <= len(level):
            break
        if inside:
            out.append(line)
    return "\n".join(out)


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", text)


def test_a_session_writes_the_report_with_filled_tables_and_working_log_links(dlperf):
    path = dlperf.baseline([tiny_case(1.0, source="fixture, far too low")])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-gpus", "1,2", "--dlperf-model", "tiny",
                        "--dlperf-log-dir", "worker-logs", "--dlperf-json", "results.json",
                        "--dlperf-report", "out/report.md")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["dlperf: wrote the report out/report.md; logs in out/report-logs"])
    report = dlperf.path / "out" / "report.md"
    text = report.read_text()
    assert headings(text) == SECTIONS
    # The throughput table: one row per GPU count, a figure in each; the gpu1 case against its baseline.
    throughput = section(text, "### tiny (img/s)")
    assert "| GPUs | fp32 bs32 |" in throughput
    assert re.search(r"^\| 1 \| [\d.]+ / 1\.0 \(\+[\d.]+%\) \+ \|$", throughput, re.M), throughput
    assert re.search(r"^\| 2 \| [\d.]+ / - \|$", throughput, re.M), throughput
    # speedup (efficiency), marked ~ where the windows are too noisy for it
    assert re.search(r"^\| 2 \| [\d.]+x \(\d+%\)( ~)? \|$", throughput, re.M), throughput
    comparison = section(text, "## Comparison with the baseline")
    assert re.search(r"^\| tiny-fp32-bs32-gpu1 \| [\d.]+ \| 1\.0 \| \+[\d.]+% \| ±5% \| improved \| "
                     r"fixture, far too low \|$", comparison, re.M), comparison
    assert "No baseline entry: tiny-fp32-bs32-gpu2." in comparison
    method = section(text, "## Method")
    assert "| warm-up steps per run, not timed | 2 |" in method and "| steps per measured window | 5 |" in method
    assert "| data | synthetic |" in method
    # How a case's figure is made (not "their windows pooled", which it no longer is since the sequential verdict).
    assert ("| runs per case (fresh worker processes): a run's figure is the median of its windows, the case's the "
            "geometric mean of its runs' |") in method and "pooled" not in method
    environment = section(text, "## Environment")
    assert re.search(r"^\| PyTorch \| \d", environment, re.M) and "| measured on | cpu" in environment
    # Every link resolves to a copied file or folder next to the report; each run's stderr is linked.
    targets = links(section(text, "## Logs"))
    assert targets and all(t.startswith("report-logs/") for t in targets)
    assert all((report.parent / t).exists() for t in targets), targets
    for case_id in ("tiny-fp32-bs32-gpu1", "tiny-fp32-bs32-gpu2"):
        assert f"report-logs/{case_id}/attempt0/run0/stderr.log" in targets
    assert any("rank 1 stderr.log" in line for line in text.splitlines())  # the 2-rank job's own rank logs

    # dlperf report renders the same document to the same report, but for the logs folder's name.
    assert cli.main(["report", "results.json", "-o", "again/x.md"]) == 0
    again = (dlperf.path / "again" / "x.md").read_text()
    assert again.split("## Logs")[0] == text.split("## Logs")[0]
    assert section(again, "## Logs").replace("x-logs/", "report-logs/") == section(text, "## Logs")
    assert all((dlperf.path / "again" / t).exists() for t in links(section(again, "## Logs")))


# --------------------------------------------------------------------------- synthetic documents


def record(gpus: int, throughput: float, *, precision="amp", reference=None, minimum=None, baseline=None,
           verdict="pass", log_dir=None, **extra):
    case = Case.make("resnet50", precision, 256, gpus)
    scaling = None
    if reference is not None and gpus > 1:
        scaling = {"ranks": gpus, "reference": reference, "reference_source": "this session",
                   "speedup": throughput / reference, "efficiency": throughput / reference / gpus, "minimum": minimum}
    stats = {"n": 5, "median": throughput, "mean": throughput, "min": throughput * 0.98, "max": throughput * 1.01,
             "stdev": 1.0, "cv": 0.01}
    runs = [{"index": 0, "log_dir": str(log_dir), "windows": []}] if log_dir else []
    return {"id": case.id, "nodeid": f"dlperf::{case.id}", "case": case.to_dict(), "unit": "img/s",
            "verdict": verdict, "throughput_verdict": verdict, "message": f"{case.id}: {verdict}",
            "throughput": throughput, "stats": stats,
            "baseline": None if baseline is None else {"throughput": baseline, "tolerance": 0.05, "source": "seed 000"},
            "difference": None if baseline is None else throughput / baseline - 1,
            "parameters": {"device": "cuda", "warmup_steps": 20, "steps": 100, "repeats": 5, "runs": 5,
                           "launcher": "local"},
            "scaling": scaling, "attempts": [{"throughput": throughput, "runs": runs}], "duration": 60.0, **extra}


def document(cases, environment=None):
    return {"schema_version": 1, "kind": "dlperf-results", "created": "2026-11-21T00:00:00+00:00",
            "environment": {} if environment is None else environment, "options": {"confirm": 1},
            "baseline": {"path": "baselines/v100.json", "source": "DLPerf", "hardware": {"gpu": "V100"}},
            "cases": cases}


GPU_ENV = {
    "host": {"hostname": "dgx1", "os": "Linux", "kernel": "5.15.0", "cpu": "Xeon Gold 6271C", "cpu_count": 80,
             "cpu_cores": 40, "memory_bytes": 630 * 2**30},
    "versions": {"python": "3.11.7", "torch": "2.14.1", "cuda": "13.0", "nccl": "2.30.7", "dali": None},
    "gpus": {"count": 4, "model": "Tesla V100-SXM2-32GB", "driver": "525.60.11", "cuda_driver": "12.0",
             "devices": [{"index": i, "name": "Tesla V100-SXM2-32GB", "memory_bytes": 32 * 2**30} for i in range(4)],
             "available": True, "reason": None},
    "topology": {"text": "GPU0\tX\tNV2\nGPU1\tNV2\tX", "reason": None},
    "git": {"commit": "abc123", "short": "abc", "branch": "main", "dirty": True, "root": "/src"},
    "device": {"type": "cuda", "name": "Tesla V100-SXM2-32GB", "index": 0},
}


def test_multi_gpu_cases_get_speedup_and_efficiency_per_gpu_count():
    cases = [record(1, 790.0, baseline=790.0), record(2, 1501.0, reference=790.0, minimum=0.8),
             record(4, 2528.0, reference=790.0, minimum=0.85, verdict="fail"),
             record(1, 370.0, precision="fp32"), record(4, 1406.0, precision="fp32", reference=370.0)]
    text = markdown_report.render(document(cases, GPU_ENV))
    throughput = section(text, "### resnet50 (img/s)")
    table = [line for line in throughput.splitlines() if line.startswith("|")]
    assert table[:5] == [
        "| GPUs | amp bs256 | fp32 bs256 |", "|---:|---:|---:|",
        "| 1 | 790.0 / 790.0 (+0.0%) | 370.0 / - |", "| 2 | 1501.0 / - |  |", "| 4 | 2528.0 / - FAIL | 1406.0 / - |"]
    assert table[5:] == [
        "| GPUs | amp bs256 | fp32 bs256 |", "|---:|---:|---:|",
        "| 1 | 1.00x | 1.00x |", "| 2 | 1.90x (95%) |  |", "| 4 | 3.20x (80%) FAIL | 3.80x (95%) |"]
    assert "the 1-GPU figure is from this session. Cases below 80%, 85% efficiency are marked FAIL." in throughput


def test_the_environment_renders_gpus_topology_and_git_and_leaves_out_what_is_missing():
    text = markdown_report.render(document([record(1, 790.0)], GPU_ENV))
    environment = section(text, "## Environment")
    for row in ("| kernel | 5.15.0 |", "| CPU cores / threads | 40 / 80 |", "| memory | 630.0 GiB |",
                "| GPUs | 4 x Tesla V100-SXM2-32GB |", "| GPU 3 | Tesla V100-SXM2-32GB, 32.0 GiB |",
                "| NVIDIA driver / CUDA driver API | 525.60.11 / 12.0 |", "| NCCL | 2.30.7 |",
                "| git | abc123 (main), with uncommitted changes |"):
        assert row in environment
    assert "DALI" not in environment  # null: not installed, left out
    assert "```\nnvidia-smi topo -m\nGPU0\tX\tNV2\nGPU1\tNV2\tX\n```" in section(text, "### GPU topology")

    sparse = markdown_report.render(document([record(1, 790.0)], {
        "host": {"cpu_count": 2}, "gpus": {"count": 0, "reason": "NVML library not found"},
        "topology": {"text": None, "reason": "nvidia-smi not found"}, "git": None}))
    environment = section(sparse, "## Environment")
    assert "| CPU cores / threads | unknown / 2 |" in environment
    assert "| GPUs | none (NVML library not found) |" in environment
    assert "| measured on | unknown device |" in environment
    assert "Unknown: nvidia-smi not found." in section(sparse, "### GPU topology")
    assert "on unknown host (unknown device)" in sparse
    # Without any environment at all, the report still renders, without a topology section.
    assert "### GPU topology" not in markdown_report.render(document([record(1, 790.0)]))


def test_telemetry_and_flops_columns_come_from_the_records():
    def stat(mean, top):
        return {"mean": mean, "max": top, "n": 10}

    telemetry = {"gpu": {"available": True, "reason": None, "devices": {"0": {
        "utilization_gpu": stat(93.0, 100.0), "memory_used_bytes": stat(1.0, 30 * 2**30),
        "power_w": stat(250.0, 300.0), "throttle_reasons": ["sw_power_cap"]}}},
        "host": {"cpu_percent": stat(40.0, 50.0), "rss_bytes": stat(1.0, 2**31)}}
    flops = {"flops_per_sample": 24.6e9, "tflops": 19.4, "peak_tflops": 125.0, "mfu": 0.155}
    text = markdown_report.render(document([record(1, 790.0, telemetry=telemetry, flops=flops)], GPU_ENV))
    utilization = section(text, "## FLOPs, MFU and utilization")
    assert "| resnet50-amp-bs256-gpu1 | 19.4 | 15.5% | 93% / 100% | 40% | 2048 MiB |" in utilization
    assert "| resnet50-amp-bs256-gpu1 | 24.6 | 125 | 30.0 GiB | 250 W | - | - | sw_power_cap | - |" in utilization


def test_a_failed_log_copy_keeps_the_old_folder_and_links_the_originals(tmp_path, monkeypatch):
    source = tmp_path / "runs" / "run0"
    source.mkdir(parents=True)
    (source / "stderr.log").write_text("worker said\n")
    doc = document([record(1, 790.0, log_dir=source)])
    out = tmp_path / "site" / "report.md"
    written = markdown_report.write_report(doc, out)
    assert written.logs == tmp_path / "site" / "report-logs" and written.problem is None
    copied = written.logs / "resnet50-amp-bs256-gpu1" / "attempt0" / "run0" / "stderr.log"
    assert copied.read_text() == "worker said\n"

    def full_disk(src, dst, **kwargs):
        Path(dst).mkdir(parents=True)
        (Path(dst) / "partial").write_text("")
        raise OSError(28, "No space left on device")

    (source / "stderr.log").write_text("a later session\n")
    monkeypatch.setattr(shutil, "copytree", full_disk)
    written = markdown_report.write_report(doc, out)
    assert written.logs is None and "No space left on device" in written.problem
    assert copied.read_text() == "worker said\n"  # the previous copy is intact
    assert sorted(p.name for p in out.parent.iterdir()) == ["report-logs", "report.md"]  # no staging left
    text = out.read_text()
    assert "Links point to the original log folders: the logs could not be copied" in text
    assert "](../runs/run0/stderr.log)" in text and (out.parent / "../runs/run0/stderr.log").exists()


def test_a_log_folder_that_is_gone_is_said_so_and_an_earlier_copy_is_kept(tmp_path):
    gone, there = tmp_path / "cleaned-up" / "run0", tmp_path / "kept" / "run0"
    there.mkdir(parents=True)
    (there / "stdout.log").write_text("kept\n")
    doc = document([record(1, 790.0, log_dir=gone), record(2, 1501.0, log_dir=there)])
    written = markdown_report.write_report(doc, tmp_path / "report.md")
    assert written.logs == tmp_path / "report-logs"
    text = (tmp_path / "report.md").read_text()
    assert f"- **resnet50-amp-bs256-gpu1**, attempt 0, run 0: no run's log folder at `{gone}`" in text
    assert "](report-logs/resnet50-amp-bs256-gpu2/attempt0/run0/stdout.log)" in text

    # The originals go away; rendering the same results again links the earlier copy, and loses nothing.
    shutil.rmtree(there)
    written = markdown_report.write_report(doc, tmp_path / "report.md")
    assert (tmp_path / "report.md").read_text() == text
    assert (written.logs / "resnet50-amp-bs256-gpu2" / "attempt0" / "run0" / "stdout.log").read_text() == "kept\n"


def test_a_log_dir_that_names_another_folder_is_neither_copied_nor_linked(tmp_path):
    # A results file is data: a log_dir naming a folder that is no run's (no stdout.log or stderr.log of its own)
    # is not copied into the report's folder, which gets published; a run folder beside it is.
    secrets, logs, run = tmp_path / "home" / ".ssh", tmp_path / "var" / "log", tmp_path / "runs" / "run0"
    for folder, name in ((secrets, "id_rsa"), (logs, "syslog.log"), (run, "stderr.log")):
        folder.mkdir(parents=True)
        (folder / name).write_text("private\n" if folder != run else "worker said\n")
    (logs / "stdout.log").symlink_to(secrets / "id_rsa")  # a link named like a run's log does not make one
    doc = document([record(1, 790.0, log_dir=secrets), record(2, 1501.0, log_dir=logs),
                    record(4, 2900.0, log_dir=run)])
    written = markdown_report.write_report(doc, tmp_path / "out" / "report.md")
    copied = sorted(p.relative_to(written.logs).as_posix() for p in written.logs.rglob("*") if p.is_file())
    assert copied == ["resnet50-amp-bs256-gpu4/attempt0/run0/stderr.log"]
    text = (tmp_path / "out" / "report.md").read_text()
    for gpus, folder in ((1, secrets), (2, logs)):
        assert f"- **resnet50-amp-bs256-gpu{gpus}**, attempt 0, run 0: no run's log folder at `{folder}`" in text
    assert "id_rsa" not in text and "syslog" not in text


def test_an_invalid_document_writes_nothing(tmp_path):
    with pytest.raises(jsonio.DocumentError, match=r"\$\.cases\[0\]"):
        markdown_report.write_report(document([{"id": "x"}]), tmp_path / "report.md")
    assert not list(tmp_path.iterdir())


def test_cells_escape_pipes_and_newlines():
    assert markdown_tables.table(["a"], [["x | y\nz"]])[-1] == "| x \\| y z |"


HANGS = '''
import os, time
from pytest_dlperf import register_model

@register_model("hangs", task="image-classification", batch_size=4, defaults={"image_size": 4, "num_classes": 2})
def hangs(settings):
    # torch imported where the worker builds the model: the session's pytest, a process of its own, loads this
    # conftest and imports no torch otherwise (about 3.7 s of CPU).
    from torch import nn

    class Hang(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3 * 4 * 4, 2)

        def forward(self, x):
            open(os.path.join(os.path.dirname(__file__), "started"), "a").close()
            time.sleep(600)
            return self.fc(x.flatten(1))

    return Hang()
'''


def test_an_interrupted_session_still_writes_the_results_and_the_report(dlperf):
    dlperf.pytester.makeconftest(HANGS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PLUGINS_OFF, "--dlperf-device", "cpu", "--dlperf-model", "hangs", "--dlperf-json", "results.json",
         "--dlperf-report", "report.md"],
        cwd=dlperf.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (dlperf.path / "started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the case never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    [record] = jsonio.load(dlperf.path / "results.json", "results")["cases"]
    assert record["verdict"] == "error"
    assert record["message"] == "hangs-fp32-bs4-gpu1: interrupted before the case finished"
    text = (dlperf.path / "report.md").read_text()
    assert "| hangs-fp32-bs4-gpu1 | error | hangs-fp32-bs4-gpu1: interrupted before the case finished |" in text


def test_the_method_names_the_interval_the_sessions_verdicts_used():
    kept = Path(__file__).resolve().parents[1] / "benchmarks/gpu-runs/2026-11-26-h200/verdict-sessions/0.03-unchanged-3.json"
    document = json.loads(kept.read_text())
    assert document["cases"][0]["evidence"]["estimate"]["confidence"] == 0.95  # judged under the rule of its day
    assert "with a 95% interval" in section(markdown_report.render(document), "## Method")
    document["cases"][0]["evidence"]["estimate"]["confidence"] = 0.98
    assert "with a 98% interval" in section(markdown_report.render(document), "## Method")

"""benchmarks/gpu_check.sh --dry-run: every step, CPU-safe, and the bundle a GPU run leaves.

The dry run prints the commands a GPU run would run and runs CPU versions of them: the
offline install, the machine facts, tests/gpu (which skip without CUDA), overhead.py,
a seed run on the ``tiny`` model and (part 3) verdict_quality.py's sessions of ``tiny``.  Parts 1 and 2 run side by side, as two commands into
one output folder (as on a GPU machine, where each is one command of at most 10 minutes):
about 40 s of CPU time in all, 25-30 s on an idle 2-core machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pytest_dlperf import jsonio

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
BUNDLE = {"part1-summary.txt", "part1-logs.tar.gz", "overhead.json", "part2-summary.txt", "results.json",
          "cpu-dry-run.json", "part2-report.tar.gz"}
SEEDS = ("resnet50-fp32-bs256-gpu1", "resnet50-tf32-bs256-gpu1", "resnet50-amp-bs256-gpu1", "vgg16-amp-bs128-gpu1",
         "bert-base-amp-bs64-gpu1", "gpt2-bf16-bs8-gpu1")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and timeout (coreutils)")


def start_script(*args: str) -> subprocess.Popen:
    env = dict(os.environ, DLPERF_PYTHON=sys.executable)
    env.pop("DLPERF_CHECK_KEEP", None)
    return subprocess.Popen(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"gpu_check.sh {proc.args[2:]} ran past {timeout} s:\n{out[-4000:]}")
    return proc.returncode, out


def run_script(*args: str, timeout: float = 60) -> tuple[int, str]:
    return finish(start_script(*args), timeout)


def members(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return [name.removeprefix("./") for name in tar.getnames()]


def test_the_dry_run_runs_every_step_and_leaves_the_bundle(tmp_path):
    out = tmp_path / "out"
    parts = [start_script(str(out), "--part", part, "--dry-run") for part in ("1", "2")]
    text = ""
    for proc in parts:
        code, output = finish(proc, 600)
        assert code == 0, output[-8000:]
        text += output

    # The bundle: these files and nothing else, at most 8.
    files = {p.name for p in out.iterdir()}
    assert files == BUNDLE and len(files) <= 8
    assert all((out / name).is_file() and (out / name).stat().st_size > 0 for name in files)

    # What a GPU run would run, printed in full.
    would = [line.removeprefix("DRY RUN: would run: ") for line in text.splitlines()
             if line.startswith("DRY RUN: would run: ")]
    assert len(would) == 7  # install and machine facts in each part, tests/gpu, overhead, seeds
    assert any(re.search(r"-m pytest .*tests/gpu", cmd) for cmd in would)
    overhead = next(cmd for cmd in would if "overhead.py" in cmd)
    assert "--model resnet50 --precision amp --batch-size 256" in overhead and "--device cuda" in overhead
    seeds = next(cmd for cmd in would if "--dlperf-model" in cmd)
    for option in ("--dlperf-device cuda", "--dlperf-runs 3", "--dlperf-json", "--dlperf-report", "--dlperf-plot",
                   "--dlperf-save-baseline"):
        assert option in seeds, option
    assert all(case in seeds for case in SEEDS)

    # Part 1: the install, the machine facts, tests/gpu skipping with the reason, the ratio.
    part1 = (out / "part1-summary.txt").read_text()
    assert "dry run: 1" in part1
    assert re.search(r"^  (install|machine|gpu-tests|overhead) ok\(exit=0\)", part1, re.MULTILINE)
    assert len(re.findall(r"^  \S+ ok\(exit=[01]\)", part1, re.MULTILINE)) == 4, part1
    assert re.search(r"tests/gpu: (\d+) tests: 0 passed, 0 failed, 0 errors, \1 skipped", part1), part1
    assert "CUDA not available" in part1
    assert re.search(r"^  ratio harness/bare: \d+\.\d+", part1, re.MULTILINE), part1
    logs = members(out / "part1-logs.tar.gz")
    for name in ("install.log", "machine/environment.json", "gpu-tests.log", "gpu-tests.xml", "overhead.log"):
        assert name in logs, (name, logs)
    overhead_doc = json.loads((out / "overhead.json").read_text())
    assert overhead_doc["case"]["model"] == "tiny" and "ratio" in overhead_doc

    # Part 2: the seed run's outputs, measured on the CPU; the baseline with its provenance.
    part2 = (out / "part2-summary.txt").read_text()
    assert "seeds: 1 tests: 1 passed" in part2 and "dlperf summary" in part2, part2
    results = json.loads((out / "results.json").read_text())
    jsonio.validate(results, "results")
    assert [c["id"] for c in results["cases"]] == ["tiny-fp32-bs32-gpu1"]
    assert results["environment"]["device"]["type"] == "cpu"
    baseline = json.loads((out / "cpu-dry-run.json").read_text())
    jsonio.validate(baseline, "baseline")
    assert [c["model"] for c in baseline["cases"]] == ["tiny"]
    assert "gpu_check.sh --part 2 --dry-run" in baseline["provenance"]["notes"]
    assert baseline["provenance"]["measured_by"] == "pytest-dlperf"
    report = members(out / "part2-report.tar.gz")
    for name in ("report/report.md", "report/seeds.log", "report/seeds.xml", "report/part2-summary.txt"):
        assert name in report, (name, report)
    assert any(re.fullmatch(r"report/plots/.+\.png", name) for name in report), report
    assert any(name.startswith("report/report-logs/tiny-fp32-bs32-gpu1/") for name in report), report


def test_the_dry_run_of_part_3_judges_sessions_and_leaves_their_table(tmp_path):
    out = tmp_path / "out"
    code, text = run_script(str(out), "--part", "3", "--dry-run", timeout=300)
    assert code == 0, text[-8000:]
    assert {p.name for p in out.iterdir()} == {"part3-verdicts.txt"}
    would = [line.removeprefix("DRY RUN: would run: ") for line in text.splitlines()
             if line.startswith("DRY RUN: would run: ")]
    vq = next(cmd for cmd in would if "verdict_quality.py" in cmd)
    for option in ("--model resnet50", "--precision amp", "--batch-size 256", "--device cuda", "--slowdown 0.05",
                   "--sessions 10", "--tolerances 0.03", "--budget"):
        assert option in vq, option
    summary = (out / "part3-verdicts.txt").read_text()
    assert re.search(r"^  verdicts ok\(exit=0\)", summary, re.MULTILINE), summary
    assert "cost: unchanged 8 samples a step, slowed 10 (20.0% less throughput" in summary
    for kind in ("unchanged", "slowed"):  # one session each, judged at the dry run's 50%
        assert re.search(rf"^ +50% \| {kind} +\| +1 \|", summary, re.MULTILINE), summary


def test_usage_errors():
    assert run_script()[0] == 2
    assert run_script("out", "--part", "4")[0] == 2
    assert run_script("out", "--part")[0] == 2
    assert run_script("out", "--bogus")[0] == 2
    code, shown = run_script("--help")
    assert code == 0 and "--dry-run" in shown and "pip download" in shown

"""Convergence cases: the learnable data set, the training loop, the verdict, the figures and one session.

A module-scoped fixture writes a small learnable set (3 classes, 32-pixel PNGs) once.  The
worker's loop runs in-process on it (the target reached; a learning rate 1000x too high
not); the verdict, figures and report pieces are fed controlled figures; one pytester
session runs a good and a broken convergence case end to end.
"""

from __future__ import annotations

import typing

import dataclasses
import itertools
import json
import math
import types
from pathlib import Path

import pytest

from pytest_dlperf import baseline, cli, jsonio
from pytest_dlperf.controller import collection
from pytest_dlperf.cases import Case
from pytest_dlperf.convergence import RunFigures, judge_time, pooled
from pytest_dlperf.gate.policy import Policy, settle
from pytest_dlperf.reporting.verdicts import render
from pytest_dlperf.convergence.verdict import ExpectedTime
from pytest_dlperf.data.learnable import DatasetError, class_looks, write_learnable
from pytest_dlperf.protocol import ConvergenceSpec, WorkerResult, WorkerSpec
from pytest_dlperf.reporting import convergence as report
from pytest_dlperf.results.case import CaseResult, Status
from pytest_dlperf.worker.convergence import learning_rate

CLASSES = 3
TARGET = {"metric": "top1", "value": 0.9}
SETTINGS = {"data": "torchvision", "num_classes": CLASSES}


@pytest.fixture(scope="module")
def learnable(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("learnable") / "set"
    counts = write_learnable(root, CLASSES, train_per_class=64, val_per_class=20, size=32, seed=1)
    assert counts == {"train": CLASSES * 64, "val": CLASSES * 20}
    return root


# --------------------------------------------------------------------------- the data set


def test_learnable_layout_and_refusals(learnable, tmp_path):
    looks = class_looks(CLASSES)
    for split, per_class in (("train", 64), ("val", 20)):
        folders = sorted(p.name for p in (learnable / split).iterdir())
        assert folders == [look.name for look in looks]
        assert all(len(list((learnable / split / f).glob("*.png"))) == per_class for f in folders)
    assert len({look.hue for look in looks}) == CLASSES and len({look.shape for look in looks}) == CLASSES
    assert not [p for p in learnable.parent.iterdir() if p.name.startswith(".")]  # no staging folder left
    with pytest.raises(DatasetError, match="not empty.*--force"):
        write_learnable(learnable, 2)
    with pytest.raises(DatasetError, match="--classes: 1 is not allowed"):
        write_learnable(tmp_path / "one", 1)
    # The CLI: exit 2 with one line for a non-empty folder; --force replaces it whole.
    target = tmp_path / "cli"
    target.mkdir()
    (target / "old.txt").write_text("x")
    assert cli.main(["dataset", "--learnable", "--classes", "2", "--per-class", "3", "--val-per-class", "2",
                     "--size", "16", "--out", str(target)]) == cli.TROUBLE
    assert cli.main(["dataset", "--learnable", "--classes", "2", "--per-class", "3", "--val-per-class", "2",
                     "--size", "16", "--force", str(target)]) == cli.OK
    assert sorted(p.name for p in target.iterdir()) == ["train", "val"]


# --------------------------------------------------------------------------- the worker's loop


def test_learning_rate_warms_up_linearly_then_decays_to_zero():
    rates = [learning_rate(s, peak=0.4, warmup_steps=4, total_steps=20) for s in range(20)]
    assert rates[:4] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert rates[4] == pytest.approx(0.4) and rates[12] == pytest.approx(0.2)
    assert all(a >= b for a, b in itertools.pairwise(rates[4:])) and rates[-1] < 0.01
    assert learning_rate(50, peak=0.4, warmup_steps=4, total_steps=None) == 0.4


def _train(learnable: Path, tmp_path: Path, lr: float, epochs: float, run_index: int = 0) -> dict:
    from pytest_dlperf.worker import convergence

    case = Case.make("tiny", "fp32", 32, 1, SETTINGS, TARGET)
    spec = WorkerSpec(case=case, device="cpu", warmup_steps=0, steps=1, repeats=1, telemetry=False,
                      data_dir=str(learnable), data_workers=0, run_index=run_index, result_dir=str(tmp_path),
                      convergence=ConvergenceSpec("top1", 0.9, max_epochs=epochs, lr=lr, eval_every=3))
    result = WorkerResult.started(spec, 0, 1)
    convergence.run(spec, result)
    document = result.to_dict()
    jsonio.validate(document, "result")
    return document


def test_the_loop_reaches_the_target(learnable, tmp_path):
    # The broken recipe's run is the session's below; this run is seeded as a case's second run.
    document = _train(learnable, tmp_path, lr=0.4, epochs=12, run_index=1)
    good = document["convergence"]
    assert good["reached"] and good["stopped"] == "target" and good["final"] >= 0.9 and good["seed"] == 1
    assert good["curve"][-1]["seconds"] == good["seconds_to_target"]
    assert good["samples_to_target"] == good["curve"][-1]["step"] * 32
    assert good["epochs_to_target"] == pytest.approx(good["samples_to_target"] / (CLASSES * 64))
    assert good["lr"] == pytest.approx(0.4 * 32 / 256)
    assert [p["samples"] for p in good["curve"]] == sorted(p["samples"] for p in good["curve"])
    assert len(document["windows"]) == len(good["curve"]) and all(w["throughput"] > 0 for w in document["windows"])


# --------------------------------------------------------------------------- the verdict and figures


def run_figures(seconds: float | None, seed: int = 0, final: float = 0.95, stopped: str = "target") -> RunFigures:
    reached = seconds is not None
    return RunFigures(seed=seed, metric="top1", target=0.9, reached=reached, stopped=stopped,
                      seconds_to_target=seconds, epochs_to_target=2.0 if reached else None,
                      samples_to_target=640 if reached else None, final=final, seconds=seconds or 30.0,
                      samples=640, epochs=2.0, throughput=100.0,
                      curve=({"seconds": 1.0, "samples": 320, "epoch": 1.0, "top1": 0.5, "loss": 1.0},
                             {"seconds": seconds or 30.0, "samples": 640, "epoch": 2.0, "top1": final,
                              "loss": 0.2}))


class Said(typing.NamedTuple):
    status: Status
    message: str


def judged(*args, inconclusive: str = "below", **kwargs) -> Said:
    """judge_time's judgement after the session's --dlperf-inconclusive policy, and its message."""
    out = settle(judge_time(*args, **kwargs), Policy(inconclusive))
    return Said(out.status, render(out))


def test_time_to_target_verdicts():
    expected = ExpectedTime(10.0, 0.2, "a test")
    runs = [run_figures(9.0, 0), run_figures(11.0, 1), run_figures(10.5, 2)]
    assert judged("c", runs, expected).status is Status.PASS
    slow = judged("c", [run_figures(12.5, 0), run_figures(13.0, 1)], expected)
    assert slow.status is Status.FAIL and "27.5% slower than the baseline 10.0 s" in slow.message
    faster = [run_figures(7.0, 0), run_figures(7.1, 1), run_figures(6.9, 2)]
    assert judged("c", faster, expected).status is Status.IMPROVED
    # One seed 30% faster: its interval (the prior's noise, tolerance / 3 per run) is wholly below the
    # slow threshold, so it passes, but not wholly below the fast one: not confirmed as improved.
    assert judged("c", [run_figures(7.0)], expected).status is Status.PASS
    # One seed 15% slower: its interval spans the slow threshold: undecided, and not failed while the
    # estimate is within it (--dlperf-inconclusive below), failed with --dlperf-inconclusive fail.
    alone = judged("c", [run_figures(11.5)], expected)
    assert alone.status is Status.INCONCLUSIVE and "(98% CI " in alone.message and ", 1 run;" in alone.message
    assert judged("c", [run_figures(11.5)], expected, inconclusive="fail").status is Status.FAIL
    assert judged("c", runs, None).status is Status.NO_BASELINE
    assert judged("c", runs, None, require_baseline=True).status is Status.FAIL
    # One seed that misses the target fails the case, however fast the others were.
    missed = judged("c", [run_figures(5.0, 0), run_figures(None, 1, final=0.25, stopped="epochs")], expected,
                        budget="top1 >= 0.9 within 2 epochs")
    assert missed.status is Status.FAIL
    assert missed.message == ("c: target not reached in 1 of 2 runs (seeds 0, 1): top1 0.25 at the end (seed 1, "
                              "2.0 epochs, 30.0 s; stopped: the epoch budget spent); goal top1 >= 0.9 within 2 epochs")
    figures = pooled(runs)
    assert figures["seconds_to_target"] == 10.5 and figures["reached"] == 3 and figures["stats"]["n"] == 3
    assert pooled([run_figures(5.0), run_figures(None, 1)])["seconds_to_target"] is None


def test_curves_and_the_report_section(tmp_path):
    case = Case.make("tiny", "bf16", 32, 2, SETTINGS, TARGET, {"lr": 0.2})
    assert case.id == "tiny-bf16-bs32-gpu2-torchvision-num_classes=3-top1-0.9-lr=0.2"
    assert "convergence" in case.markers and Case.from_dict(case.to_dict()) == case
    assert not case.same_config(Case.make("tiny", "bf16", 32, 1, SETTINGS))
    result = CaseResult(id=case.id, case=case, verdict=Status.PASS, unit="s",
                        convergence={**pooled([run_figures(4.0), run_figures(5.0, 1)]),
                                     "goal": {"metric": "top1", "target": 0.9}, "baseline": None})
    assert CaseResult.from_dict(json.loads(json.dumps(result.to_dict()))).convergence == result.convergence
    (curve_set,) = report.curve_sets([result])
    assert [c.seed for c in curve_set.curves] == [0, 1] and curve_set.curves[0].points[-1] == (4.0, 640, 0.95)
    text = "\n".join(report.markdown_section([result]))
    assert "## Time to accuracy" in text and f"| {case.id} | pass | top1 0.9 | 2/2 | 4.5 s |" in text
    assert "| bf16-bs32-gpu2-torchvision-num_classes=3-top1-0.9-lr=0.2 | 4.0 | 640 | 0.950 |" in text
    pytest.importorskip("matplotlib")
    (png,) = report.write_curves([result], tmp_path)
    assert png.name == "convergence-tiny.png" and png.read_bytes()[:4] == b"\x89PNG"
    assert report.write_report_curves([result], tmp_path / "report.md") == {
        "tiny": "report-curves/convergence-tiny.png"}
    # A model's name is no file name: a conftest may register "My Net/v2".
    assert dataclasses.replace(curve_set, model="My Net/v2").filename == "convergence-my-net-v2.png"


# --------------------------------------------------------------------------- baselines and collection


def entry(**fields) -> dict:
    return {"model": "tiny", "precision": "fp32", "batch_size": 32, "settings": SETTINGS, "target": TARGET,
            "budget": {"epochs": 8}, **fields}


def load(tmp_path: Path, *cases: dict, version: int = 2) -> baseline.Baseline:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema_version": version, "kind": "dlperf-baseline",
                                "provenance": {"source": "t"}, "cases": list(cases)}))
    return baseline.load(path)


def test_baseline_entries_and_usage_errors(tmp_path, learnable):
    loaded = load(tmp_path, entry(seeds=3, time_to_target=4.0), {**entry(), "recipe": {"lr": 100}})
    first, broken = loaded.entries
    assert first.case.converges and first.throughput is None and first.seeds == 3 and first.time_to_target == 4.0
    assert broken.case.recipe == (("lr", 100),) and broken.case.id.endswith("-lr=100")
    with pytest.raises(jsonio.DocumentError, match="convergence case .* is version 2"):
        load(tmp_path, entry(), version=1)
    with pytest.raises(jsonio.DocumentError, match="'budget' is a dependency of 'target'"):
        load(tmp_path, {k: v for k, v in entry().items() if k != "budget"})
    options = types.SimpleNamespace(models=[], precisions=[], batch_sizes=[], gpus=[], settings={},
                                    data_dir=None, convergence_data=str(learnable))
    assert [c.id for c, _ in collection.build_cases(options, loaded)] == [e.case.id for e in loaded.entries]
    problems = [
        (entry(settings={"num_classes": CLASSES}), options, r"\$.cases\[0\].settings.data: .* trains on real data"),
        (entry(batch_size="max"), options, r"\$.cases\[0\].batch_size: .* fixed batch size"),
        (entry(), types.SimpleNamespace(**{**vars(options), "convergence_data": None}),
         "--dlperf-convergence-data: .* give the data set with train/ and val/"),
        (entry(), types.SimpleNamespace(**{**vars(options), "convergence_data": str(learnable / "train")}),
         "--dlperf-convergence-data: .* needs a train/ split"),
        (entry(settings={**SETTINGS, "num_classes": 2}), options, r"settings.num_classes: .* 2 classes, but"),
    ]
    for bad, opts, message in problems:
        with pytest.raises(pytest.UsageError, match=message):
            collection.build_cases(opts, load(tmp_path, bad))


# --------------------------------------------------------------------------- one session, end to end


def test_a_session_gates_convergence_cases(dlperf, learnable):
    good = entry(budget={"epochs": 12, "seconds": 60}, recipe={"lr": 0.4, "eval_every": 3},
                 time_to_target=1000.0, tolerance=0.5)
    broken = entry(budget={"epochs": 1}, recipe={"lr": 400, "eval_every": 3})
    path = dlperf.path / "baseline.json"
    path.write_text(json.dumps({"schema_version": 2, "kind": "dlperf-baseline", "provenance": {"source": "t"},
                                "cases": [good, broken]}))
    result = dlperf.run("--dlperf-baseline", str(path), "--dlperf-convergence-data", str(learnable),
                        "-o", "dlperf_data_workers=0", "--dlperf-json", "results.json", "--dlperf-report",
                        "report.md", "-m", "convergence", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([("tiny-fp32-bs32-gpu1-*-lr=400: target not reached in 1 of 1 run (seed 0): top1 * "
                                  "at the end (seed 0, * epochs, * s; stopped: *); goal top1 >= 0.9 within 1 epochs")])
    cases = {c["id"]: c for c in dlperf.results()["cases"]}
    passed = next(c for c in cases.values() if c["verdict"] == "improved")
    figures = passed["convergence"]
    assert figures["runs"] == 1 and figures["reached"] == 1 and figures["final"] >= 0.9
    assert figures["per_run"][0]["curve"][-1]["top1"] >= 0.9 and math.isfinite(figures["seconds_to_target"])
    assert "faster than the baseline 1000.0 s" in passed["message"]
    report_text = (dlperf.path / "report.md").read_text()
    assert "## Time to accuracy" in report_text
    if (dlperf.path / "report-curves" / "convergence-tiny.png").exists():
        assert "![tiny: learning curves](report-curves/convergence-tiny.png)" in report_text


def test_baseline_diff_reads_convergence_entries():
    from pytest_dlperf.baseline.edit import diff_lines

    def document(*cases):
        return {"schema_version": 2, "kind": "dlperf-baseline", "provenance": {"source": "t"}, "cases": list(cases)}

    old, new = document(entry(time_to_target=8.0)), document(entry(time_to_target=9.0))
    lines, counts = diff_lines(old, new)
    assert counts["changed"] == 1 and lines == [f"~ {Case.from_dict(entry()).id}: time_to_target: 8.0 -> 9.0"]
    lines, counts = diff_lines(old, document())
    assert lines == [f"- {Case.from_dict(entry()).id}: convergence case, time to target 8.0 s"]

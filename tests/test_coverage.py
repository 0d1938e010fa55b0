"""Coverage is part of the verdict (issue 51): a session that gates measures every case it selects, or fails.

A lost GPU, a broken driver or a baseline folder with no file for this machine must not make a green night: the
session stops before any case runs, naming each case it cannot measure and why (``--dlperf-allow-missing`` skips
them, saying so), and under CI a session that gated nothing fails.
"""

from __future__ import annotations

import json

import pytest

from pytest_dlperf.controller import coverage
from pytest_dlperf.results.case import CaseResult, Status

#: A model and a kind of the tests' own, judged in-process in a moment: no worker trains.
QUICK = '''
from torch import nn

from pytest_dlperf import register_model
from pytest_dlperf.controller.kinds import Measurement, register_kind
from pytest_dlperf.results.judgement import Gate, GateName, Judgement, Reason, Status, Why


@register_model("quick", task="regression", batch_size=8, defaults={"in_features": 4})
def quick(settings):
    return nn.Linear(4, 1)


class Quick:
    def measure(self, plan, runner):
        return Measurement("samples/s", throughput=100.0)

    def judge(self, measurement, reference, policy):
        status = Status.NO_BASELINE if reference.expected is None else Status.PASS
        return Judgement(status, (Reason("quick", Why.HEADLINE, status),), (Gate(GateName.THROUGHPUT, status),))


register_kind("quick", Quick(), lambda case, spec: case.model == "quick")
'''


def case(gpus: int, throughput: float = 100.0) -> dict:
    return {"model": "quick", "precision": "fp32", "batch_size": 8, "gpus": gpus, "throughput": throughput,
            "unit": "samples/s"}


def test_a_case_that_cannot_run_here_stops_the_session_before_any_case_runs(dlperf, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    dlperf.pytester.makeconftest(QUICK)
    path = dlperf.baseline([case(1), case(64)])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-json", "results.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["dlperf: 1 selected case(s) cannot be measured here, so this session cannot gate*",
                                 "  quick-fp32-bs8-gpu64: needs 64 ranks, the local launcher reaches *",
                                 "*--dlperf-allow-missing*"])
    assert dlperf.results()["cases"] == []  # none ran, not even the one that could
    # Selecting fewer cases (-m) leaves no gap; --dlperf-allow-missing skips the gap and says so first.
    assert dlperf.run("--dlperf-baseline", path, "-m", "gpu1").ret == pytest.ExitCode.OK
    allowed = dlperf.run("--dlperf-baseline", path, "--dlperf-allow-missing")
    allowed.assert_outcomes(passed=1, skipped=1)
    allowed.stdout.fnmatch_lines(["dlperf: 1 selected case(s) not measured here, skipped (--dlperf-allow-missing): "
                                  "quick-fp32-bs8-gpu64"])


def test_a_gpu_baseline_never_trains_on_the_cpu_unless_asked(dlperf, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a GPU node whose driver broke, as CUDA sees it
    dlperf.pytester.makeconftest(QUICK)
    path = dlperf.baseline([case(1)], hardware={"gpu": "NVIDIA H200", "gpus_per_node": 8})
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-device", "auto")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["  quick-fp32-bs8-gpu1: the baseline was measured on NVIDIA H200 and CUDA is not "
                                 "available here: its cases do not train on the CPU (give --dlperf-device cpu*"])
    dlperf.run("--dlperf-baseline", path, "--dlperf-device", "cpu").assert_outcomes(passed=1)  # asked: it runs


def test_a_baseline_folder_with_no_file_for_this_machine_fails_under_ci(dlperf, monkeypatch):
    dlperf.pytester.makeconftest(QUICK)
    folder = dlperf.path / "baselines"
    folder.mkdir()
    dlperf.baseline([case(1)], name="baselines/other.json",
                    hardware={"device": "cpu", "cpu": "Imaginary CPU 9999", "cpu_count": 512})
    monkeypatch.setenv("CI", "true")
    result = dlperf.run("--dlperf-baseline", str(folder))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["dlperf: this session was asked to gate and judged nothing: its 1 measured case(s) "
                                 "were recorded as this machine's baseline instead (CI: the session fails)"])
    # The next session judges against what was recorded: it gates, and passes.
    assert dlperf.run("--dlperf-baseline", str(folder)).ret == pytest.ExitCode.OK
    monkeypatch.delenv("CI")
    allowed = dlperf.run("--dlperf-baseline", str(folder), "-o", "dlperf_baseline_record=elsewhere")
    assert allowed.ret == pytest.ExitCode.OK  # not under CI: said, not failed
    allowed.stdout.fnmatch_lines(["dlperf: this session was asked to gate and judged nothing*"])


def test_what_counts_as_judged_and_as_ci(monkeypatch):
    from pytest_dlperf.cases import Case
    from pytest_dlperf.results.judgement import Judgement

    one = Case("m", "fp32", 8, 1)
    results = [CaseResult.of(one, None, Judgement.of(status, "x"), "x")
               for status in (Status.SKIPPED, Status.NO_BASELINE, Status.ERROR)]
    assert coverage.judged_nothing(results)
    assert not coverage.judged_nothing([*results, CaseResult.of(one, None, Judgement.of(Status.INCONCLUSIVE, "x"),
                                                                "x")])
    # A node other than rank 0's judges nothing by design: rank 0's node reports the job (issue 51's CI rule
    # failed such a node's session in CI).
    remote = CaseResult.of(one, None, Judgement.of(Status.REMOTE, "rank 0 reports"), "x")
    assert not coverage.judged_nothing([remote])
    assert coverage.judged_nothing([remote, *results])
    for value, under in (("true", True), ("1", True), ("false", False), ("", False)):
        monkeypatch.setenv("CI", value)
        assert coverage.under_ci() is under
    assert json.dumps(coverage.refusal([coverage.Gap("c", "why")])).count("c: why") == 1


def test_a_session_gates_only_where_it_judges_against_something():
    import types

    plain = dict(baseline_from_history=None, against=None, data_only=False)
    assert not coverage.gates(types.SimpleNamespace(**plain), None)
    assert coverage.gates(types.SimpleNamespace(**plain), object())
    assert coverage.gates(types.SimpleNamespace(**{**plain, "baseline_from_history": 5}), None)
    assert coverage.gates(types.SimpleNamespace(**{**plain, "against": "HEAD~1"}), None)
    assert not coverage.gates(types.SimpleNamespace(**{**plain, "data_only": True}), object())  # loaders, unjudged

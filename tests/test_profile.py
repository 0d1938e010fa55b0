"""--dlperf-profile and dlperf explain (issue 49): a case's top operators from one extra run, beside its timed ones,
and the operators whose time per step changed between two profiles."""

from __future__ import annotations

import json

import pytest

from pytest_dlperf import cli
from pytest_dlperf.reporting import explain, markdown
from pytest_dlperf.worker.operators import Operator, Profile, table


def _profile(clock: str = "cpu", step_ms: float = 10.0, **operators: float) -> Profile:
    ops = tuple(Operator(name.replace("__", "::"), ms, 1.0) for name, ms in operators.items())
    return Profile(clock, 10, step_ms, sum(op.self_ms for op in ops), ops)


def test_the_table_is_per_step_largest_first_names_merged_and_idle_operators_left_out():
    events = [("aten::mm", 3000.0, 20), ("ProfilerStep#1", 400.0, 1), ("aten::relu", 0.0, 10),
              ("aten::mm", 1000.0, 20), ("aten::add", 2000.0, 30)]
    found = table(events, 10, "cpu", 0.0123, trace="t.json", top=5)
    assert [(op.name, op.self_ms, op.calls) for op in found.operators] == [
        ("aten::mm", 0.4, 4.0), ("aten::add", 0.2, 3.0), ("ProfilerStep#1", 0.04, 0.1)]
    assert found.total_ms == pytest.approx(0.64) and found.step_ms == pytest.approx(12.3)
    assert Profile.from_dict(json.loads(json.dumps(found.to_dict()))) == found


def test_changes_put_the_operator_that_grew_most_first_and_one_that_shrank_last():
    old = _profile(aten__mm=4.0, aten__cumsum=0.5, aten__add=1.0)
    new = _profile(step_ms=16.0, aten__mm=4.2, aten__cumsum=6.0, aten__gelu=0.3)
    found = explain.changes(new, old)
    assert [c.name for c in found] == ["aten::cumsum", "aten::gelu", "aten::mm", "aten::add"]
    assert found[0].delta_ms == pytest.approx(5.5) and found[-1].delta_ms == pytest.approx(-1.0)
    assert found[1].old_ms is None and found[1].cells()[4] == "new"  # not in the old table
    line = explain.headline(new, old)
    assert line.startswith("operators that changed most (profiled steps 10.0 -> 16.0 ms): aten::cumsum +5.50 ms a "
                           "step (0.500 -> 6.000), aten::gelu +0.30 ms"), line
    assert "aten::add -1.00 ms" in explain.headline(new, old, slower=False)


def test_profiles_of_a_cpu_and_a_gpu_are_not_compared():
    cpu, gpu = _profile(aten__mm=1.0), _profile("cuda", aten__mm=0.1)
    assert explain.headline(cpu, gpu) is None
    assert explain.case_lines("x", cpu, gpu) == ["x: not compared: one was profiled on the CPU, the other on the CUDA"]


SLOW_OP = '''
import os

import torch
from torch import nn

from pytest_dlperf import register_model

#: Present: the operator is made slower.  A file, not an environment variable: the plugin keeps a fork server per
#: start-time environment, and a variable set for the slowed session would start a second one (seconds of CPU).
SLOW_FLAG = os.path.join(os.path.dirname(__file__), "slow-op")


class Scan(nn.Module):
    """A running sum over a buffer: one operator whose work the flag file sets."""

    def __init__(self):
        super().__init__()
        self.register_buffer("data", torch.rand(2_000_000 if os.path.exists(SLOW_FLAG) else 1_000))

    def forward(self, x):
        torch.cumsum(self.data, 0)
        return x


@register_model("scannet", task="regression", batch_size=16, defaults={"in_features": 32, "out_features": 4})
def scannet(settings):
    return nn.Sequential(nn.Linear(32, 64), Scan(), nn.ReLU(), nn.Linear(64, 4))
'''


def test_a_fail_and_dlperf_explain_name_the_one_operator_made_slower_first(dlperf, capsys):
    """The issue's acceptance: a model with one operator made slower; explain lists it first, against the saved
    baseline's table and against the earlier results file, and the FAIL names it."""
    dlperf.pytester.makeconftest(SLOW_OP)
    saved = dlperf.run("--dlperf-model", "scannet", "--dlperf-save-baseline", "base.json", "--dlperf-runs", "2",
                       "--dlperf-profile", "on", "--dlperf-json", "old.json")
    assert saved.ret == 0, saved.stdout.str()
    (entry,) = json.loads((dlperf.path / "base.json").read_text())["cases"]
    assert entry["profile"]["clock"] == "cpu" and "trace" not in entry["profile"]
    (old_case,) = dlperf.results("old.json")["cases"]
    assert len(old_case["attempts"][-1]["runs"]) == 2  # the profiled run is not one of the counted ones
    assert json.loads(open(old_case["profile"]["trace"]).read())["traceEvents"]  # the Chrome trace, kept

    (dlperf.path / "slow-op").touch()
    slowed = dlperf.run("--dlperf-model", "scannet", "--dlperf-baseline", "base.json", "--dlperf-profile", "failing",
                        "--dlperf-json", "new.json")
    out = slowed.stdout.str()
    assert slowed.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "operators that changed most (profiled steps" in out and "): aten::cumsum +" in out, out
    for old in ("base.json", "old.json"):
        capsys.readouterr()
        assert cli.main(["explain", str(dlperf.path / "new.json"), str(dlperf.path / old)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("scannet-fp32-bs16-gpu1: profiled step "), lines
        assert lines[3].split()[0] == "aten::cumsum", lines  # under the table's header and its rule
    assert cli.main(["explain", str(dlperf.path / "old.json"), str(dlperf.path / "old.json"), "--case", "x"]) == 1
    report = markdown.render(dlperf.results("new.json"))
    assert "| case | data | forward | backward | optimizer | other | step |" in report  # the phases, beside
    section = report[report.index("## Top operators"):]
    assert section.split("\n| aten::", 1)[1].startswith("cumsum |"), section  # the report's table, largest first


def test_failing_profiles_only_a_case_that_failed(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-profile", "failing", "--dlperf-json", "r.json")
    assert result.ret == 0, result.stdout.str()
    (case,) = dlperf.results("r.json")["cases"]
    assert case["verdict"] == "no-baseline" and "profile" not in case


def test_a_bad_profile_value_is_one_usage_line(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-profile", "sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dlperf-profile: 'sometimes' is not one of off, on, failing*"])

"""The compile setting: compile time outside the windows, reported apart."""

import time
import xml.etree.ElementTree as ET

import pytest

from pytest_dlperf import jsonio, worker


class FakeStep:
    """A training step whose first call is slow, as a ``torch.compile``d model's is."""

    def __init__(self, first_call_seconds: float):
        self.first = first_call_seconds
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.first)

    def sync(self) -> None:
        pass


def test_the_compile_steps_run_before_the_warm_up_and_windows():
    step = FakeStep(0.3)
    reported = []
    compiled = worker.compile_steps(step, reported.append)
    assert step.calls == 2 and len(reported) == 1 and reported[0] < 0.1
    assert 0.25 < compiled["compile_seconds"] <= compiled["compile_steps_seconds"] < 1.0
    windows, _ = worker.measure(step, warmup_steps=0, steps=3, repeats=2, samples_per_step=4)
    assert step.calls == 2 + 6
    assert all(w["seconds"] < 0.1 for w in windows)  # the slow first call is in none of them


def test_a_compiled_case_reports_its_compile_time_apart(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-set", "compile=true", "--dlperf-warmup-steps", "0",
                        "--dlperf-confirm", "0", "--dlperf-json", "results.json", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  tiny-fp32-bs32-gpu1-compile: * img/s, no baseline*; compile * s, outside "
                                 "the measured windows*"])
    data = dlperf.results()
    jsonio.validate(data, "results")
    record = data["cases"][0]
    run = record["attempts"][0]["runs"][0]
    timing = run["timing"]
    assert run["settings"]["compile"] is True
    assert record["compile_seconds"] == pytest.approx(timing["compile_seconds"])
    assert 0 < timing["compile_seconds"] < timing["compile_steps_seconds"]
    # Warm-up 0: the compiling step ran before the first window, not in it.
    assert [w["samples"] for w in run["windows"]] == [32 * 5, 32 * 5]
    assert max(w["seconds"] for w in run["windows"]) < timing["compile_seconds"]
    props = {p.get("name"): p.get("value") for p in ET.parse(dlperf.path / "junit.xml").iter("property")}
    assert float(props["dlperf_compile_seconds"]) == pytest.approx(record["compile_seconds"], abs=1e-3)

"""The compile setting (compile time outside the windows) and the channels_last override."""

import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from pytest_dlperf import jsonio
from pytest_dlperf.worker import main as worker


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
    windows, _ = worker.time_windows(step, warmup_steps=0, steps=3, repeats=2, samples_per_step=4)
    assert step.calls == 2 + 6
    assert all(w["seconds"] < 0.1 for w in windows)  # the slow first call is in none of them


def test_a_compiled_case_reports_its_compile_time_apart(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-set", "compile=true", "--dlperf-warmup-steps", "0",
                        "--dlperf-max-runs", "1", "--dlperf-json", "results.json", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  tiny-fp32-bs32-gpu1-compile: * img/s, no baseline",
                                 "      compile * s, outside the measured windows*"])
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


# Writes the layout of the first batch it sees and of its convolution's weight, once per
# worker process: "nhwc" (channels_last) or "nchw".
LAYOUT_PROBE = textwrap.dedent("""
    import os
    import torch
    from torch import nn
    from pytest_dlperf import register_model

    SEEN = []

    def layout(tensor):
        return "nhwc" if tensor.is_contiguous(memory_format=torch.channels_last) else "nchw"

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            if not SEEN and x.device.type == "cpu":
                SEEN.append(True)
                with open(os.path.join(os.path.dirname(__file__), "layouts"), "a") as f:
                    f.write(f"{layout(x)} {layout(self.conv.weight)}\\n")
            return self.fc(self.conv(x).mean((2, 3)))

    @register_model("probe", task="image-classification", batch_size=8,
                    defaults={"image_size": 8, "num_classes": 2})
    def probe(settings):
        return Probe()
""")


def test_cnns_train_channels_last_under_bf16_unless_the_setting_says_otherwise(dlperf):
    dlperf.pytester.makeconftest(LAYOUT_PROBE)
    entry = {"model": "probe", "precision": "bf16", "batch_size": 8, "throughput": 1.0}
    path = dlperf.baseline([entry, dict(entry, settings={"channels_last": False})])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-max-runs", "1", "--dlperf-json", "results.json",
                        "--dlperf-warmup-steps", "1", "--dlperf-steps", "2", "-o", "dlperf_repeats=1")
    result.assert_outcomes(passed=2)
    records = dlperf.results()["cases"]
    assert [r["id"] for r in records] == ["probe-bf16-bs8-gpu1", "probe-bf16-bs8-gpu1-nchw"]
    assert [r["attempts"][0]["runs"][0]["settings"]["channels_last"] for r in records] == [True, False]
    assert (dlperf.path / "layouts").read_text().split("\n") == ["nhwc nhwc", "nchw nchw", ""]


def test_compile_mode_reaches_torch_compile_and_is_checked():
    import torch

    from pytest_dlperf.cases import Case, check_settings
    from pytest_dlperf.models import get_model_spec
    from pytest_dlperf.worker.training import TrainingStep

    spec = get_model_spec("tiny")
    with pytest.raises(ValueError, match=r"^--dlperf-set.compile_mode: 'fast' is not one of default, reduce-overhead"):
        check_settings({"compile": True, "compile_mode": "fast"}, spec.defaults, "--dlperf-set")
    with pytest.raises(ValueError, match=r"^--dlperf-set.compile_mode: 'reduce-overhead' needs compile=true too$"):
        check_settings({"compile_mode": "reduce-overhead"}, spec.defaults, "--dlperf-set")
    check_settings({"compile": True, "compile_mode": "reduce-overhead"}, spec.defaults, "--dlperf-set")
    case = Case.make("tiny", "fp32", 2, settings={"compile": True, "compile_mode": "reduce-overhead"})
    assert case.id.endswith("-compile-reduce-overhead")
    # reduce-overhead is inductor's CUDA graphs on (its compiler config's triton.cudagraphs), the default off
    for mode, graphs in (("reduce-overhead", True), ("default", False), (None, False)):
        settings = {**spec.settings(), "compile": True, "compile_mode": mode}
        step = TrainingStep(spec, case, settings, torch.device("cpu"))  # compiles lazily: nothing compiled here
        assert step.model.get_compiler_config()["triton.cudagraphs"] is graphs, mode

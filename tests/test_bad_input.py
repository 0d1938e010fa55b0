"""Bad input is refused before any process starts, with one line naming the option or file and the field."""

from __future__ import annotations

import os

import pytest

from pytest_dlperf.cases import check_settings


@pytest.mark.parametrize("value, expected", [
    (-5, "image_size: -5 is not allowed; expected a positive integer (the default is 32)"),
    ("abc", "image_size: 'abc' is not an integer; expected one like the default 32"),
    (1.5, "image_size: 1.5 is not an integer"),
    (True, "image_size: True is not an integer"),
])
def test_a_setting_must_have_its_defaults_type_and_sign(value, expected):
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        check_settings({"image_size": value}, {"image_size": 32, "num_classes": 10}, "--dlperf-set")
    check_settings({"image_size": 64}, {"image_size": 32}, "--dlperf-set")  # a good value passes


def test_bad_settings_are_usage_errors_at_collection(dlperf):
    for value in ("-5", "abc"):
        result = dlperf.run("--dlperf-model", "tiny", "--dlperf-set", f"image_size={value}")
        assert result.ret == 4
        assert "--dlperf-set.image_size:" in result.stderr.str()
    path = dlperf.baseline([{"model": "tiny", "precision": "fp32", "batch_size": 32, "gpus": 1,
                             "throughput": 1.0, "settings": {"num_classes": 0}}])
    result = dlperf.run("--dlperf-baseline", path)
    assert result.ret == 4
    assert f"ERROR: {path}: $.cases[0].settings.num_classes: 0 " in result.stderr.str()


def test_an_absurd_input_batch_is_refused_before_any_process_starts(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-set", "image_size=100000")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --dlperf-set: tiny-fp32-bs32-gpu1-img100000: one batch of input is "
                                 "3,576 GiB, more than this machine's memory or any of its GPUs' (*GiB)*"])
    assert "worker logs" not in result.stdout.str()


def test_more_cpu_ranks_than_cpus_are_skipped_without_starting_anything(dlperf):
    many = (os.cpu_count() or 1) + 1
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-gpus", str(many), "-rs", "--dlperf-log-dir", "logs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*needs {many} ranks, the local launcher reaches {os.cpu_count() or 1}"])
    assert not (dlperf.path / "logs").exists() or not any((dlperf.path / "logs").rglob("run0"))


def test_a_settings_text_cannot_lead_the_logs_out_of_their_folder(dlperf):
    dlperf.pytester.makeconftest("""
        from pytest_dlperf import register_model
        from pytest_dlperf.models import get_model_spec

        TINY = get_model_spec("tiny")
        register_model("named", task="image-classification", batch_size=8,
                       defaults={**TINY.defaults, "label": "plain"}, factory=lambda settings: TINY.factory(settings))
    """)
    result = dlperf.run("--dlperf-model", "named", "--dlperf-set", "label=../../../../escaped", "--dlperf-log-dir",
                        "logs/inner", "--dlperf-report", "out/report.md")
    result.assert_outcomes(passed=1)
    assert not list(dlperf.path.rglob("*escaped*")) or all(
        str(p).startswith(str(dlperf.path / "logs" / "inner")) or str(p).startswith(str(dlperf.path / "out"))
        for p in dlperf.path.rglob("*escaped*"))
    assert not (dlperf.path.parent / "escaped").exists() and not (dlperf.path / "escaped").exists()


def test_cases_refuse_pytest_xdist_in_one_line_and_start_nothing(dlperf):
    # A project whose addopts say "-n auto" would otherwise run no case at all: an xdist worker collects
    # none, and its controller judges none. With -n 0 on the command line the same session runs its case.
    pytest.importorskip("xdist")
    dlperf.pytester.makeini("[pytest]\naddopts = -n 2\n")
    result = dlperf.run_subprocess("--dlperf-model", "tiny", "--dlperf-log-dir", "logs")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == ["ERROR: -n/--dist (pytest-xdist): this session spreads its tests over 2 worker processes, "
                      "but pytest-dlperf cases measure throughput and must run one at a time in this process; "
                      "expected no distribution: add -n 0 (or -p no:xdist) to this command line"]
    assert not (dlperf.path / "logs").exists()
    plain = dlperf.run_subprocess()  # no case asked for: xdist as usual
    assert plain.ret == pytest.ExitCode.NO_TESTS_COLLECTED, plain.stderr.str()
    # In-process (the worker's fork server already started, no interpreter of its own): the same ini, -n 0 given.
    result = dlperf.run("-n", "0", "--dlperf-model", "tiny")
    result.assert_outcomes(passed=1)

"""Collection: cases from baselines and matrix options, markers, selection, usage errors."""

import textwrap

import pytest

from tests.fixtures import tiny_case

# Collection-only runs start no worker, so they take a moment each.


def collected(result):
    return sorted(line.strip() for line in result.outlines if line.strip().startswith("dlperf::"))


def test_plain_pytest_starts_no_benchmark(dlperf):
    dlperf.pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = dlperf.run(fast=False)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "collected 1 item" in out
    assert "dlperf: device" not in out and "dlperf summary" not in out


def test_cases_from_a_baseline_and_the_matrix(dlperf):
    path = dlperf.baseline([tiny_case(100.0, gpus=8), tiny_case(100.0, precision="amp")])
    result = dlperf.run("--collect-only", "-q", "--dlperf-baseline", path,
                        "--dlperf-model", "tiny", "--dlperf-precision", "fp32,amp", "--dlperf-gpus", "1,2")
    # The baseline's amp-gpu1 case is not collected twice.
    assert collected(result) == sorted([
        "dlperf::tiny-fp32-bs32-gpu8", "dlperf::tiny-amp-bs32-gpu1", "dlperf::tiny-fp32-bs32-gpu1",
        "dlperf::tiny-fp32-bs32-gpu2", "dlperf::tiny-amp-bs32-gpu2"])
    assert "5 tests collected" in result.stdout.str()


@pytest.mark.parametrize(("expr", "ids"), [
    ("gpu8", ["dlperf::tiny-fp32-bs32-gpu8"]),
    ("gpu1 and amp", ["dlperf::tiny-amp-bs32-gpu1"]),
    ("dlperf and not gpu1", ["dlperf::tiny-fp32-bs32-gpu8"]),
    ("tiny and fp32", ["dlperf::tiny-fp32-bs32-gpu1", "dlperf::tiny-fp32-bs32-gpu8"]),
    ("resnet50", []),
])
def test_selection_with_markers_under_strict_markers(dlperf, expr, ids):
    path = dlperf.baseline([tiny_case(1.0), tiny_case(1.0, gpus=8), tiny_case(1.0, precision="amp")])
    result = dlperf.run("--collect-only", "-q", "--strict-markers", "-m", expr, "--dlperf-baseline", path)
    assert collected(result) == ids


def test_markers_are_registered(dlperf):
    result = dlperf.run("--markers", fast=False)
    for marker in ("@pytest.mark.dlperf:", "@pytest.mark.gpu8:", "@pytest.mark.amp:", "@pytest.mark.bf16:",
                   "@pytest.mark.resnet50:", "@pytest.mark.tiny:"):
        assert marker in result.stdout.str()


def test_ini_options(dlperf):
    dlperf.pytester.makeini(textwrap.dedent("""
        [pytest]
        dlperf_model = tiny
        dlperf_precision = bf16,amp
        dlperf_batch_size = 4
        dlperf_gpus = 2
    """))
    result = dlperf.run("--collect-only", "-q")
    assert collected(result) == ["dlperf::tiny-amp-bs4-gpu2", "dlperf::tiny-bf16-bs4-gpu2"]
    # The command line wins over the ini file.
    result = dlperf.run("--collect-only", "-q", "--dlperf-precision", "fp32")
    assert collected(result) == ["dlperf::tiny-fp32-bs4-gpu2"]


def test_a_user_model_from_conftest(dlperf):
    dlperf.pytester.makeconftest(textwrap.dedent("""
        from torch import nn
        from pytest_dlperf import register_model

        @register_model("usernet", task="image-classification", batch_size=6,
                        defaults={"image_size": 8, "num_classes": 3})
        def usernet(settings):
            return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, settings["num_classes"]))
    """))
    path = dlperf.baseline([{"model": "usernet", "precision": "fp32", "batch_size": 6, "throughput": 1.0}])
    result = dlperf.run("--dlperf-baseline", path, "--dlperf-model", "usernet", "--dlperf-batch-size", "2", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*usernet-fp32-bs6-gpu1 IMPROVED*", "*usernet-fp32-bs2-gpu1 PASSED (no baseline)*"])


def test_cases_that_cannot_run_here_skip_with_the_reason(dlperf):
    dlperf.pytester.makeconftest(textwrap.dedent("""
        from pytest_dlperf import register_model

        @register_model("needs-apex", task="image-classification", requires={"apex.nonexistent": "apex"})
        def needs_apex(settings):
            raise AssertionError("never built")
    """))
    result = dlperf.run("--dlperf-model", "needs-apex", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*needs-apex-fp32-bs32-gpu1*needs the apex extra (module 'apex.nonexistent' is not installed)"])


def test_cuda_requested_without_cuda(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-device", "cuda", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*tiny-fp32-bs32-gpu1: CUDA not available"])


# --------------------------------------------------------------------------- usage errors


def usage_error(result, *lines):
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line.replace("[", "[[]") for line in lines])  # JSON paths are not sets
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("args", "message"), [
    (("--dlperf-batch-size", "0"), "ERROR: --dlperf-batch-size: 0 is not allowed; expected an integer >= 1 or 'max'"),
    (("--dlperf-precision", "fp8"), "ERROR: --dlperf-precision: unknown precision 'fp8'; expected one of *"),
    (("--dlperf-gpus", "-1"), "ERROR: --dlperf-gpus: -1 is not allowed*"),
    (("--dlperf-device", "tpu"), "ERROR: --dlperf-device: 'tpu' is not one of auto, cuda, cpu"),
    (("--dlperf-steps", "ten"), "ERROR: --dlperf-steps: 'ten' is not an integer"),
    (("--dlperf-tolerance", "5"), "ERROR: --dlperf-tolerance: 5.0 is not allowed; expected a number between 0*"),
    (("-o", "dlperf_timeout=-3"), "ERROR: dlperf_timeout: -3.0 is not allowed*"),
    (("--dlperf-model", "resnet51"), "ERROR: --dlperf-model: unknown model 'resnet51'; registered models: *resnet50*"),
    (("--dlperf-set", "seq_len"), "ERROR: --dlperf-set: 'seq_len' is not KEY=VALUE"),
    (("--dlperf-set", "depth=3"), "ERROR: --dlperf-set.depth: unknown setting 'depth'; this model takes "
                                  "channels_last, compile, compile_mode, data, image_size, num_classes"),
    (("--dlperf-set", "data=tfrecord"), "ERROR: --dlperf-set.data: 'tfrecord' is not one of synthetic, *"),
    (("--dlperf-set", "compile=yes"), "ERROR: --dlperf-set.compile: 'yes' is not true or false"),
    (("-o", "dlperf_malloc=fast"), "ERROR: dlperf_malloc: 'fast' is not one of steady, system"),
])
def test_invalid_options_are_usage_errors(dlperf, args, message):
    usage_error(dlperf.run("--dlperf-model", "tiny", *args, fast=False), message)


def test_missing_baseline(dlperf):
    usage_error(dlperf.run("--dlperf-baseline", "nowhere.json"), "ERROR: nowhere.json: baseline file not found")


def test_malformed_baseline(dlperf):
    (dlperf.path / "b.json").write_text('{"schema_version": 1, "cases": [\n  {"model": "tiny",}\n]}')
    usage_error(dlperf.run("--dlperf-baseline", "b.json"), "ERROR: b.json: not valid JSON: * at line 2 column *")


def test_schema_invalid_baseline_names_the_json_path(dlperf):
    path = dlperf.baseline([tiny_case(1.0), tiny_case(1.0, batch_size=0)])
    usage_error(dlperf.run("--dlperf-baseline", path),
                f"ERROR: {path}: $.cases[1].batch_size: 0 is less than the minimum of 1")


def test_unknown_model_in_a_baseline(dlperf):
    path = dlperf.baseline([tiny_case(1.0), tiny_case(1.0, model="resnet51")])
    usage_error(dlperf.run("--dlperf-baseline", path),
                f"ERROR: {path}: $.cases[1].model: unknown model 'resnet51'; registered models: *tiny*")


def test_matrix_settings_from_the_command_line(dlperf):
    result = dlperf.run("--collect-only", "-q", "--dlperf-model", "tiny", "--dlperf-set", "image_size=48",
                        "--dlperf-set", "channels_last=false,data=synthetic")
    assert collected(result) == ["dlperf::tiny-fp32-bs32-gpu1-nchw-synthetic-img48"]


def test_a_setting_at_the_models_default_is_the_same_case(dlperf):
    path = dlperf.baseline([tiny_case(1.0, settings={"image_size": 32}), tiny_case(1.0, precision="bf16")])
    result = dlperf.run("--collect-only", "-q", "--dlperf-baseline", path, "--dlperf-model", "tiny",
                        "--dlperf-set", "image_size=32", "--dlperf-precision", "fp32,bf16")
    assert collected(result) == ["dlperf::tiny-bf16-bs32-gpu1", "dlperf::tiny-fp32-bs32-gpu1"]
    path = dlperf.baseline([tiny_case(1.0, settings={"image_size": 32}), tiny_case(2.0)])
    usage_error(dlperf.run("--dlperf-baseline", path),
                f"ERROR: {path}: $.cases[1]: duplicate case tiny-fp32-bs32-gpu1 (also $.cases[0])")


def test_unknown_setting_in_a_baseline(dlperf):
    path = dlperf.baseline([tiny_case(1.0, settings={"seq_len": 128})])
    usage_error(dlperf.run("--dlperf-baseline", path),
                f"ERROR: {path}: $.cases[0].settings.seq_len: unknown setting 'seq_len'; this model takes *")


def test_unit_that_does_not_match_the_model(dlperf):
    path = dlperf.baseline([tiny_case(1.0, unit="seq/s")])
    usage_error(dlperf.run("--dlperf-baseline", path),
                f"ERROR: {path}: $.cases[0].unit: 'seq/s' does not match model 'tiny', which reports 'img/s'")

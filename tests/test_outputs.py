"""Output paths: checked before the first case runs; a write that fails at the end loses nothing."""

from __future__ import annotations

import json


def test_an_output_under_proc_is_a_usage_error_before_any_case(dlperf):
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-json", "/proc/dlperf/results.json")
    assert result.ret == 4  # pytest's usage error
    result.stderr.fnmatch_lines(["ERROR: --dlperf-json: /proc/dlperf/results.json: cannot write in /proc*"])
    assert "worker logs" not in result.stdout.str()  # no case ran


def test_an_output_whose_parent_is_a_file_is_a_usage_error(dlperf):
    (dlperf.path / "afile").write_text("")
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-report", "afile/report.md")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --dlperf-report: afile/report.md: cannot write: *"])


def test_a_plot_folder_that_is_a_file_is_a_usage_error(dlperf):
    (dlperf.path / "plots").write_text("")
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-plot", "plots")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --dlperf-plot: plots: is not a folder*"])


def test_a_write_that_fails_at_the_end_is_one_line_and_the_other_outputs_are_written(dlperf):
    # The JSON path is fine when checked, then becomes a folder while the case runs.
    dlperf.pytester.makeconftest("""
        import os

        def pytest_runtest_call(item):
            os.makedirs("results.json", exist_ok=True)
    """)
    result = dlperf.run("--dlperf-model", "tiny", "--dlperf-json", "results.json", "--dlperf-report", "report.md",
                        "--dlperf-runs", "1", "--dlperf-save-baseline", "saved.json")
    out = result.stdout.str()
    assert result.ret == 1
    lines = [line for line in out.splitlines() if "--dlperf-json not written" in line]
    assert len(lines) == 1, out
    assert "is a folder" in lines[0] or "directory" in lines[0]
    kept = lines[0].split("the results are kept in ")[1].strip()
    assert json.loads(open(kept).read())["cases"][0]["id"] == "tiny-fp32-bs32-gpu1"
    assert (dlperf.path / "report.md").is_file()
    assert json.loads((dlperf.path / "saved.json").read_text())["cases"][0]["model"] == "tiny"
    assert "Traceback" not in out and "INTERNALERROR" not in out

"""Help works: ``pytest --help`` with the plugin installed lists every option, and renders every help text.

In-process sessions: the plugin loads from its entry point as in a process of its own (2 s of CPU less each)."""

from __future__ import annotations

import re

from pytest_dlperf.options import OPTIONS


def dlperf_options(pytester) -> list[str]:
    """Every ``--dlperf-*`` option the plugin declares on the command line (an ini setting's old flag, and a removed
    option's, are hidden: tests/test_options.py), from the parsed namespace of an empty session."""
    config = pytester.parseconfig()
    declared = {"--" + dest.replace("_", "-") for dest in vars(config.option) if dest.startswith("dlperf_")}
    return sorted(declared & {option.flag for option in OPTIONS if option.cli})


def test_pytest_help_lists_every_dlperf_option_and_its_ini_twin(pytester):
    options = dlperf_options(pytester)
    assert len(options) > 30 and "--dlperf-max-runs" in options
    result = pytester.runpytest_inprocess("--help")
    assert result.ret == 0, result.stderr.str()
    out = result.stdout.str()
    assert "Traceback (most recent call last)" not in out + result.stderr.str()
    listed = set(re.findall(r"--dlperf-[a-z-]+", out))
    assert set(options) <= listed, sorted(set(options) - listed)
    # ini twins: dlperf_<name> for every option but the output paths; a help text's '%' shows once.
    assert "dlperf_min_gpu_utilization (string)" in out
    assert "(0.8: 80%)" in out and "80%%" not in out


def test_pytest_help_with_a_dlperf_ini_file(pytester):
    # Help must not depend on the options being valid: it is what a user reads when they are not.
    pytester.makeini("[pytest]\ndlperf_device = nonsense\n")
    result = pytester.runpytest_inprocess("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--dlperf-device=DEVICE*"])
